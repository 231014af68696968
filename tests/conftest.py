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


def write_study(root: Path, config: dict) -> Path:
    """Write `config` as the study file of the workflow copied into `root`; the snakemake calls pass STUDY_ARGS."""
    import yaml

    path = root / STUDY_FILE
    path.write_text(yaml.safe_dump(config))
    return path


# The test process imports all three frameworks, which no measuring process ever does. TensorFlow and Triton (which
# torch._dynamo imports, e.g. from torch.optim) each bundle LLVM, and Triton's extension segfaults on import when
# TensorFlow's is already loaded; the other order works. So Triton goes first, whatever order the tests run in.
with contextlib.suppress(ImportError):  # a torch without Triton: nothing to order
    import torch._dynamo  # noqa: F401

# The fast tier (`-m "not slow"`, CONTRIBUTING.md) keeps every check at its smallest model; the same check at the
# large models, where each case costs tens of seconds to minutes of CPU, runs in the full suite.
FAST_MODELS = frozenset({"small_cnn"})


def large_models_slow(names):
    """`names` as parametrize values, those outside FAST_MODELS marked slow."""
    return [name if name in FAST_MODELS else pytest.param(name, marks=pytest.mark.slow) for name in names]


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


@pytest.fixture
def tiny_config() -> dict:
    return copy.deepcopy(TINY_CONFIG)


@pytest.fixture(scope="session")
def venv_bin() -> Path:
    return Path(sys.executable).parent


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
