"""PyTorch as its GPU users run it: the CNNs in channels_last (the study's `memory_format.torch`), torch.compile with
CUDA graphs as a mode of its own (`cudagraphs`, beside `compile`), each recorded as read from what ran, and the
analysis naming the fastest PyTorch variant of every comparison. The GPU side is faked (a device type, a cudagraph
tree); the CPU side runs the real small CNN. Each check runs beside its negative control: a backend, a table or a
record that ignores what is checked, which the same check must catch."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from fwbench.study import grid, modes
from fwbench.study.config import ConfigError, load_schema, validate_config
from tests.conftest import TINY_CONFIG


def _config(**overrides):
    return validate_config({**copy.deepcopy(TINY_CONFIG), **overrides})


# --- the setting ------------------------------------------------------------------------------------------------


def test_the_memory_format_setting_validates_and_a_bad_value_names_its_key():
    assert _config()["memory_format"] == {"torch": "auto"}
    assert _config(memory_format={"torch": "channels_last"})["memory_format"]["torch"] == "channels_last"
    for bad, message in (
        ({"torch": "nhwc"}, "config error: memory_format.torch = 'nhwc': unknown value, expected one of"),
        ({"jax": "auto"}, "config error: unknown key 'memory_format.jax'"),
    ):
        with pytest.raises(ConfigError) as error:
            _config(memory_format=bad)
        assert str(error.value).startswith(message) and "\n" not in str(error.value)
        assert error.value.key == ("memory_format.torch" if "torch" in bad else "memory_format.jax")
    # negative control: a schema without the enum lets the bad value through, so the check above is the schema's
    loose = load_schema()
    del loose["properties"]["memory_format"]["properties"]["torch"]["enum"]
    accepted = validate_config({**TINY_CONFIG, "memory_format": {"torch": "nhwc"}}, loose)
    assert accepted["memory_format"]["torch"] == "nhwc"


def test_the_schema_enumerates_the_registrys_modes_and_memory_formats():
    props = load_schema()["properties"]
    assert props["modes"]["properties"]["torch"]["items"]["enum"] == list(modes.MODES["torch"])
    assert props["ratio_modes"]["properties"]["torch"]["enum"] == list(modes.MODES["torch"])
    assert props["memory_format"]["properties"]["torch"]["enum"] == list(modes.MEMORY_FORMATS)
    with pytest.raises(ValueError, match=r"memory_format.torch = 'nhwc': expected one of auto, channels_last"):
        modes.torch_memory_format("nhwc", "resnet50", "cuda")


@pytest.mark.parametrize(
    ("setting", "model", "device", "chosen"),
    [
        ("auto", "resnet50", "cuda", "channels_last"),
        ("auto", "small_cnn", "cuda", "channels_last"),
        ("auto", "mobilenet_v3_small", "cuda", "channels_last"),
        ("auto", "efficientnet_b0", "cuda", "channels_last"),
        ("auto", "vit_b_16", "cuda", "contiguous"),
        ("auto", "resnet50", "cpu", "contiguous"),
        ("channels_last", "vit_b_16", "cpu", "channels_last"),
        ("contiguous", "resnet50", "cuda", "contiguous"),
    ],
)
def test_auto_is_channels_last_for_a_cnn_on_a_cuda_gpu_only(setting, model, device, chosen):
    assert modes.torch_memory_format(setting, model, device)[0] == chosen


# --- the backend: what it lays out, and what it records ---------------------------------------------------------


@pytest.fixture(scope="module")
def small_cnn_state():
    from fwbench.models import torch_model, torch_state_dict_numpy

    torch.manual_seed(0)
    return torch_state_dict_numpy(torch_model("small_cnn", num_classes=4, image_size=32))


INPUTS = np.random.default_rng(0).normal(size=(2, 32, 32, 3)).astype(np.float32)


def _built(state, setting, backend_class=None, mode="eager"):
    from fwbench.backends import backend_class as named

    cls = backend_class or named("torch")
    backend = cls(threads=1, precision="fp32", mode=mode, memory_format={"torch": setting})
    backend.build("small_cnn", state, num_classes=4, image_size=32)
    return backend, backend.to_device(INPUTS)


def _ran_in(backend, inputs) -> str | None:
    """The layout the backend really ran in, read from its tensors: its inputs' and its first convolution's weight
    (None where they differ)."""
    first = next(m for m in backend.module.modules() if isinstance(m, torch.nn.Conv2d))
    last = inputs.is_contiguous(memory_format=torch.channels_last) and not inputs.is_contiguous()
    weight = first.weight.is_contiguous(memory_format=torch.channels_last) and not first.weight.is_contiguous()
    return ("channels_last" if last else "contiguous") if last == weight else None


def _ignoring_backend():
    """A negative control: a PyTorch backend that ignores the setting (always contiguous) but records it as the
    setting says, as a record taken from the setting alone would."""
    from fwbench.backends.torch import TorchBackend

    class Ignoring(TorchBackend):
        def choose_memory_format(self, model):
            super().choose_memory_format(model)
            return torch.contiguous_format

        def to_device(self, batch_nhwc):
            inputs = torch.from_numpy(np.ascontiguousarray(batch_nhwc.transpose(0, 3, 1, 2)))
            self.record_layout(inputs=inputs)
            return inputs

    return Ignoring


def test_auto_on_a_cpu_runs_and_records_contiguous(small_cnn_state):
    backend, inputs = _built(small_cnn_state, "auto")
    assert _ran_in(backend, inputs) == "contiguous"
    assert backend.effective_settings["memory_format"] == "contiguous"
    detail = backend.effective_settings["memory_format_detail"]
    assert detail == {
        "setting": "auto",
        "chosen": "contiguous",
        "reason": "auto: cpu device, not a CUDA GPU",
        "weights": "contiguous",
        "inputs": "contiguous",
    }


def test_channels_last_forced_on_a_cpu_lays_out_inputs_and_weights_and_records_it(small_cnn_state):
    backend, inputs = _built(small_cnn_state, "channels_last")
    assert _ran_in(backend, inputs) == "channels_last" and inputs.shape == (2, 3, 32, 32)
    assert backend.effective_settings["memory_format"] == "channels_last"
    assert backend.effective_settings["memory_format_detail"]["weights"] == "channels_last"
    # the same logits as the contiguous model's: a layout, not another computation
    reference, reference_inputs = _built(small_cnn_state, "contiguous")
    ours, theirs = backend.to_numpy(backend.forward(inputs)), reference.to_numpy(reference.forward(reference_inputs))
    assert np.abs(ours - theirs).max() <= 1e-5 * max(1.0, np.abs(theirs).max())
    # negative control: a backend that ignores the setting is caught, by the tensors and by its record
    ignoring, ignored = _built(small_cnn_state, "channels_last", _ignoring_backend())
    assert _ran_in(ignoring, ignored) == "contiguous"
    assert ignoring.effective_settings["memory_format"] == "contiguous", "read from the tensors, not the setting"
    assert ignoring.effective_settings["memory_format_detail"]["chosen"] == "channels_last"
    # weights and inputs in different layouts are recorded as such, never as the setting
    backend.record_layout(module=backend.module.to(memory_format=torch.contiguous_format))
    assert backend.effective_settings["memory_format"] == "mixed (weights contiguous, inputs channels_last)"


def test_a_faked_cuda_device_with_auto_chooses_channels_last_for_a_cnn_and_contiguous_for_vit():
    from fwbench.backends.torch import TorchBackend

    backend = TorchBackend(threads=1, precision="fp32", memory_format={"torch": "auto"})
    backend.device = torch.device("cuda")  # what choose_memory_format reads of the device: its type
    assert backend.choose_memory_format("resnet50") == torch.channels_last
    assert backend.effective_settings["memory_format_detail"]["reason"].endswith("the device is a CUDA GPU")
    assert backend.choose_memory_format("vit_b_16") == torch.contiguous_format
    assert "not a convolutional model" in backend.effective_settings["memory_format_detail"]["reason"]
    backend.device = torch.device("cpu")  # negative control: the same backend off the GPU keeps NCHW
    assert backend.choose_memory_format("resnet50") == torch.contiguous_format


def test_a_channels_last_trainer_takes_nhwc_batches_and_trains_as_the_contiguous_one(small_cnn_state):
    from fwbench.backends import get_backend
    from fwbench.training.recipe import Recipe

    recipe = Recipe(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, schedule="constant", epochs=1, seed=0)
    labels, losses = np.arange(4) % 4, {}
    images = np.random.default_rng(1).normal(size=(4, 32, 32, 3)).astype(np.float32)
    for setting in ("contiguous", "channels_last"):
        backend = get_backend("torch", threads=1, precision="fp32", memory_format={"torch": setting})
        trainer = backend.trainer("small_cnn", small_cnn_state, num_classes=4, image_size=32, recipe=recipe)
        host = images if trainer.input_layout == "NHWC" else np.ascontiguousarray(images.transpose(0, 3, 1, 2))
        x, y = trainer.to_device(host, labels)
        assert (trainer.input_layout, backend.effective_settings["memory_format"]) == (
            ("NHWC", "channels_last") if setting == "channels_last" else ("NCHW", "contiguous")
        )
        assert x.is_contiguous(memory_format=torch.channels_last) is (setting == "channels_last")
        losses[setting] = [trainer.value(trainer.step(x, y, 1e-3, step)) for step in range(2)]
    assert losses["channels_last"] == pytest.approx(losses["contiguous"], rel=1e-5)


# --- the cudagraphs mode ----------------------------------------------------------------------------------------


def test_the_cudagraphs_mode_is_torch_compile_in_reduce_overhead_a_compiled_cell_of_its_own():
    from fwbench.running.worker import torch_compiled
    from fwbench.scenarios.profiled import in_worker
    from fwbench.study import autotune

    assert modes.MODES["torch"] == ("eager", "compile", "cudagraphs") and modes.is_compiled("cudagraphs")
    assert modes.torch_compile_mode("cudagraphs", "default") == "reduce-overhead"
    assert modes.torch_compile_mode("compile", "max-autotune") == "max-autotune"
    assert modes.torch_compile_mode("eager", "default") is None
    assert autotune.torch_switches("on", "cudagraphs", "reduce-overhead", None)["inductor_autotune"] is False
    assert autotune.torch_switches("on", "eager", None, None)["inductor_autotune"] is None
    cell = grid.Cell("inference", "torch", "small_cnn", "fp32", 2, 16, "cudagraphs")
    assert torch_compiled(cell) and not torch_compiled(grid.Cell("inference", "torch", "small_cnn", "fp32", 2, 16))
    # on a CPU its kernel profile needs a compile of its own, as mode compile's does
    settings = {"profile": {"batch_sizes": [2]}}
    assert not in_worker(cell, settings, on_gpu=False) and in_worker(cell, settings, on_gpu=True)
    # mode compile in reduce-overhead beside mode cudagraphs would measure one program twice: refused, naming the key
    both = {"torch": ["eager", "compile", "cudagraphs"]}
    with pytest.raises(ConfigError, match=r"^config error: compile.torch_mode = 'reduce-overhead': modes.torch names"):
        _config(modes=both, compile={"torch_mode": "reduce-overhead"})
    assert _config(modes={"torch": ["eager", "compile"]}, compile={"torch_mode": "reduce-overhead"})  # one of them
    # the ratios between frameworks still pair compiled PyTorch in mode default unless ratio_modes says otherwise
    assert modes.ratio_mode({}, "torch") == "compile"
    assert modes.ratio_mode({"ratio_modes": {"torch": "cudagraphs"}}, "torch") == "cudagraphs"


def test_the_cudagraphs_mode_runs_on_a_cpu_and_records_no_cuda_graphs_with_the_reason(tiny_study):
    from fwbench.backends import get_backend
    from fwbench.scenarios import inference

    root, _, settings = tiny_study
    backend = get_backend("torch", threads=1, precision="fp32", mode="cudagraphs")
    cell = grid.Cell("inference", "torch", "small_cnn", "fp32", 2, 16, "cudagraphs")
    metrics = inference.run(
        backend, cell, settings, data_dir=root / "data", weights_path=root / "weights.npz", num_classes=4
    )["metrics"]
    assert metrics["compile_s"] > 0 and metrics["flags"]["recompiled"] is False
    recorded = backend.effective_settings
    assert recorded["mode"] == "cudagraphs" and recorded["compile_mode"] == "reduce-overhead"
    assert recorded["mode_detail"].startswith("torch.compile with CUDA graphs")
    assert recorded["cuda_graphs"] is False
    detail = recorded["cuda_graphs_detail"]
    assert detail["asked"] is True and detail["graphs_recorded"] == 0 and detail["skipped"] >= 1
    assert detail["reason"] == "CUDA graphs exist only on CUDA GPUs: on the cpu, Inductor compiled without them"
    assert recorded["memory_format"] == "contiguous"
    # negative control: an eager backend never asks for CUDA graphs, and says why
    eager = get_backend("torch", threads=1, precision="fp32", mode="eager")
    assert eager.effective_settings["cuda_graphs"] is False
    assert eager.effective_settings["cuda_graphs_detail"] == {"reason": "eager: no torch.compile"}


class _Node:
    def __init__(self, *children):
        self.children = {"f": list(children)} if children else {}


def test_cuda_graphs_are_read_from_inductors_cudagraph_trees_on_a_faked_gpu(monkeypatch):
    """On a CUDA device the record counts the graphs cudagraph trees recorded: a tree of three in effect, none not
    (the same mode asked for them either way)."""
    from torch._inductor import cudagraph_trees

    from fwbench.backends import torch_compile

    trees = {0: type("Manager", (), {"roots": {"f": [_Node(_Node(), _Node())]}})()}
    monkeypatch.setattr(cudagraph_trees, "get_manager", lambda index, create_if_none_exists=True: trees.get(index))
    recorded = torch_compile.cuda_graphs("reduce-overhead", "cuda", 0)
    assert recorded["in_effect"] is True and recorded["graphs_recorded"] == 3 and recorded["reason"] is None
    trees.clear()  # negative control: no tree recorded on the device
    missing = torch_compile.cuda_graphs("reduce-overhead", "cuda", 0)
    assert missing["in_effect"] is False and missing["reason"].startswith("Inductor recorded no CUDA graph")
    default = torch_compile.cuda_graphs("default", "cuda", 0)
    assert default["asked"] is False and default["reason"] == "torch.compile mode default does not use CUDA graphs"


# --- the grid and the estimate ----------------------------------------------------------------------------------


def test_a_study_with_three_torch_modes_plans_three_torch_cells_per_model():
    config = _config(
        frameworks=["torch", "jax"],
        models=["small_cnn", "resnet50"],
        modes={"torch": ["eager", "compile", "cudagraphs"]},
    )
    torch_cells = [c for c in grid.cells(config) if c.suite == "inference" and c.framework == "torch"]
    for model in ("small_cnn", "resnet50"):
        for batch in config["inference"]["batch_sizes"]:
            found = [c.mode for c in torch_cells if (c.model, c.batch_size) == (model, batch)]
            assert found == ["eager", "compile", "cudagraphs"], (model, batch)
        assert grid.group_variants(config, "inference", model) == [
            ("torch", "eager"),
            ("torch", "compile"),
            ("torch", "cudagraphs"),
            ("jax", "jit"),
        ]
    cudagraphs = next(c for c in torch_cells if c.mode == "cudagraphs")
    assert cudagraphs.relpath().startswith("cells/inference/torch/cudagraphs/")
    assert grid.parse_cell_path(cudagraphs.path(), cudagraphs.image_size) == cudagraphs
    # negative control: the default study lists one torch mode and plans one torch cell per comparison
    assert {c.mode for c in grid.cells(_config()) if c.framework == "torch"} == {"eager"}


def test_the_estimate_prices_the_cudagraphs_mode_as_compile():
    from fwbench.study.estimate import estimate, read_costs
    from tests.conftest import REPO

    costs = read_costs(REPO / "benchmarks" / "costs" / "hopper.yaml")
    for key, names in (
        ("process_start_s", ("{}", "torch")),
        ("compile_cold_s", ("{}/resnet50", "{}")),
        ("compile_warm_s", ("{}/vit_b_16", "{}")),
        ("throughput_img_s", ("{}/efficientnet_b0", "torch/efficientnet_b0", "efficientnet_b0")),
    ):
        price = {mode: costs.value(key, *(n.format(f"torch/{mode}") for n in names)) for mode in ("compile", "eager")}
        assert costs.value(key, *(n.format("torch/cudagraphs") for n in names)) == price["compile"], key
        assert price["compile"] != price["eager"], f"{key}: the check must tell the modes apart"
    base = {"frameworks": ["torch", "jax"], "models": ["resnet50"], "suites": ["inference"]}
    three = estimate(validate_config({**base, "modes": {"torch": ["eager", "compile", "cudagraphs"]}}), costs)
    two = estimate(validate_config({**base, "modes": {"torch": ["eager", "compile"]}}), costs)
    measured = {n: e.processes - e.compile_launches for n, e in (("three", three), ("two", two))}
    assert measured["three"] == measured["two"] * 4 // 3, "a worker more per measured launch"
    assert three.compile_launches == two.compile_launches + 1, "and one more compile: eager PyTorch has none"


# --- the analysis: the fastest PyTorch variant, and the paper's code on a third torch mode -----------------------

# Per-round factors over PyTorch eager: at small_cnn batch 1 CUDA graphs are fastest, at batch 8 mode default; for
# resnet50 eager is (its cudagraphs cell failed).
FACTORS = {
    ("torch", "compile", "small_cnn", 1): [2.0, 2.0, 2.0],
    ("torch", "cudagraphs", "small_cnn", 1): [3.0, 3.0, 3.0],
    ("jax", "jit", "small_cnn", 1): [1.5, 1.5, 1.5],
    ("tensorflow", "xla", "small_cnn", 1): [0.5, 0.5, 0.5],
    ("torch", "compile", "small_cnn", 8): [2.0, 2.0, 2.0],
    ("torch", "cudagraphs", "small_cnn", 8): [1.5, 1.5, 1.5],
    ("jax", "jit", "small_cnn", 8): [1.0, 1.0, 1.0],
    ("tensorflow", "xla", "small_cnn", 8): [0.5, 0.5, 0.5],
    ("torch", "compile", "resnet50", 1): [0.8, 0.8, 0.8],
    ("jax", "jit", "resnet50", 1): [1.5, 1.5, 1.5],
    ("tensorflow", "xla", "resnet50", 1): [0.9, 0.9, 0.9],
}
VARIANTS = [("torch", "eager"), ("torch", "compile"), ("torch", "cudagraphs"), ("jax", "jit"), ("tensorflow", "xla")]


def _three_mode_results() -> list[dict]:
    from tests.test_mode_analysis import _cell

    results = []
    for model, batch in (("small_cnn", 1), ("small_cnn", 8), ("resnet50", 1)):
        for framework, mode in VARIANTS:
            result = _cell(framework, mode, batch, model, factors=FACTORS)
            settings = (result["provenance"].get("framework") or {}).get("settings")
            if framework == "torch" and settings is not None:
                settings["memory_format"] = "channels_last"
            if (framework, mode) == ("torch", "cudagraphs") and settings is not None:
                settings["compile_mode"] = "reduce-overhead"
                settings["cuda_graphs"] = False
                settings["cuda_graphs_detail"] = {"asked": True, "reason": "CUDA graphs exist only on CUDA GPUs"}
                result["metrics"]["compile_s"] = 15.0
            results.append(result)
    return results


@pytest.fixture
def three_modes(tmp_path):
    from fwbench.analysis.inference.ratios import write_ratio_tables
    from fwbench.analysis.inference.tidy import write_tidy
    from tests.test_mode_analysis import _write

    paths = _write(tmp_path, _three_mode_results())
    ratios, gains = write_ratio_tables(paths, tmp_path / "speedups.csv", tmp_path / "mode_gains.csv")
    return paths, write_tidy(paths, tmp_path / "inference.csv"), ratios, gains


def test_the_speedups_table_names_the_fastest_pytorch_variant_and_the_ratio_against_it(three_modes, tmp_path):
    from fwbench.analysis.inference.ratios import FASTEST_COLUMNS, SPEEDUP_COLUMNS, speedups
    from fwbench.analysis.inference.tidy import read_tidy
    from fwbench.results import load_result

    paths, frame, ratios, _ = three_modes
    assert list(ratios.columns) == SPEEDUP_COLUMNS and set(FASTEST_COLUMNS) < set(ratios.columns)
    torch_ok = frame[(frame["framework"] == "torch") & (frame["status"] == "ok")]
    assert set(torch_ok["memory_format"]) == {"channels_last"}, "the tidy table carries each cell's layout"
    assert torch_ok.loc[torch_ok["mode"] == "cudagraphs", "cuda_graphs"].tolist() == [False, False]
    by = ratios.set_index(["model", "batch_size", "numerator"])
    expected = {  # (the ratio in the configured pairing, the fastest PyTorch mode, the ratio against it)
        ("small_cnn", 1, "jax"): (0.75, "cudagraphs", 0.5),
        ("small_cnn", 8, "jax"): (0.5, "compile", 0.5),
        ("resnet50", 1, "jax"): (1.875, "eager", 1.5),
        ("small_cnn", 1, "tensorflow"): (0.25, "cudagraphs", 1 / 6),
    }
    for key, (ratio, fastest, against) in expected.items():
        row = by.loc[key]
        assert row["denominator_mode"] == "compile", "the configured pairing is left as it is"
        assert row["ratio"] == pytest.approx(ratio), key
        assert (row["fastest_denominator_mode"], row["fastest_denominator_memory_format"]) == (fastest, "channels_last")
        assert row["ratio_vs_fastest"] == pytest.approx(against), key
        assert row["ci_low_vs_fastest"] == pytest.approx(against) == pytest.approx(row["ci_high_vs_fastest"])
    reread = read_tidy(tmp_path / "speedups.csv").set_index(["model", "batch_size", "numerator"])
    assert reread.loc[("small_cnn", 1, "jax"), "fastest_denominator_mode"] == "cudagraphs"
    # negative control: the same cells with CUDA graphs slowest name another variant, and the ratio against it differs
    results = [load_result(p) for p in paths]
    for result in results:
        if (result["cell"]["framework"], result["cell"]["mode"]) == ("torch", "cudagraphs") and result["metrics"]:
            result["metrics"]["throughput_img_s"] /= 10
    slower = speedups(results).set_index(["model", "batch_size", "numerator"]).loc[("small_cnn", 1, "jax")]
    assert slower["fastest_denominator_mode"] == "compile" and slower["ratio_vs_fastest"] == pytest.approx(0.75)


def test_the_papers_tables_macros_and_figures_take_a_third_torch_mode(three_modes, tmp_path, tiny_config):
    from fwbench.analysis.failures.report import failure_macros, failures_table
    from fwbench.analysis.inference.figures import mode_gain_figure, throughput_figure
    from fwbench.analysis.inference.findings import inference_results
    from fwbench.analysis.inference.macros import macros
    from fwbench.analysis.inference.tables import inference_table, throughput_table
    from fwbench.analysis.paper.abstract import abstract
    from fwbench.analysis.paper.conclusions import conclusions_section
    from fwbench.analysis.paper.failures import failure_summary
    from fwbench.analysis.paper.inference import inference_results_section, modes_sentence
    from fwbench.analysis.published.matching import COLUMNS as PUBLISHED_COLUMNS
    from fwbench.analysis.setup.provenance import study_environment
    from fwbench.analysis.setup.tables import environment_table
    from tests.test_mode_analysis import _header

    paths, frame, ratios, gains = three_modes
    frameworks = ["torch", "jax", "tensorflow"]
    assert set(zip(gains["mode"], gains["baseline_mode"], strict=True)) == {
        ("compile", "eager"),
        ("cudagraphs", "eager"),
    }
    throughput = throughput_table(frame, frameworks, ratios)
    assert _header(throughput)[3:6] == ["PT eager", "PT compiled", "PT CUDA graphs"]
    table = inference_table(frame, frameworks, ratios)
    assert "PT-CUDA graphs for PyTorch (CUDA graphs)" in table
    assert "torch.compile with CUDA graphs (Dynamo + Inductor + cudagraph trees; mode reduce-overhead)" in table
    assert "torch.compile's first call in mode reduce-overhead" in table
    env = study_environment(paths)
    assert env["CUDA graphs (PyTorch)"] == "PyTorch (CUDA graphs): not in effect (CUDA graphs exist only on CUDA GPUs)"
    assert env["Memory format (PyTorch)"] == "channels_last"
    assert "CUDA graphs" in environment_table(env)
    config = validate_config({**tiny_config, "frameworks": frameworks})
    macros(frame, ratios, env, config)
    # the compiled/eager summary speaks for mode compile alone (three gains, not five pooled with CUDA graphs')
    gain = inference_results(frame, ratios, gains, config).gain.tally
    assert (gain.comparisons, gain.high) == (3, 2.0)
    assert "PyTorch ran eagerly, compiled and compiled with CUDA graphs for every model" in modes_sentence(frame)
    failures_table(frame, None, summary=failure_summary(frame)), failure_macros(frame, None)
    # the Results' gain paragraph speaks for torch.compile alone too
    assert "Fig.~\\ref{fig:mode-gain} sets compiled against eager PyTorch" in inference_results_section(
        frame, ratios, gains, config
    )
    throughput_figure(frame, tmp_path / "t.pdf", tmp_path / "t.png")
    mode_gain_figure(gains, tmp_path / "g.pdf", tmp_path / "g.png")
    assert abstract(ratios, frame, None, frameworks).startswith(("Against compiled PyTorch, ", "Against PyTorch, "))
    ledger = pd.DataFrame([{"control": "c", "status": "held", "measured": "", "where": ""}])
    conclusions_section(
        ratios=ratios,
        inference=frame,
        epochs=None,
        agreement=None,
        published=pd.DataFrame(columns=PUBLISHED_COLUMNS),
        ledger=ledger,
        config={**config, "suites": ["inference"]},
    )
