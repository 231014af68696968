"""Measured parity of every twin (Flax and Keras/TensorFlow) with its torch model, as a table (README and closing
notes quote it).

    .venv/bin/python benchmarks/parity_report.py [--seed 0] [--models resnet50 vit_b_16 ...] [--twins flax tf]

Columns, each for the Flax and the TensorFlow twin side by side: eval-logit error (fp32, max|Δ|/max|ref|) at 224 px
and at the default resolution; train-step errors at the default resolution against PyTorch float64: the twin's worst
per-parameter gradient error in float64, and in float32 next to PyTorch's own float32 worst (the problem's
conditioning; see fwbench.models.parity_core); the train-mode logits in float32.
"""

from __future__ import annotations

import argparse
import importlib

from fwbench.models import MODELS

TWINS = {"flax": ("Flax", "fwbench.models.parity"), "tf": ("TF", "fwbench.models.parity_tf")}
COLUMNS = ("eval 224 px", "eval {resolution} px", "grad fp64", "grad fp32")
TRAIN_LOGITS = "train logits fp32"


def _measure(module, name: str, resolution: int, seed: int) -> dict:
    r = module.train_step_parity(name, resolution, seed)
    return {
        "eval 224 px": module.eval_parity(name, 224, seed),
        "eval {resolution} px": module.eval_parity(name, resolution, seed),
        "grad fp64": max(r["grad64"].values()),
        "grad fp32": max(r["grad32"].values()),
        "torch": max(r["torch_grad32"].values()),
        TRAIN_LOGITS: r["logits32"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--models", nargs="+", default=sorted(MODELS))
    parser.add_argument("--twins", nargs="+", choices=sorted(TWINS), default=list(TWINS))
    args = parser.parse_args()
    modules = {twin: importlib.import_module(TWINS[twin][1]) for twin in args.twins}
    labels = [TWINS[twin][0] for twin in args.twins]
    header = ["model"]
    for column in COLUMNS:
        header += [f"{column.format(resolution=args.resolution)} ({label})" for label in labels]
    header += ["grad fp32 (PyTorch)", *(f"{TRAIN_LOGITS} ({label})" for label in labels)]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for name in args.models:
        measured = [_measure(module, name, args.resolution, args.seed) for module in modules.values()]
        row = [name]
        for column in COLUMNS:
            row += [f"{m[column]:.2e}" for m in measured]
        # PyTorch's own fp32 error is the same computation in every twin's measurement (same seed, same weights)
        row += [f"{measured[0]['torch']:.2e}", *(f"{m[TRAIN_LOGITS]:.2e}" for m in measured)]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
