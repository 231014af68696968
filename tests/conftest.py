from __future__ import annotations

import contextlib
import copy
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Everything a study reads from the repository besides the installed package: a copy of these runs the workflow.
WORKFLOW_PARTS = ("workflow", "report", "profiles", "config", "envs", "reference")


def copy_workflow(root: Path) -> Path:
    """Copy the workflow into `root` (an empty temporary directory) so that a test study writes only there. The
    copy's files are the repository's as shipped: a test's own study goes beside them (write_study)."""
    import shutil

    for part in WORKFLOW_PARTS:
        shutil.copytree(REPO / part, root / part)
    return root


# A test's own study file, beside the copied workflow (never over config/config.yaml): pass STUDY_ARGS to snakemake.
STUDY_FILE = "study.yaml"
STUDY_ARGS = ("--configfile", STUDY_FILE)


def benchmark_script(name: str):
    """benchmarks/NAME.py loaded as a module: the folder holds scripts run by hand, not a package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_study(root: Path, config: dict) -> Path:
    """Write `config` as the study file of the workflow copied into `root`; the snakemake calls pass STUDY_ARGS."""
    import yaml

    path = root / STUDY_FILE
    path.write_text(yaml.safe_dump(config))
    return path


# A process a test starts to compute for it under xdist runs on its worker's CPUs, with as many threads
# (tests/background.py: on_worker_cpus); pinned here, before any framework starts its thread pools.
from tests import background  # noqa: E402 - stdlib and pytest only

background.pin_to_given_cpus()

# The test process imports all three frameworks, which no measuring process ever does. TensorFlow and Triton (which
# torch._dynamo imports, e.g. from torch.optim) each bundle LLVM, and Triton's extension segfaults on import when
# TensorFlow's is already loaded; the other order works. So Triton goes first, whatever order the tests run in.
with contextlib.suppress(ImportError):  # a torch without Triton: nothing to order
    import triton  # noqa: F401 - 0.3 s; torch._dynamo, which loads it, 4.5 s with torch, in each worker

# The suite runs in xdist workers (pyproject.toml), each importing JAX: on a GPU, the first to touch it would take
# 75% of its memory (JAX's default), and the others would run out. Measuring processes set the same (worker.py).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# The fast tier (`pytest -m "not slow"`, CONTRIBUTING.md) is the signal for every change: each module's logic, on
# fakes and tiny inputs. These tests, each seconds to minutes of CPU, run in the full suite only (the `slow` mark,
# added at collection), grouped by why. A test marked `slow` in its own file is a whole-workflow run.
LARGE_MODELS = ("resnet50", "vit_b_16", "mobilenet_v3_small", "efficientnet_b0")
FULL_SUITE_ONLY: dict[str, tuple[str, ...]] = {
    "the large models at 224 px, and every model's training-step parity, the small CNN's included (11 s of XLA "
    "compiling four step programs; the error statistics the bars judge stay fast)": (
        *(
            f"tests/{module}::test_eval_logit_parity[{model}-224]"
            for module in ("test_parity.py", "test_tf_parity.py")
            for model in LARGE_MODELS
        ),
        "tests/test_train_step_parity.py::test_both_twins_take_pytorchs_train_step*",
    ),
    "the large models' eval logits at the study's 32 px in both twins, 6-20 s each, most of it XLA compiling the "
    "forward (the small CNN's stay fast; a change to a twin runs the full suite, CONTRIBUTING.md)": tuple(
        f"tests/{module}::test_eval_logit_parity[{model}-32]"
        for module in ("test_parity.py", "test_tf_parity.py")
        for model in LARGE_MODELS
    ),
    "a large model's twin converted, calibrated, counted or trained eagerly": (
        "tests/test_tf_parity.py::test_conversion_round_trip_is_exact[vit_b_16]",
        "tests/test_parity.py::test_conversion_round_trip_is_exact",
        "tests/test_weights.py::test_calibrated_batchnorm_statistics_make_the_logits_depend_on_the_image",
        "tests/test_tf_parity.py::test_bfloat16_twin_is_bfloat16_throughout[mobilenet_v3_small]",
        "tests/test_tf_parity.py::test_stateless_randomness_is_a_function_of_the_seed",
        "tests/test_tf_parity.py::test_eager_depthwise_training_matches_torch",
        "tests/test_tf_parity.py::test_parameter_counts_equal_torchvision[vit_b_16]",
        "tests/test_weights.py::test_pretrained_vit_is_interpolated_and_gets_a_new_head",
        "tests/test_facts.py::test_vit_attention_is_counted_by_torch",
    ),
    "real trainers compiling train steps in JAX and TensorFlow (the PyTorch trainer's tests stay fast)": (
        "tests/test_training.py::test_step0_agrees_between_frameworks*",
        "tests/test_training.py::test_a_compiled_jax_trainer_compiles_nothing_when_it_recalibrates_or_evaluates",
        "tests/test_training.py::test_trainers_evaluate_identically",
        "tests/test_training.py::test_bn_recalibration_averages_batch_statistics_identically",
        "tests/test_training.py::test_bn_recalibration_is_skipped_without_batch_norm",
        "tests/test_training.py::test_killed_training_resumes_from_last_epoch[jax]",
        "tests/test_training.py::test_killed_training_resumes_from_last_epoch[tensorflow]",
        "tests/test_training.py::test_training_cell_end_to_end",
        "tests/test_training.py::test_partial_last_batch_trains_in_both_frameworks_alike",
        "tests/test_training.py::test_training_rss_policy_and_checkpoints_outside_the_peak[tensorflow]",
        "tests/test_training.py::test_training_rss_policy_and_checkpoints_outside_the_peak[jax]",
        "tests/test_training.py::test_masked_step_equals_the_step_on_the_real_rows*",
        "tests/test_training.py::test_one_compile_time_measure_for_both_frameworks[tensorflow]",
        "tests/test_training.py::test_one_compile_time_measure_for_both_frameworks[jax]",
        "tests/test_training.py::test_trainers_take_their_layout_and_torch_does_no_transpose_in_its_step",
        *(
            f"tests/test_tf_training.py::{test}"
            for test in (
                "test_adam_steps_agree_with_torch*",
                "test_tensorflow_evaluates_like_torch_and_leaves_the_state_alone",
                "test_bn_recalibration_averages_batch_statistics_like_torch",
                "test_bn_recalibration_is_skipped_without_batch_norm",
                "test_steps_follow_torch_and_a_checkpoint_restores_everything",
            )
        ),
        "tests/test_modes.py::test_a_compiled_training_cell_agrees_with_eager_at_step_0_and_never_recompiles_while_timed",
        "tests/test_faults.py::test_a_training_cell_retried_with_a_workaround_starts_again_from_epoch_zero",
    ),
    "fresh processes importing every framework, or every analysis module, or several launches of real workers": (
        "tests/test_figure_style.py::test_figure_jobs_do_not_import_seaborn_or_scipy_stats",
        "tests/test_backends.py::test_a_measuring_process_loads_only_its_own_framework*",
        "tests/test_backends.py::test_precision_default_leaves_each_frameworks_own_switches_alone",
        "tests/test_torchvision_import.py::test_light_import_*",
        "tests/test_devices.py::test_real_probes_agree_on_this_machine",
        "tests/test_blocks.py::test_each_launch_runs_its_blocks_in_a_balanced_order[frameworks1-6]",
        "tests/test_blocks.py::test_each_launch_runs_its_blocks_in_a_balanced_order[frameworks2-4]",
        "tests/test_profiling_pass.py::test_a_profiled_cell_records_its_op_profile_after_its_timed_launches[jax]",
        "tests/test_profiling_pass.py::test_a_failed_profiling_process_leaves_the_timed_result_and_says_why",
        "tests/test_shared_workers.py::test_without_sharing_each_cell_has_a_process_of_its_own",
        "tests/test_trials.py::test_three_frameworks_run_a_whole_williams_design_in_six_rounds",
        "tests/test_compile_launch.py::test_real_workers_compile_cold_in_the_compile_launch_and_load_warm_in_every_"
        "measured_one",
        "tests/test_background.py::test_a_process_importing_the_conftest_with_its_cpus_is_pinned_to_them",
    ),
    "groups of real workers run for one test each: a disturbed launch run again, a crash, a worker serving several "
    "precisions, the micro suite's cells, a cell by hand, the JAX compilation cache (the tiny group, which warm "
    "workers serve and the warm-worker, profiling and study-parity tests read, stays fast)": (
        "tests/test_shared_workers.py::test_a_launch_disturbed_by_another_process_is_run_again_for_every_variant",
        "tests/test_shared_workers.py::test_a_crash_fails_every_cell_of_its_worker_and_no_other",
        "tests/test_shared_workers.py::test_a_worker_serves_its_launch_across_precisions_and_a_cell_that_fails_to_"
        "build_fails_alone",
        "tests/test_micro.py::test_a_wrong_operation_fails_its_cell_with_a_clear_reason",
        "tests/test_micro.py::test_micro_cells_record_both_variants_their_inputs_and_agreement",
        "tests/test_micro.py::test_the_analysis_pairs_real_cells_by_the_round_each_trial_ran_in",
        "tests/test_cli.py::test_run_cell_by_hand",
        "tests/test_runner.py::test_jax_compilation_cache_state_is_recorded",
    ),
    "torch.compile and XLA compiling a real cell or step for one test (each mode's and precision's logic, its "
    "records and its failures stay fast, on fakes)": (
        "tests/test_modes.py::test_a_compiled_cell_reports_compile_time_apart_and_agrees_with_eager",
        "tests/test_modes.py::test_a_recompilation_or_graph_break_in_the_timed_loop_flags_the_cell*",
        "tests/test_torch_variants.py::test_the_cudagraphs_mode_runs_on_a_cpu_and_records_no_cuda_graphs_with_the_reason",
        "tests/test_tf_parity.py::test_bfloat16_train_step_keeps_bfloat16_state",
    ),
    "Hugging Face's `datasets`, 4 s to import for one test of the hub source read from a local copy (the image folder "
    "and the embedded dataset stay fast)": ("tests/test_data_sources.py::test_hugging_face_dataset_saved_to_disk",),
    "LaTeX runs (the log, box, float and structure checks they feed are also checked on logs and text)": (
        "tests/test_pdf_check.py::test_a_clean_document_passes",
        "tests/test_pdf_check.py::test_a_broken_document_reports_each_problem",
        "tests/test_pdf_check.py::test_the_generated_tables_fit_the_page_at_8_pt",
        "tests/test_structure_check.py::test_a_built_paper_is_checked_for_its_shape",
        "tests/test_micro_analysis.py::test_the_crossover_table_fits_the_page_at_its_widest_plain_numbers",
        "tests/test_mode_analysis.py::test_the_mode_tables_fit_the_page_at_8_pt",
        "tests/test_profile_analysis.py::test_the_section_sets_clean_in_the_papers_class",
        "tests/test_published.py::test_the_published_table_fits_the_page_with_every_column_at_its_widest*",
    ),
    "snakemake runs of the shipped studies other than the default, and the HTML report in a real browser": (
        "tests/test_study_files.py::test_every_shipped_study_dry_runs_and_plans_the_cells_its_header_states[paper-h100.yaml]",
        "tests/test_study_files.py::test_every_shipped_study_dry_runs_and_plans_the_cells_its_header_states[gpu-smoke.yaml]",
        "tests/test_study_files.py::test_every_shipped_study_dry_runs_and_plans_the_cells_its_header_states[gpu-matched.yaml]",
        "tests/test_study_files.py::test_a_three_line_study_plans_its_cells_only*",
        "tests/test_study_files.py::test_a_copy_of_the_default_with_one_model_plans_only_that_model",
        *(
            f"tests/test_report_check.py::{test}"
            for test in (
                "test_a_*",  # each in a real browser, on the report of a real Snakemake workflow
                "test_the_zip_form_is_checked_too",
                "test_missing_entries_and_categories_are_reported",
                "test_an_entry_without_description_is_reported",
            )
        ),
    ),
    "a statistical simulation of thousands of ratio tables": (
        "tests/test_analysis.py::test_adjusted_verdicts_of_the_ratio_table_keep_the_family_wise_rate_on_null_comparisons",
    ),
}


# The memory one xdist worker is given: its three frameworks (1.5-3 GB) beside a large model's training-step parity
# in a process of its own (ViT-B/16's peaked at 11 GB when it ran in the test process) or a study's snakemake jobs.
# Two workers have run the suite in the 24 GB of this project's VMs since 2026-11-26, their peaks seldom together.
WORKER_MEMORY_GIB = 10


def xdist_workers(cpus: int, memory_gib: float) -> int:
    """How many workers `-n auto` starts: one per CPU this process may use, as many as the memory holds at
    WORKER_MEMORY_GIB each, at least one (two on the 2-core, 24 GB VMs of this project)."""
    return max(1, min(cpus, int(memory_gib // WORKER_MEMORY_GIB)))


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml): the worker count fits the machine's CPUs and memory (xdist_workers)."""
    memory_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return xdist_workers(len(os.sched_getaffinity(0)), memory_gib)


# The modules whose every test runs in the full suite only: each is whole-workflow runs, marked slow in its own file.
# Every other module keeps at least one fast test, which tests/test_background.py checks in every whole run.
MODULES_WITHOUT_A_FAST_TEST = ("tests/test_slurm.py", "tests/test_workflow.py")


def tiers(items) -> dict[str, tuple[int, int]]:
    """{module: (fast tests, slow tests)} of collected `items` (anything with a `nodeid` and `get_closest_marker`)."""
    counts: dict[str, list[int]] = {}
    for item in items:
        count = counts.setdefault(item.nodeid.split("::")[0], [0, 0])
        count[item.get_closest_marker("slow") is not None] += 1
    return {module: (fast, slow) for module, (fast, slow) in counts.items()}


@pytest.hookimpl(tryfirst=True)  # before "-m" deselects by the slow mark, and before xdist's own hook
def pytest_collection_modifyitems(config, items):
    """Mark FULL_SUITE_ONLY's tests slow: a node id equal to an entry, or starting with an entry's text before its
    final `*`; count each module's tests of each tier (background.TIERS). Then, under `--dist loadgroup`, put the
    tests that read one background build into one xdist group (which suffixes their node ids), and give the tests
    marked `xdist_group` in their files the suffix xdist 3.8.0 fails to give them (tests/background.py:
    group_by_mark)."""
    patterns = [pattern for group in FULL_SUITE_ONLY.values() for pattern in group]
    for item in items:
        if any(
            item.nodeid.startswith(pattern[:-1]) if pattern.endswith("*") else item.nodeid == pattern
            for pattern in patterns
        ):
            item.add_marker(pytest.mark.slow)
    config.stash[background.TIERS] = tiers(items)
    if background.grouping(config):
        background.group_by_build(items)
        background.group_by_mark(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After each test (its teardown included), give back the memory it freed (`_give_back_memory`)."""
    try:
        return (yield)
    finally:
        _give_back_memory()


# Above what the test process holds with all three frameworks imported (1.5-3 GB), so that a full collection and a
# trim follow only the large models' tests, not every test.
RETAINED_MB = 4096


def _give_back_memory() -> None:
    """Return what a test freed to the system once the process holds over RETAINED_MB: glibc keeps freed heap
    memory, so after ViT-B/16's training-step parity the test process stayed at 8 GB of its 11 GB peak (0.8 GB
    after malloc_trim, measured), and every later test ran beside that."""
    import ctypes
    import gc

    with open("/proc/self/statm", encoding="ascii") as handle:
        resident_mb = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20
    if resident_mb > RETAINED_MB:
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)


TINY_CONFIG = {
    "study": "tiny",
    "frameworks": ["torch", "jax"],
    "models": ["small_cnn"],
    "precisions": ["fp32"],
    "dataset": {"image_size": 16, "num_classes": 4, "train_size": 32, "val_size": 16, "seed": 3},
    "inference": {
        "batch_sizes": [1, 2],
        "warmup_iters": 1,
        "trials": 1,
        "blocks": 2,
        "burst_s": 0.01,
        "burst_discard": 1,
        "timeout_s": 120,
        # the test suite runs in two workers, each the other's "other load": no launch is run again for it here
        # (tests/test_shared_workers.py tests the repeats with a load of its own)
        "repeat_disturbed": 0,
    },
    "loader": {"min_seconds": 0.2},
}


def prepare_tiny_study(root: Path) -> tuple[Path, dict, dict]:
    """The tiny study's dataset and small_cnn weights under `root`: (root, validated config, inference settings as
    the workflow passes them to a cell)."""
    from fwbench.data.prepare import prepare
    from fwbench.models.weights import init_weights
    from fwbench.study.config import validate_config

    config = validate_config(TINY_CONFIG)
    prepare(config["dataset"], root / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=root / "weights.npz")
    settings = {k: v for k, v in config["inference"].items() if k != "batch_sizes"}
    return root, config, settings


def run_tiny_cell(study, cell, tmp_path: Path, *, settings: dict | None = None, **kwargs) -> dict:
    """`cell` of the tiny study (`tiny_study`) through the real runner, `settings` over the study's, its result at
    tmp_path/cell.json and the runner's log at tmp_path/cell.log; `kwargs` go to run_cell."""
    from fwbench.running.runner import run_cell

    root, _, base = study
    return run_cell(
        cell,
        {**base, **(settings or {})},
        data_dir=root / "data",
        weights_path=root / "weights.npz",
        num_classes=4,
        threads=1,
        out_path=tmp_path / "cell.json",
        log_path=tmp_path / "cell.log",
        **kwargs,
    )


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory) -> tuple[Path, dict, dict]:
    """The tiny study's dataset and weights, built once per test run for every test that only reads them (runs
    cells on them, never changes them): prepare_tiny_study's (root, config, settings). A test that changes the data
    or the weights builds its own."""
    return prepare_tiny_study(tmp_path_factory.mktemp("tiny-study"))


# The batch sizes the tiny group profiles, and how (the study's `profile` settings)
TINY_GROUP_PROFILE = {"batch_sizes": [2], "steps": 2}
# The tests that read `tiny_group`: one xdist worker runs them all, and the group once (tests/background.py:
# group_by_mark)
READS_TINY_GROUP = pytest.mark.xdist_group("tiny_group")


@pytest.fixture(scope="session")
def tiny_group(tiny_study, tmp_path_factory) -> dict:
    """One healthy group of the tiny study through the real runner, run once per test run for the tests that only
    read what it did (in tests/test_shared_workers.py, test_profiling_pass.py and test_study_parity.py, each marked
    READS_TINY_GROUP): small_cnn at 16 px in PyTorch and JAX at batch sizes 1 and 2, two launches of two blocks, a
    warm worker per framework and launch serving both batch sizes (the default `share_workers`), batch size 2
    profiled by its worker after the last launch's blocks (TINY_GROUP_PROFILE). Its "cells" and "results" (in the
    same order), its "dir" (group.log), each worker "started" (pid, the companions it was told of; in order) and
    each burst the controller "sent" (block, step, worker pid; in order)."""
    from fwbench.running import children
    from fwbench.running import context as context_module
    from fwbench.running.runner import run_group
    from fwbench.study.grid import Cell
    from fwbench.trackers.nvml import COMPANIONS_ENV

    started: list[tuple[int, str]] = []
    sent: list[tuple[int, str, int]] = []

    class Recording(context_module.Child):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            env = args[7] if len(args) > 7 else kwargs.get("env") or {}
            started.append((self.process.pid, env.get(COMPANIONS_ENV, "")))

    request = children.Child.request

    def recording(self, message, timeout_s=None):
        if message and "burst" in message:
            sent.append((message["block"], message["burst"], self.process.pid))
        return request(self, message, timeout_s)

    root, _, base = tiny_study
    directory = tmp_path_factory.mktemp("tiny-group")
    cells = [
        Cell("inference", framework, "small_cnn", "fp32", batch, 16)
        for framework in ("torch", "jax")
        for batch in (1, 2)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(context_module, "Child", Recording)
        patch.setattr(children.Child, "request", recording)
        results = run_group(
            cells,
            {**base, "trials": 2, "blocks": 2, "profile": TINY_GROUP_PROFILE},
            data_dir=root / "data",
            weights_path=root / "weights.npz",
            num_classes=4,
            threads=1,
            out_paths=[directory / f"{c.framework}-{c.batch_size}.json" for c in cells],
            log_path=directory / "group.log",
        )
    return {"cells": cells, "results": results, "dir": directory, "started": started, "sent": sent}


@pytest.fixture
def tiny_config() -> dict:
    return copy.deepcopy(TINY_CONFIG)


@pytest.fixture(scope="session")
def venv_bin() -> Path:
    return Path(sys.executable).parent


BACKGROUND = pytest.StashKey["background.Studies"]()


@pytest.fixture(scope="session", autouse=True)
def background_studies(request, tmp_path_factory, venv_bin):
    """The studies that the selected tests only read, each built once: under xdist by the worker that runs its
    readers, when the first asks; in a serial run started now, and built in the background one after another while
    the other tests run (tests/background.py)."""
    studies = background.Studies(request.session.items, tmp_path_factory.mktemp, venv_bin)
    request.config.stash[BACKGROUND] = studies
    yield studies
    studies.close()


def pytest_runtest_logreport(report):
    """In a child pytest of tests/background.py (in_a_child_process): each test's outcome, for the parent."""
    background.write_child_report(report)


def pytest_terminal_summary(terminalreporter, config):
    """How long each background study took, and how long its tests waited for it."""
    studies = config.stash.get(BACKGROUND, None)
    lines = studies.summary() if studies is not None else []
    if lines:
        terminalreporter.write_sep("-", "studies built in the background")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _quiet_jax(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))


@pytest.fixture
def training_setup(tmp_path, tiny_config):
    """The tiny study's data and small_cnn weights for training cells (test_training, test_modes)."""
    from fwbench.data.prepare import prepare
    from fwbench.models.weights import init_weights
    from fwbench.study.config import validate_config

    tiny_config["training"] = {
        "batch_sizes": [8],
        "epochs": 2,
        "lr": 1e-3,
        "target_top1": 0.3,
        "bn_recalibration_batches": 2,
    }
    config = validate_config(tiny_config)
    prepare(config["dataset"], tmp_path / "data")
    init_weights("small_cnn", num_classes=4, image_size=16, seed=0, out=tmp_path / "w.npz")
    settings = {k: v for k, v in config["training"].items() if k != "batch_sizes"}
    settings.update(loader=config["loader"], seed=config["seed"])
    return tmp_path, settings
