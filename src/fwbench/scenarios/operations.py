"""The micro suite's operations, defined once against fwbench.backends.base.Arrays, and their operands.

Every framework runs the same expression on the same bytes: the weights come from one file made once from the
study's seed (`write_operands`, a workflow rule), the input rows from a seeded stream (`input_rows`) whose first b
rows are the same whatever the largest batch, so adding a batch size changes no other cell's input. Before timing,
each cell checks its output against NumPy in float64 on the same float32 operands (`check_agreement`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fwbench.data.store import sha256_file
from fwbench.io import atomic_write_json

# Relative error bound of a cell's output against the float64 reference, by the dtype the framework computes in:
# the error is max |y - y_ref| / max |y_ref|, so a near-zero entry cannot inflate it. float32 sums of a few thousand
# products stay near 1e-6; TF32 keeps 10 mantissa bits (~1e-3); bfloat16 keeps 8 (~4e-3 per rounding).
AGREEMENT_BOUNDS = {"float32": 1e-4, "tf32": 1e-2, "bfloat16": 5e-2}
REFERENCE = "NumPy float64 reference on the same float32 operands"
INPUT_STREAM, WEIGHT_STREAM = 1, 2  # independent seeded streams: inputs never shift the weights' draws


class OutputMismatch(AssertionError):
    """A cell's output disagrees with the reference: its timing would be of the wrong computation."""


def matmul(a, x, p):
    """(batch, d) x (d, d)."""
    return a.matmul(x, p["w"])


def mlp(a, x, p):
    """Inference of d -> hidden -> d -> classes with ReLU between the layers (biases added by broadcasting)."""
    h = a.relu(a.matmul(x, p["w1"]) + p["b1"])
    h = a.relu(a.matmul(h, p["w2"]) + p["b2"])
    return a.matmul(h, p["w3"]) + p["b3"]


@dataclass(frozen=True)
class Operation:
    name: str
    function: Callable[..., Any]
    params: tuple[str, ...]  # the operand names it reads besides the input rows
    description: str

    def flops_per_row(self, dim: int, hidden: int, classes: int) -> int:
        """Multiply-adds counted as two flops, plus one flop per bias add and per ReLU."""
        if self.name == "matmul":
            return 2 * dim * dim
        return 2 * (dim * hidden + hidden * dim + dim * classes) + 2 * (hidden + dim) + classes


OPERATIONS = {
    "matmul": Operation("matmul", matmul, ("w",), "(batch, d) x (d, d) matrix product"),
    "mlp": Operation("mlp", mlp, ("w1", "b1", "w2", "b2", "w3", "b3"), "MLP d -> hidden -> d -> classes, ReLU"),
}


def operation(name: str) -> Operation:
    try:
        return OPERATIONS[name]
    except KeyError:
        raise KeyError(f"unknown micro operation {name!r}; known: {sorted(OPERATIONS)}") from None


def make_shapes(dim: int, hidden: int, classes: int) -> dict[str, tuple[int, ...]]:
    """Every operand's shape, in the order they are drawn (the one place the operands are listed)."""
    return {
        "w": (dim, dim),
        "w1": (dim, hidden),
        "b1": (hidden,),
        "w2": (hidden, dim),
        "b2": (dim,),
        "w3": (dim, classes),
        "b3": (classes,),
    }


def make_operands(seed: int, dim: int, hidden: int, classes: int) -> dict[str, np.ndarray]:
    """Every operation's weights, float32, drawn like torch.nn.Linear's default: U(-1/sqrt(fan_in), +1/sqrt(fan_in))
    for weights and biases (stored (fan_in, fan_out), so that x @ w is the layer)."""
    rng = np.random.default_rng([seed, WEIGHT_STREAM])
    shapes = make_shapes(dim, hidden, classes)
    operands = {}
    for name, shape in shapes.items():  # in the shapes' order: the draws depend on it
        fan_in = shapes[f"w{name[1:]}"][0] if name.startswith("b") else shape[0]  # a bias takes its layer's fan-in
        bound = 1.0 / np.sqrt(fan_in)
        operands[name] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return operands


def write_operands(path: str | Path, *, seed: int, dim: int, hidden: int, classes: int) -> dict[str, Any]:
    """The operands file (npz) and its provenance beside it (path.json), written atomically."""
    path = Path(path)
    operands = make_operands(seed, dim, hidden, classes)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    np.savez(tmp, **operands)
    tmp.replace(path)
    record = {
        "what": "micro-suite operands: every operation's weights, float32",
        "seed": seed,
        "dim": dim,
        "hidden": hidden,
        "classes": classes,
        "init": "U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases (torch.nn.Linear's default)",
        "shapes": {name: list(array.shape) for name, array in operands.items()},
        "weights_sha256": sha256_file(path),
    }
    atomic_write_json(path.with_suffix(".json"), record)
    return record


def load_operands(path: str | Path, settings: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The operands file, checked against the cell's sizes: a file made for other sizes is named, never used."""
    with np.load(path, allow_pickle=False) as archive:
        operands = {name: archive[name] for name in archive.files}
    dim, hidden, classes = int(settings["dim"]), int(settings["hidden"]), int(settings["classes"])
    expected = make_shapes(dim, hidden, classes)
    found = {name: tuple(array.shape) for name, array in operands.items()}
    if found != expected or any(array.dtype != np.float32 for array in operands.values()):
        raise ValueError(
            f"{path}: operands of shapes {found} do not match micro.dim={dim}, hidden={hidden}, classes={classes}"
        )
    return operands


def input_rows(seed: int, batch_size: int, dim: int) -> np.ndarray:
    """The first `batch_size` rows of the seeded input stream, standard normal float32 (row-major draws: the rows
    of a smaller batch are a prefix of a larger one's)."""
    rng = np.random.default_rng([seed, INPUT_STREAM])
    return rng.standard_normal((batch_size, dim), dtype=np.float32)


def digest(array: np.ndarray) -> str:
    """sha256 of the array's bytes: equal across frameworks' cells when their inputs are byte-identical."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def reference(op: Operation, x: np.ndarray, operands: Mapping[str, np.ndarray]) -> np.ndarray:
    """The operation in float64 NumPy on the float32 operands (the agreement check's yardstick)."""
    from fwbench.backends.numpy import NumpyArrays

    exact = NumpyArrays(np.float64)
    params = {name: exact.put(operands[name]) for name in op.params}
    return op.function(exact, exact.put(x), params)


def relative_error(output: np.ndarray, expected: np.ndarray) -> float:
    """max |output - expected| / max |expected|; infinite when shapes differ or the output is not finite."""
    output, expected = np.asarray(output, np.float64), np.asarray(expected, np.float64)
    if output.shape != expected.shape or not np.isfinite(output).all():
        return float("inf")
    scale = float(np.max(np.abs(expected))) or 1.0
    return float(np.max(np.abs(output - expected))) / scale


def check_agreement(label: str, output: np.ndarray, expected: np.ndarray, dtype: str, tf32: bool) -> dict[str, Any]:
    """The agreement record, or OutputMismatch naming the cell, the error and its bound."""
    key = "tf32" if tf32 and dtype == "float32" else dtype
    bound = AGREEMENT_BOUNDS[key]
    error = relative_error(output, expected)
    if not error <= bound:
        shapes = np.shape(output), np.shape(expected)
        detail = "" if shapes[0] == shapes[1] else f" (output shape {shapes[0]}, expected {shapes[1]})"
        raise OutputMismatch(
            f"{label}: output disagrees with the {REFERENCE}: max relative error {error:.3g} > bound {bound:g} "
            f"for {key}{detail}"
        )
    return {"max_rel_error": error, "bound": bound, "dtype": key, "reference": REFERENCE}
