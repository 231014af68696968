"""The study files as shipped, run as the README runs them: every file in config/ dry-runs beside the untouched
config/config.yaml and plans the cells its header states, `fwbench check-config` lists the same cells, and studies a
user writes (a narrower copy of the default, a three-line file) plan no cell of a model they left out."""

from __future__ import annotations

import filecmp
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import background
from tests.conftest import REPO, copy_workflow

STUDY_FILES = sorted(p.name for p in (REPO / "config").glob("*.yaml"))
# A header's counts: "# Cells: 94 (inference 34, training 4, micro 56); measuring processes: 162 (inference 102, ...)."
HEADER = re.compile(r"^# Cells: (\d+) \(([^)]*)\); measuring processes: (\d+) \(([^)]*)\)\.$", re.M)
CELL = re.compile(r"results/cells/[\w/]+\.json")


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The workflow copied as shipped; the tests add their own studies beside config/, never into it."""
    return copy_workflow(tmp_path_factory.mktemp("clone"))


def _run(clone, venv_bin, program, *args) -> str:
    proc = subprocess.run([str(venv_bin / program), *args], cwd=clone, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{program} {' '.join(args)}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def planned_cells(clone, venv_bin, *configfile) -> set[str]:
    """The cells `snakemake -n` plans with the README's command (`--cores all --resources gpu=1`)."""
    output = _run(clone, venv_bin, "snakemake", "-n", "--cores", "all", "--resources", "gpu=1", *configfile)
    outputs = [line for line in output.splitlines() if line.strip().startswith("output:")]
    return {cell for line in outputs for cell in CELL.findall(line)}


@pytest.fixture(scope="module")
def plans(clone, venv_bin):
    """planned_cells of the clone, each study's dry run once per module: the default study is dry-run by its header's
    test and, beside its own file, by the test that they plan the same cells (both in the DEFAULT_PLAN xdist group,
    so one worker runs them and the dry run, tests/background.py: group_by_mark)."""
    done: dict[tuple[str, ...], set[str]] = {}

    def plan(*configfile: str) -> set[str]:
        if configfile not in done:
            done[configfile] = planned_cells(clone, venv_bin, *configfile)
        return done[configfile]

    return plan


DEFAULT_PLAN = pytest.mark.xdist_group("test_study_files.default_plan")


def listed_cells(clone, venv_bin, *files) -> tuple[str, set[str]]:
    """`fwbench check-config`'s summary line and the cells it lists for the same study files."""
    args = [arg for path in files for arg in ("--config", path)]
    first, *cells = _run(clone, venv_bin, "fwbench", "check-config", *args).splitlines()
    return first, {line.strip() for line in cells if line.strip().startswith("results/cells/")}


def _counts(text: str) -> dict[str, int]:
    return {name: int(number) for name, number in (part.split() for part in text.split(", "))}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[DEFAULT_PLAN] * (n == "config.yaml")) for n in STUDY_FILES])
def test_every_shipped_study_dry_runs_and_plans_the_cells_its_header_states(clone, venv_bin, plans, name):
    path = f"config/{name}"
    text = (REPO / path).read_text()
    # The default study is what runs without --configfile; every other file names itself in its command.
    configfile = () if name == "config.yaml" else ("--configfile", path)
    command = ".venv/bin/snakemake --cores all --resources gpu=1" + "".join(f" {arg}" for arg in configfile)
    assert command in text, f"{path}'s header does not give its command: {command}"
    planned = plans(*configfile)
    summary, listed = listed_cells(clone, venv_bin, path)
    assert planned == listed, "check-config and snakemake -n must see the same study"

    header = HEADER.search(text)
    assert header, f"{path}'s header does not state its cells: '# Cells: N (...); measuring processes: P (...).'"
    cells, per_suite, processes, processes_per_suite = header.groups()
    assert len(planned) == int(cells)
    by_suite: dict[str, int] = {}
    for cell in planned:
        suite = cell.split("/")[2]
        by_suite[suite] = by_suite.get(suite, 0) + 1
    assert by_suite == _counts(per_suite)
    stated = f"{cells} cells ({per_suite}), {processes} measuring processes ({processes_per_suite})"
    assert summary.endswith(f": valid, {stated}"), (summary, stated)
    assert "../shared" not in text, "the workflow never reads ../shared/"
    assert filecmp.cmp(clone / path, REPO / path, shallow=False), "a test must not change a shipped study"


@DEFAULT_PLAN
def test_the_default_study_is_the_same_with_or_without_its_file(plans):
    assert plans() == plans("--configfile", "config/config.yaml")


def test_a_copy_of_the_default_with_one_model_plans_only_that_model(clone, venv_bin):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["models"] = ["resnet50"]
    (clone / "one-model.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    planned = planned_cells(clone, venv_bin, "--configfile", "one-model.yaml")
    models = {cell.split("/")[5] for cell in planned if "/micro/" not in cell}
    assert models == {"resnet50"}
    assert planned == listed_cells(clone, venv_bin, "one-model.yaml")[1]


@pytest.mark.parametrize("base", [None, "config/config.yaml"])
def test_a_three_line_study_plans_its_cells_only(clone, venv_bin, base):
    values = {"models": ["vit_b_16"], "suites": ["inference"], "inference": {"batch_sizes": [4]}}
    text = yaml.safe_dump(values, default_flow_style=None)
    if base:
        text = f"extends: {base}\n{text}"
    (clone / "override.yaml").write_text(text)
    planned = planned_cells(clone, venv_bin, "--configfile", "override.yaml")
    # ViT-B/16 at batch 4 in every framework; with the default study as base, PyTorch stays eager (mode_scope.models
    # names neither model of it), as it does from the schema's defaults (one mode each)
    assert planned == {
        f"results/cells/inference/{variant}/vit_b_16/fp32/bs4.json"
        for variant in ("torch/eager", "jax/jit", "tensorflow/xla")
    }
    assert planned == listed_cells(clone, venv_bin, "override.yaml")[1]


def test_a_name_outside_the_study_written_by_an_override_stops_snakemake_with_one_line(clone, venv_bin):
    (clone / "wrong.yaml").write_text("extends: config/config.yaml\nmodels: [resnet50]\n")
    (clone / "wrong-training.yaml").write_text("training: {models: [vit_b_16]}\n")
    proc = subprocess.run(
        [str(venv_bin / "snakemake"), "-n", "--configfile", "wrong.yaml", "wrong-training.yaml"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "config error" in line]
    assert errors == [
        "fwbench: config error: training.models = ['vit_b_16']: vit_b_16 not in models (['resnet50']); "
        "training.models selects among models (in wrong-training.yaml)"
    ]


def test_readme_run_cell_command_resolves_one_cell_for_every_model_of_the_default_study():
    """The README's one-cell command with --model set to each model of the default study (the cell it would
    measure; running them is the slow test below)."""
    from fwbench.cli import _cell_config, build_parser
    from fwbench.study.files import load_config
    from fwbench.study.grid import cells

    study = load_config(REPO / "config" / "config.yaml")
    for suite in ("inference", "training"):
        for model in study["models"]:
            args = build_parser().parse_args(
                [
                    "run-cell", "--suite", suite, "--framework", "jax", "--model", model, "--precision", "fp32",
                    "--batch-size", "8", "--config", "config/config.yaml", "--out", "/tmp/cell.json",
                ]
            )  # fmt: skip
            (cell,) = [c for c in cells(_cell_config(study, args)) if c.suite == suite]
            assert (cell.model, cell.framework, cell.batch_size) == (model, "jax", 8)


def readme_run_cell_command() -> list[str]:
    """The README's one-cell command, as printed there (its continuation lines joined)."""
    text = (REPO / "README.md").read_text().replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if "fwbench run-cell" in line and "--model" in line]
    return line.split()


@background.study("readme_cell")
def _readme_cell(root, venv_bin, env) -> tuple[list[str], subprocess.CompletedProcess, Path]:
    """The README's command as printed, run in a copy of the workflow of its own (it makes the dataset, device record
    and weights there), its `--out` outside the copy: (the command, its process, the result's path)."""
    clone = copy_workflow(root / "clone")
    command = readme_run_cell_command()
    out_at = command.index("--out") + 1
    out = root / "cell.json"
    program = [str(venv_bin / "fwbench"), *command[1:out_at], str(out), *command[out_at + 1 :]]
    proc = subprocess.run(program, cwd=clone, capture_output=True, text=True, timeout=300, env=env)
    return command, proc, out


@pytest.fixture(scope="module")
def readme_cell(background_studies):
    return background_studies.result(_readme_cell)


@pytest.mark.slow
def test_readme_run_cell_command_measures_its_cell(readme_cell):
    """The README's command as printed, run for real in a copy of the workflow (the dataset, device record and weights
    are made on first use, as for a user), its `--out` outside the copy. That `--model` takes every other model of
    the study is the fast test above (each resolves to its cell); a large model's backend, weights and steps are the
    parity and backend tests'."""
    from fwbench.results import load_result

    command, proc, out = readme_cell
    assert command[0] == ".venv/bin/fwbench" and "--config" in command and "config/config.yaml" in command
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = load_result(out)
    assert result["status"] == "ok" and result["cell"]["model"] == command[command.index("--model") + 1]


def _quotes_its_estimate(name: str) -> dict:
    """A GPU study's header quotes benchmarks/estimate_study.py's figure from the costs its machines measured
    (benchmarks/costs/hopper.yaml), and says so where it is more than one ten-minute command of a lend."""
    from fwbench.study.estimate import estimate, minutes, read_costs
    from fwbench.study.files import resolve

    config = resolve([REPO / "config" / name]).config
    total = estimate(config, read_costs(REPO / "benchmarks" / "costs" / "hopper.yaml")).total_s
    header = (REPO / "config" / name).read_text().replace("\n# ", " ")
    assert f"Estimated at {minutes(total)} on one H100 or H200" in header
    assert total <= 600 or "than one ten-minute command" in header
    return config


def test_the_smoke_study_quotes_its_estimate():
    """config/gpu-smoke.yaml: the published table's question in each framework's own arithmetic, as the first GPU
    study ran it on an H200 (benchmarks/gpu/run_smoke.sh, resumed once where its 500 s limit stops it)."""
    config = _quotes_its_estimate("gpu-smoke.yaml")
    # the published table's question: its CNNs and its ViT at its batch size, in the arithmetic it ran, both PyTorch
    # modes; its fourth model is the overlay a second command adds when the lend leaves time
    assert set(config["models"]) == {"resnet50", "efficientnet_b0", "vit_b_16"}
    assert config["inference"]["batch_sizes"] == [128] and config["precisions"] == ["default"]
    assert config["modes"]["torch"] == ["eager", "compile"] and config["device"] == "cuda"
    from fwbench.study.files import resolve

    more = resolve([REPO / "config" / "gpu-smoke.yaml", REPO / "benchmarks" / "gpu" / "fourth-model.yaml"]).config
    assert set(more["models"]) - set(config["models"]) == {"mobilenet_v3_small"}


def test_the_matched_study_plans_the_matched_grid_with_enough_launches_in_one_cache_state():
    """config/gpu-matched.yaml: the four published models at batch 128 in PyTorch eager, compiled and compiled with
    CUDA graphs and JAX, in tf32 and fp32, with at least three measured launches, as many as the first GPU study's
    pooled launch-to-launch spread needs for a ±3% half-width, all after a compile launch (the same cache state)."""
    from fwbench.backends import launch_cache
    from fwbench.study.sizing import launches_for_half_width

    config = _quotes_its_estimate("gpu-matched.yaml")
    assert set(config["models"]) == {"resnet50", "vit_b_16", "mobilenet_v3_small", "efficientnet_b0"}
    assert config["inference"]["batch_sizes"] == [128] and config["precisions"] == ["tf32", "fp32"]
    assert config["modes"]["torch"] == ["eager", "compile", "cudagraphs"] and config["frameworks"] == ["torch", "jax"]
    assert config["device"] == "cuda" and config["suites"] == ["inference"]
    trials = config["inference"]["trials"]
    spread = float(re.search(r"spread, ([\d.]+)% pooled", (REPO / "config" / "gpu-matched.yaml").read_text()).group(1))
    assert trials >= max(3, launches_for_half_width(spread / 100, 0.03))
    assert launch_cache.enabled(config["inference"] | {"compile": config["compile"]}), "a compile launch runs first"


@pytest.mark.slow
def test_the_smoke_study_plans_its_jobs_to_the_tables_the_gpu_host_stops_at(clone, venv_bin):
    """What a lent GPU machine runs (benchmarks/gpu/run_smoke.sh): the smoke study to results/tables/study_time.json
    (the target before the options), one comparison group per model, nothing of LaTeX."""
    output = _run(
        clone, venv_bin, "snakemake", "-n", "results/tables/study_time.json", "--cores", "all", "--resources", "gpu=1",
        "--configfile", "config/gpu-smoke.yaml",
    )  # fmt: skip
    stats = output.split("Job stats:", 1)[1]
    jobs = {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", stats, flags=re.M)}
    assert jobs.pop("total") == 28  # with the inference suite's cell index (rule cell_index)
    assert jobs["inference_group"] == 3 and jobs["parity_logits"] == 2 and jobs["model_facts"] == 3
    assert "paper" not in jobs and "paper_check" not in jobs
