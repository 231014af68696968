"""Measured parity of every Flax twin with its torch model, as a table (README and closing notes quote it).

    .venv/bin/python benchmarks/parity_report.py [--seed 0] [--models resnet50 vit_b_16 ...]

Columns: eval-logit error (fp32, max|Δ|/max|ref|) at 224 px and at the default resolution; train-step errors at the
default resolution against PyTorch float64: the twin's worst per-parameter gradient error in float64, and in float32
next to PyTorch's own float32 worst (the problem's conditioning; see fwbench.models.parity).
"""

from __future__ import annotations

import argparse

from fwbench.models import MODELS
from fwbench.models.parity import eval_parity, train_step_parity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--models", nargs="+", default=sorted(MODELS))
    args = parser.parse_args()
    print(
        f"| model | eval 224 px | eval {args.resolution} px | grad fp64 (twin) | grad fp32 (twin) | "
        "grad fp32 (PyTorch) | train logits fp32 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.models:
        r = train_step_parity(name, args.resolution, args.seed)
        print(
            f"| {name} | {eval_parity(name, 224, args.seed):.2e} | {eval_parity(name, args.resolution, args.seed):.2e} "
            f"| {max(r['grad64'].values()):.2e} | {max(r['grad32'].values()):.2e} "
            f"| {max(r['torch_grad32'].values()):.2e} | {r['logits32']:.2e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
