"""The micro suite's published reference (reference/published-t4-micro.csv, an NVIDIA T4 report) and the comparison
of its crossovers with ours, with caveats computed from the reference's own numbers.

The report does not say whether it compiled anything (torch.compile, jax.jit), so each of its series is taken as its
framework's primary mode (torch.compile is opt-in; every JAX program is an XLA one) and compared with ours in that
mode only; our series in another mode (compiled PyTorch) are listed as not comparable, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common.partners import cell_mode
from fwbench.analysis.micro.crossovers import (
    CROSSOVER_COLUMNS,
    CROSSOVER_FIELDS,
    Crossover,
    crossover,
    crossover_columns,
    from_row,
)
from fwbench.analysis.micro.vocabulary import integers, is_measured_text, label
from fwbench.study.modes import primary

REFERENCE_STUDY = "T4 report"
REFERENCE_GPU = "NVIDIA T4"
REFERENCE_COLUMNS = [
    "suite",
    "batch_size",
    "jax_s",
    "numpy_s_in_jax_table",
    "pytorch_cpu_s",
    "pytorch_cuda_s",
    "numpy_s_in_pytorch_table",
]
SUITE_OPERATIONS = {"matrix": "matmul", "network": "mlp"}


@dataclass(frozen=True)
class ReferenceSeries:
    """One framework series of the reference: its time column, its NumPy baseline columns in order of preference
    (the first non-empty one is used, and recorded) and where it ran."""

    name: str
    framework: str
    time_column: str
    baselines: tuple[str, ...]
    device: str
    label: str
    mode: str | None = None  # the execution mode the report states; None: not stated (its framework's primary)

    @property
    def assumed_mode(self) -> str:
        """The mode our cells must be in to compare with this series (stated, else the framework's primary)."""
        return self.mode or primary(self.framework)


REFERENCE_SERIES = (
    ReferenceSeries("jax", "jax", "jax_s", ("numpy_s_in_jax_table",), REFERENCE_GPU, "JAX"),
    ReferenceSeries(
        "torch_cpu",
        "torch",
        "pytorch_cpu_s",
        ("numpy_s_in_pytorch_table", "numpy_s_in_jax_table"),
        f"CPU of the {REFERENCE_GPU} host",
        "PyTorch CPU",
    ),
    ReferenceSeries(
        "torch_cuda",
        "torch",
        "pytorch_cuda_s",
        ("numpy_s_in_pytorch_table", "numpy_s_in_jax_table"),
        REFERENCE_GPU,
        "PyTorch CUDA",
    ),
)
SERIES = {series.name: series for series in REFERENCE_SERIES}
PUBLISHED_COLUMNS = [
    "reference",
    "framework",
    "operation",
    "batch_size",
    "time_s",
    "numpy_s",
    "baseline",
    "speedup",
    "device",
    "numpy_s_in_jax_table",
    "numpy_s_in_pytorch_table",
]


def _series_for(framework: str, platform: str | None) -> str | None:
    if framework == "jax":
        return "jax"
    if framework == "torch" and platform == "cpu":
        return "torch_cpu"
    if framework == "torch" and platform in ("cuda", "gpu"):
        return "torch_cuda"
    return None


def reference_for(framework: str, platform: str | None, mode: str | None = None) -> str | None:
    """The reference series our cells compare with: JAX with its JAX (a GPU there), PyTorch with its PyTorch CPU
    or CUDA series by the platform our PyTorch cells computed on; only cells in the series' mode (`mode` None: the
    framework's primary one) compare with it."""
    name = _series_for(framework, platform)
    if name is None or (mode or cell_mode({"framework": framework})) != SERIES[name].assumed_mode:
        return None
    return name


def _read_reference(csv_path: str | Path) -> pd.DataFrame:
    """The reference CSV, checked: known columns and suites, positive times (NumPy's PyTorch-table column may be
    empty); a bad file raises ValueError naming it."""
    raw = pd.read_csv(csv_path)
    lacking = [column for column in REFERENCE_COLUMNS if column not in raw]
    if lacking:
        raise ValueError(f"{csv_path}: not the T4 micro reference (no column {', '.join(lacking)})")
    unknown = sorted(set(raw["suite"]) - set(SUITE_OPERATIONS))
    if unknown:
        raise ValueError(f"{csv_path}: unknown suite(s) {', '.join(map(str, unknown))}")
    times = raw[REFERENCE_COLUMNS[2:]].apply(pd.to_numeric, errors="coerce")
    required = times.drop(columns="numpy_s_in_pytorch_table")
    if required.isna().any().any() or (times.fillna(1.0) <= 0).any().any():
        raise ValueError(f"{csv_path}: times must be positive numbers (only numpy_s_in_pytorch_table may be empty)")
    return raw.assign(**times)


def _baseline(row: pd.Series, series: ReferenceSeries) -> tuple[str, float]:
    for column in series.baselines:
        if not pd.isna(row[column]):
            return column, float(row[column])
    raise ValueError(f"no NumPy time for {series.name} at batch {row['batch_size']}")


def published_micro(csv_path: str | Path) -> pd.DataFrame:
    """The reference's per-batch times as a long table: one row per series (jax, torch_cpu, torch_cuda), operation
    (matrix -> matmul, network -> mlp) and batch size, with the published speedup numpy_s / time_s against the
    NumPy column that series' table gives (`baseline`: the PyTorch table's where it has one, else the JAX
    table's)."""
    rows = []
    for _, row in _read_reference(csv_path).iterrows():
        for series in REFERENCE_SERIES:
            baseline, numpy_s = _baseline(row, series)
            time_s = float(row[series.time_column])
            rows.append(
                {
                    "reference": series.name,
                    "framework": series.framework,
                    "operation": SUITE_OPERATIONS[row["suite"]],
                    "batch_size": int(row["batch_size"]),
                    "time_s": time_s,
                    "numpy_s": numpy_s,
                    "baseline": baseline,
                    "speedup": numpy_s / time_s,
                    "device": series.device,
                    "numpy_s_in_jax_table": row["numpy_s_in_jax_table"],
                    "numpy_s_in_pytorch_table": row["numpy_s_in_pytorch_table"],
                }
            )
    frame = pd.DataFrame(rows).reindex(columns=PUBLISHED_COLUMNS)
    return frame.sort_values(["reference", "operation", "batch_size"], kind="stable").reset_index(drop=True)


def published_crossovers(published: pd.DataFrame) -> pd.DataFrame:
    """The reference's crossovers, with `crossover`'s definition applied to its point estimates, as ours are (it
    gives no interval): the smallest batch from which its speedup stays above 1."""
    rows = []
    for (name, operation), group in published.groupby(["reference", "operation"], sort=True):
        group = group.sort_values("batch_size")
        result = crossover(group["batch_size"].tolist(), group["speedup"].tolist())
        rows.append(
            {
                "reference": name,
                "framework": SERIES[name].framework,
                "operation": operation,
                "device": SERIES[name].device,
                "baseline": " / ".join(sorted(set(group["baseline"]))),
                **crossover_columns(result),
                "speedup_at_largest": float(group["speedup"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def reference_flatness(published: pd.DataFrame) -> pd.DataFrame:
    """Per operation: how much the reference's JAX time per call changes across its batch sizes (max/min), over all
    of them and over those above the smallest, next to its NumPy times (the JAX table's): a time that does not grow
    with the work points to a fixed cost (compilation, transfer) inside its timed region."""
    rows = []
    for operation, group in published[published["reference"] == "jax"].groupby("operation", sort=True):
        group = group.sort_values("batch_size")
        tail = group.iloc[1:] if len(group) > 1 else group
        rows.append(
            {
                "operation": operation,
                "batch_min": int(group["batch_size"].iloc[0]),
                "batch_next": int(tail["batch_size"].iloc[0]),
                "batch_max": int(group["batch_size"].iloc[-1]),
                "jax_min_s": float(group["time_s"].min()),
                "jax_max_s": float(group["time_s"].max()),
                "jax_ratio": float(group["time_s"].max() / group["time_s"].min()),
                "numpy_ratio": float(group["numpy_s"].max() / group["numpy_s"].min()),
                "jax_tail_ratio": float(tail["time_s"].max() / tail["time_s"].min()),
                "numpy_tail_ratio": float(tail["numpy_s"].max() / tail["numpy_s"].min()),
            }
        )
    return pd.DataFrame(rows)


def reference_baselines(published: pd.DataFrame) -> pd.DataFrame:
    """Per operation: how far the reference's two NumPy columns disagree at the same batch size (JAX table over
    PyTorch table, min and max), or that the PyTorch table has none (its speedups then use the JAX table's)."""
    rows = []
    for operation, group in published[published["reference"] == "jax"].groupby("operation", sort=True):
        both = group.dropna(subset=["numpy_s_in_pytorch_table"])
        ratio = both["numpy_s_in_jax_table"] / both["numpy_s_in_pytorch_table"]
        rows.append(
            {
                "operation": operation,
                "rows_with_both": len(both),
                "rows": len(group),
                "ratio_min": float(ratio.min()) if len(both) else None,
                "ratio_max": float(ratio.max()) if len(both) else None,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------------------------
# Ours against the reference


# The comparison of our crossover with the reference's. Ours is a point estimate with a 95% interval (two or more
# trials per cell); the reference's is a point estimate on its own batch grid, which places its crossover in the
# bracket (last batch below, crossover]. The words say what the interval shows, never "same" for an interval wider
# than the reference's bracket (failing to find a difference is not evidence of sameness).
SAME, EARLIER, LATER, INCONCLUSIVE, NOT_COMPARABLE = "same", "earlier", "later", "inconclusive", "not comparable"
NO_INTERVAL = "no interval"  # the suffix of a comparison of point estimates only (one process per cell)
AGREEMENTS = (SAME, EARLIER, LATER, INCONCLUSIVE)


def _relation(ours: tuple[float, float], reference: tuple[float, float]) -> str:
    """How the half-open batch interval `ours` lies against the reference's bracket: inside it (same), entirely
    below or above it (earlier, later), or overlapping without lying inside (inconclusive)."""
    if ours[1] <= reference[0]:
        return EARLIER
    if ours[0] >= reference[1]:
        return LATER
    if reference[0] <= ours[0] and ours[1] <= reference[1]:
        return SAME
    return INCONCLUSIVE


def agreement(ours: Crossover, published: Crossover) -> str:
    """Our crossover against the reference's, both from point estimates (`crossover`).

    With our 95% interval: "same" when it lies inside the reference's bracket (the reference's grid is the margin:
    the interval places our crossover in the grid step where the reference's lies), "earlier"/"later" when it lies
    entirely below/above that bracket (a resolved difference), "inconclusive" when it overlaps the bracket but is
    wider. Without an interval (one process per cell) our point crossover's bracket is set against the reference's
    with the same words, suffixed ", no interval": a comparison of point estimates, never a resolved one. "not
    comparable" without data on either side."""
    reference = published.bracket()
    if reference is None or ours.bracket() is None:
        return NOT_COMPARABLE
    interval = ours.interval_bracket()
    if interval is not None:
        return _relation(interval, reference)
    return f"{_relation(ours.bracket(), reference)}, {NO_INTERVAL}"  # type: ignore[arg-type]


def is_agreement(word: str) -> bool:
    """Whether a comparison word claims the same crossover, resolved: only "same" from an interval."""
    return word == SAME


COMPARISON_COLUMNS = [
    *CROSSOVER_COLUMNS,
    "reference",
    "reference_device",
    "reference_baseline",
    *(f"published_{name}" for name in CROSSOVER_FIELDS),
    "agreement",
    "note",
]


def _published_columns(published: pd.Series) -> dict[str, Any]:
    return {
        "reference": published["reference"],
        "reference_device": published["device"],
        "reference_baseline": published["baseline"],
        **{f"published_{name}": published[name] for name in CROSSOVER_FIELDS},
    }


def _unmatched_ours(row: pd.Series) -> str:
    """Why one of our series has no reference series to compare with."""
    if row["framework"] == "torch" and not is_measured_text(row["platform"]):
        return "no PyTorch cell succeeded, so whether to compare with its CPU or CUDA series is unknown"
    name = _series_for(row["framework"], row["platform"])
    if name is not None:
        series = SERIES[name]
        stated = "states" if series.mode else "does not state a mode, so it is taken as"
        return (
            f"the reference's {series.label} series {stated} {series.assumed_mode}; this series ran in {cell_mode(row)}"
        )
    return f"the reference has no {label(row['framework'])} {row['operation']} series on {row['platform']}"


def _unmatched_note(crossovers: pd.DataFrame, series: pd.Series) -> str:
    """Why a reference series has no counterpart among our crossovers."""
    operation, framework = series["operation"], series["framework"]
    if crossovers.empty or operation not in set(crossovers["operation"]):
        return f"this study did not measure {operation}"
    ours = crossovers[(crossovers["operation"] == operation) & (crossovers["framework"] == framework)]
    if ours.empty:
        return f"this study did not measure {label(framework)}"
    platforms = ", ".join(sorted({str(p) for p in ours["platform"] if is_measured_text(p)})) or "an unknown platform"
    return f"our {label(framework)} cells ran on {platforms}, not where this series ran"


def compare_crossovers(crossovers: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Our crossovers with the reference's beside them (the series `reference_for` picks) and the `agreement`;
    reference series that none of ours compares with (e.g. its PyTorch CPU when our PyTorch ran on a GPU) are
    listed too, as "not comparable"."""
    by_key = {(row["reference"], row["operation"]): row for _, row in published.iterrows()}
    rows, used = [], set()
    for _, row in crossovers.iterrows():
        name = reference_for(row["framework"], row["platform"], cell_mode(row))
        match = by_key.get((name, row["operation"]))
        out = {**row.to_dict(), "agreement": NOT_COMPARABLE}
        if match is None:
            out["note"] = _unmatched_ours(row)
        else:
            used.add((name, row["operation"]))
            out |= _published_columns(match)
            out["agreement"] = agreement(from_row(row), from_row(match))
        rows.append(out)
    for key, match in by_key.items():
        if key not in used:
            note = _unmatched_note(crossovers, match)
            base = {"framework": match["framework"], "operation": match["operation"], "kind": "not measured"}
            rows.append({**base, **_published_columns(match), "agreement": NOT_COMPARABLE, "note": note})
    return integers(pd.DataFrame(rows).reindex(columns=COMPARISON_COLUMNS))
