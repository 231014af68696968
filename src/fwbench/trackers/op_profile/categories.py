"""The operation categories every framework's profile is reduced to, and the one reduction that turns per-op totals
into a cell's record (`summarise`), so that PyTorch, JAX and TensorFlow are compared in the same form.

The categories are fixed by the issue (35) and read by the analysis in this order. A name that no framework's table
maps lands in "other" and is listed in `unmapped`, never dropped: an unknown op still costs time, and the list says
which table needs a line. The profiled step time that no operation accounts for (Python, dispatch, launch gaps,
idle device) is framework overhead and goes to "other" too, but not to `top`, which names only real operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CATEGORIES: dict[str, str] = {
    "convolution": "Convolution",
    "matmul": "Matrix multiply and dense",
    "attention": "Attention",
    "normalization": "Normalisation",
    "elementwise": "Elementwise and activation",
    "pooling_reduction": "Pooling and reduction",
    "data_movement": "Data movement and layout",
    "other": "Framework overhead and other",
}
KEYS: tuple[str, ...] = tuple(CATEGORIES)
OTHER = "other"
TOP_N = 10

# Which category wins when one fused kernel or fusion names ops of several: the one that usually costs the most
# per element (a convolution's epilogue relu is not where the fusion's time goes). Heaviest first.
HEAVIEST_FIRST: tuple[str, ...] = (
    "convolution",
    "matmul",
    "attention",
    "normalization",
    "pooling_reduction",
    "elementwise",
    "data_movement",
    "other",
)
COMPUTE_HEAVY = frozenset({"convolution", "matmul", "attention"})


def heaviest(categories: Iterable[str]) -> str | None:
    """The heaviest of `categories` (HEAVIEST_FIRST), or None when there is none."""
    found = set(categories)
    return next((key for key in HEAVIEST_FIRST if key in found), None)


@dataclass
class OpTotal:
    """One operation's (kernel's, fusion's) totals over all profiled steps, under the name the framework reports."""

    name: str
    category: str
    us: float = 0.0
    calls: int = 0


class Totals:
    """Per-name totals as a reducer reads a trace; `unmapped` collects names no table maps (they count as other)."""

    def __init__(self) -> None:
        self.ops: dict[tuple[str, str], OpTotal] = {}
        self.unmapped: set[str] = set()

    def add(self, name: str, category: str | None, us: float, calls: int = 1) -> None:
        """Add `us` microseconds of `name`; `category` None means no table maps it: "other", and listed."""
        if category is None:
            self.unmapped.add(name)
            category = OTHER
        entry = self.ops.setdefault((name, category), OpTotal(name, category))
        entry.us += max(0.0, float(us))
        entry.calls += calls

    @property
    def total_us(self) -> float:
        return sum(op.us for op in self.ops.values())


def summarise(
    totals: Totals,
    *,
    steps: int,
    profiler: str,
    platform: str,
    time_basis: str,
    profiled_step_ms: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The cell's `metrics.op_profile` record (the contract in docs/op-profile.md) from per-op totals over `steps`.

    `profiled_step_ms` (wall time per step while profiling) adds the time no op accounts for to "other" as
    framework overhead; None (a recorded trace with no wall clock beside it) adds nothing. Shares are of
    `attributed_ms`, so they sum to 1 whenever any time was seen."""
    steps = max(1, int(steps))
    per_category = dict.fromkeys(KEYS, 0.0)
    for op in totals.ops.values():
        per_category[op.category] += op.us / 1000.0 / steps
    op_ms = sum(per_category.values())
    overhead_ms = max(0.0, profiled_step_ms - op_ms) if profiled_step_ms is not None else 0.0
    per_category[OTHER] += overhead_ms
    attributed = sum(per_category.values())
    ranked = sorted(totals.ops.values(), key=lambda op: (-op.us, op.name))[:TOP_N]
    record: dict[str, Any] = {
        "profiler": profiler,
        "platform": platform,
        "steps": steps,
        "profiled_step_ms": None if profiled_step_ms is None else round(float(profiled_step_ms), 6),
        "attributed_ms": round(attributed, 6),
        "op_ms": round(op_ms, 6),
        "overhead_ms": round(overhead_ms, 6),
        "categories": [
            {
                "category": key,
                "ms_per_step": round(per_category[key], 6),
                "share": (per_category[key] / attributed) if attributed > 0 else 0.0,
            }
            for key in KEYS
        ],
        "top": [
            {
                "name": op.name,
                "category": op.category,
                "ms_per_step": round(op.us / 1000.0 / steps, 6),
                "calls_per_step": round(op.calls / steps, 3),
            }
            for op in ranked
        ],
        "unmapped": sorted(totals.unmapped),
        "time_basis": time_basis,
    }
    if extra:
        record.update(extra)
    return record


def shares(record: Mapping[str, Any]) -> dict[str, float]:
    """{category: share} of a record, for tests and quick looks."""
    return {row["category"]: row["share"] for row in record["categories"]}
