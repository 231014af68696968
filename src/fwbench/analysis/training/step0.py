"""The step-0 agreement of each framework with PyTorch: on the first batch, each variant's loss, gradient norm and
loss after one optimiser step against eager PyTorch's, their relative differences, the pairs flagged beyond fp32
rounding, and the final top-1 of both; and how a step-0 row (as written, or read back from step0.csv, including
tables from before modes or more than two frameworks) names the variant it compares.

Every cell is a (framework, execution mode) variant (fwbench.study.modes). The compiled PyTorch step's step-0 probe is
compared with eager PyTorch's, so the paper shows that compiling the step changed nothing it computes before it says
anything about its speed."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, ordered_variants
from fwbench.analysis.common.partners import deviations_differ, with_modes
from fwbench.study.modes import MODES, primary

# Relative difference of the loss after one step in fp32: 1e-3, or three times PyTorch's own fp32 error against its
# float64 probe where that is larger (the same yardstick as the parity tests).
STEP0_TOLERANCE = 1e-3
# The step-0 agreement's columns that do not name a variant (the others are `loss_<tag>` and so on, `variant_tag`).
STEP0_COLUMNS = ["model", "precision", "batch_size", "torch_fp32_error_after_step", "rel_diff_loss"]
STEP0_COLUMNS += ["rel_diff_loss_after_step", "rel_diff_grad_norm", "flagged", "deviation_differs"]
STEP0_COLUMNS += ["numerator", "denominator", "numerator_mode", "denominator_mode"]


def variant_tag(framework: str, mode: str | None) -> str:
    """The name a variant's own columns end in: the framework for its primary mode (`loss_jax`, `final_top1_torch`,
    as tables written before modes have them), framework_mode otherwise (`loss_torch_compile`)."""
    if not mode or framework not in MODES or mode == primary(framework):
        return framework
    return f"{framework}_{mode}"


def _step0_row(key: tuple, a: pd.Series, b: pd.Series, frame: pd.DataFrame) -> dict:
    """One variant's step-0 figures (`a`) against the baseline's (`b`), for one (model, precision, batch); each
    side's own figures in columns named after its `variant_tag`."""
    model, precision, batch = key
    diff = {
        name: abs(a[f"step0_{name}"] - b[f"step0_{name}"]) / max(abs(b[f"step0_{name}"]), 1e-12)
        for name in ("loss", "loss_after_step", "grad_norm")
    }
    exact = b["step0_fp64_loss_after_step"]  # PyTorch's float64 probe: the yardstick for fp32 rounding
    own = abs(b["step0_loss_after_step"] - exact) / abs(exact) if exact is not None and exact == exact else None
    bar = max(STEP0_TOLERANCE, 3 * own) if own is not None else STEP0_TOLERANCE
    sides = [(variant_tag(row["framework"], row["mode"]), row) for row in (a, b)]
    return {
        "model": model,
        "precision": precision,
        "batch_size": batch,
        "torch_fp32_error_after_step": own,
        **{
            f"{name}_{tag}": row[f"step0_{name}"]
            for tag, row in sides
            for name in ("loss", "loss_after_step", "grad_norm")
        },
        **{f"rel_diff_{name}": value for name, value in diff.items()},
        "flagged": bool(diff["loss_after_step"] > bar and precision == "fp32"),
        **{f"final_top1_{tag}": float(_final(frame, row)["top1"]) for tag, row in sides},
        "deviation_differs": deviations_differ(a.get("deviations"), b.get("deviations")),
        "numerator": a["framework"],
        "denominator": b["framework"],
        "numerator_mode": a["mode"],
        "denominator_mode": b["mode"],
    }


def _baseline_variant(variants: Iterable[tuple[str, str]], denominator: str) -> tuple[str, str] | None:
    """The variant every other is compared with: the baseline framework in its primary mode (eager PyTorch, whose
    float64 probe is the yardstick), or its first other mode present in a study without it."""
    found = [variant for variant in variants if variant[0] == denominator]
    order = list(MODES.get(denominator, ()))
    found.sort(key=lambda v: order.index(v[1]) if v[1] in order else len(order))
    return found[0] if found else None


def step0_agreement(frame: pd.DataFrame, numerator: str | None = None, denominator: str = BASELINE) -> pd.DataFrame:
    """Per (model, precision, batch) and other variant (every (framework, mode) of the frame but the baseline's, in
    the paper's order; only `numerator`'s modes when it names a framework): its and the baseline's step-0 figures
    and their relative differences; `deviation_differs` where the two cells ran with different workarounds from the
    fallback ladder. The baseline is eager PyTorch, so compiled PyTorch is one of the compared variants: its row is
    the check that torch.compile's step computes what the eager step does. The variant is in `numerator` and
    `numerator_mode`; its own figures are in the columns named after its tag (`loss_jax`, `final_top1_tensorflow`,
    `loss_torch_compile`)."""
    first = frame[(frame["status"] == "ok") & (frame["epoch"] == 0)] if "epoch" in frame else frame.iloc[0:0]
    first = with_modes(first)
    rows = []
    for key, group in first.groupby(["model", "precision", "batch_size"]):
        by = {(row["framework"], row["mode"]): row for _, row in group.iterrows()}
        base = _baseline_variant(by, denominator)
        for variant in ordered_variants(by):
            if base is not None and variant != base and numerator in (None, variant[0]):
                rows.append(_step0_row(key, by[variant], by[base], frame))
    # With no pair (a study of PyTorch alone, or every pair failed) the CSV still gets a header to read back.
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=STEP0_COLUMNS)


def agreement_framework(row) -> str:
    """The framework a step-0 row compares with PyTorch; a table written before there were more than two
    frameworks (no `numerator` column) compares JAX."""
    value = row.get("numerator")
    return value if isinstance(value, str) and value else "jax"


def _mode_of(row, role: str, framework: str) -> str:
    """A step-0 row's mode of its `role` (numerator, denominator); a table from before modes ran the primary one."""
    value = row.get(f"{role}_mode")
    return value if isinstance(value, str) and value else primary(framework)


def agreement_variant(row) -> tuple[str, str]:
    """(framework, mode) a step-0 row compares with the baseline."""
    framework = agreement_framework(row)
    return framework, _mode_of(row, "numerator", framework)


def denominator_tag(row) -> str:
    value = row.get("denominator")
    framework = value if isinstance(value, str) and value else BASELINE
    return variant_tag(framework, _mode_of(row, "denominator", framework))


def agreement_for(agreement: pd.DataFrame, framework: str, mode: str | None = None) -> pd.DataFrame:
    """The rows comparing `framework` (in `mode`, when given) with the baseline."""
    if agreement.empty:
        return agreement
    variants = agreement.apply(agreement_variant, axis=1)
    keep = variants.map(lambda v: v[0] == framework and (mode is None or v[1] == mode))
    return agreement[keep]


def top1_gap(agreement: pd.DataFrame) -> pd.Series:
    """Points between each row's variant's final top-1 and the baseline's."""

    def gap(row) -> float:
        own = row[f"final_top1_{variant_tag(*agreement_variant(row))}"]
        return abs(own - row[f"final_top1_{denominator_tag(row)}"]) * 100

    return agreement.apply(gap, axis=1)


def _final(frame: pd.DataFrame, row) -> pd.Series:
    same = frame[(frame["path"] == row["path"])]
    return same.sort_values("epoch").iloc[-1]


def agreement_variants(agreement: pd.DataFrame | None) -> list[tuple[str, str]]:
    """The variants (framework, mode) a step-0 agreement table compares with eager PyTorch, in the paper's order."""
    if agreement is None or agreement.empty:
        return []
    return ordered_variants(agreement.apply(agreement_variant, axis=1))
