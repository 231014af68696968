"""Both twins (Flax and Keras) take PyTorch's training step: against one PyTorch float64 reference per model and seed,
(a) in float64 the twin's logits, gradients and running statistics are PyTorch's (the backward passes are the same
function), and (b) in float32 each twin is as accurate as PyTorch itself (fwbench.models.parity_core, whose
train_step_failures holds the bars and says why they are what they are).

Both twins are judged in one test so that the PyTorch references (a float64 and a float32 step on nine batches) are
computed once: on ViT-B/16 they are a quarter of a twin's time. Weights (BatchNorm statistics included) and inputs are
random and fresh on every run; the seed is in the message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest

from fwbench.models import MODELS, parity, parity_tf
from fwbench.models.parity_core import DEFAULT_RESOLUTION, Truth, global_error, grad_errors, train_step_parity_of
from fwbench.models.parity_core import train_step_failures as failures_of
from tests import background
from tests.conftest import LARGE_MODELS, REPO

NUM_CLASSES = 10


def parity_of_both_twins(name: str, seed: int) -> dict:
    """Both twins of `name` against one PyTorch float64 reference, on batches drawn from `seed`."""
    return train_step_parity_of(
        {
            "jax": parity.step_maker(name, NUM_CLASSES, DEFAULT_RESOLUTION),
            "tensorflow": parity_tf.step_maker(name, NUM_CLASSES, DEFAULT_RESOLUTION),
        },
        name,
        DEFAULT_RESOLUTION,
        seed,
        num_classes=NUM_CLASSES,
    )


def _in_a_process_of_its_own(name: str) -> Callable:
    """A build (tests/background.py) of a large model's parity: a fresh process computes it (each compiles XLA
    programs for up to a minute and holds up to 11 GB), on its xdist worker's core or, in a serial run, beside the
    other tests, and hands back its numbers and seed as JSON; the test judges them."""

    def build(root, venv_bin, env) -> tuple[dict, int]:
        seed = int(np.random.default_rng().integers(1 << 30))
        out = root / "parity.json"
        script = (
            "import json\n"
            "import tests.conftest  # noqa: F401 - orders the frameworks' imports as in the test process\n"
            "from tests.test_train_step_parity import parity_of_both_twins\n"
            f"results = parity_of_both_twins({name!r}, {seed})\n"
            f"open({str(out)!r}, 'w').write(json.dumps(results, default=float))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env=background.on_worker_cpus(env),  # under xdist, on its worker's core (the worker waits for it)
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert proc.returncode == 0, f"{name}, seed {seed}:\n{proc.stderr[-4000:]}"
        return json.loads(out.read_text()), seed

    build.__name__ = build.__qualname__ = f"parity_of_{name}"
    return background.study(
        f"train_step_parity[{name}]",
        wanted=lambda item: (
            item.originalname == "test_both_twins_take_pytorchs_train_step" and item.callspec.params["name"] == name
        ),
    )(build)


IN_BACKGROUND = {name: _in_a_process_of_its_own(name) for name in LARGE_MODELS}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_both_twins_take_pytorchs_train_step(name, background_studies):
    """The large models' parity is computed in processes of their own (IN_BACKGROUND); the small CNN's here."""
    if name in IN_BACKGROUND:
        results, seed = background_studies.result(IN_BACKGROUND[name])
    else:
        seed = int(np.random.default_rng().integers(1 << 30))
        results = parity_of_both_twins(name, seed)
    assert set(results) == {"jax", "tensorflow"}
    failures = [line for twin, r in results.items() for line in failures_of(r, f"{twin} twin of {name}, seed {seed}")]
    assert not failures, "\n".join(failures)
    # one PyTorch reference for both: the same draws of PyTorch's own error beside each twin's
    assert results["jax"]["torch_grad32_global_draws"] == results["tensorflow"]["torch_grad32_global_draws"]
    for twin in results.values():
        for statistic in ("logits32", "loss32", "grad32_global", "grad32_worst", "stats32"):
            assert len(twin[f"{statistic}_draws"]) == len(twin[f"torch_{statistic}_draws"]) == 9, statistic


def test_error_statistics_follow_their_definitions():
    """Truth computes both errors in one pass per tensor: each as its formula says, with the floor on tiny tensors."""
    rng = np.random.default_rng(0)
    reference = {
        "a": rng.standard_normal((3, 4)),
        "b": rng.standard_normal(5) * 1e-9,
        "c": np.zeros(2),
        "kernel": rng.standard_normal((4, 3, 2, 5)),
        "big": rng.standard_normal((300, 301)),  # more than one block
    }
    grads = {key: value + rng.standard_normal(value.shape) * 1e-3 for key, value in reference.items()}
    # a twin's kernels come as transposed views of its own layout (HWIO as OIHW, (in, out) as (out, in)), in float32
    grads["kernel"] = np.ascontiguousarray(grads["kernel"].transpose(2, 3, 1, 0), np.float32).transpose(3, 2, 0, 1)
    grads["big"] = np.ascontiguousarray(grads["big"].T).T
    assert not grads["kernel"].flags.c_contiguous and not grads["big"].flags.c_contiguous
    largest = max(float(np.abs(value).max()) for value in reference.values())
    expected = {
        key: float(np.abs(grads[key] - ref).max()) / max(float(np.abs(ref).max()), 1e-5 * largest)
        for key, ref in reference.items()
    }
    norm = np.sqrt(
        sum(np.sum((grads[k] - r) ** 2) for k, r in reference.items()) / sum(np.sum(r**2) for r in reference.values())
    )
    truth = Truth(reference)
    for _ in range(2):  # the second time with the references it copied into the kernels' memory order
        per_tensor, whole = truth.errors(grads)
        assert per_tensor == pytest.approx(expected, rel=1e-12) and whole == pytest.approx(norm, rel=1e-12)
    assert grad_errors(grads, reference) == per_tensor and global_error(grads, reference) == whole
    assert Truth(reference).errors(reference) == ({key: 0.0 for key in reference}, 0.0)
