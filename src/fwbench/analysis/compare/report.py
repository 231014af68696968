"""`fwbench compare` for a reader: the comparison in print (`render`), as compare.csv and compare.json
(`as_json`, `write_outputs`), and as a plot of every ratio's change (`plot_changes`).

It exists apart from `fwbench.analysis.compare.ratios` (and the `runs` and `change` it gathers) so that how a
comparison is shown can change without touching how it is made: everything here reads a finished `Comparison` and
decides nothing about it.

matplotlib only in `plot_changes`, imported there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.compare.change import (
    CHANGED,
    FLIPPED,
    LEVEL,
    MISSING_IN_A,
    MISSING_IN_B,
    NO_INTERVAL,
    SAME,
    finite,
)
from fwbench.analysis.compare.ratios import Comparison
from fwbench.analysis.compare.run_facts import CATEGORIES, NOT_RECORDED
from fwbench.analysis.compare.runs import TABLES, CompareError
from fwbench.io import atomic_write_json, atomic_write_text

# --------------------------------------------------------------------------------------------------------------------
# Text


def _number(value: float) -> str:
    """A ratio in print: three significant figures, never in exponent form."""
    if not finite(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _interval(estimate: float, low: float, high: float, unit: str = "") -> str:
    if not finite(estimate):
        return "-"
    bounds = f"[{_number(low)}, {_number(high)}]" if finite(low) and finite(high) else "[-]"
    return f"{_number(estimate)}{unit} {bounds}"


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


def _verdict_text(row: Mapping[str, Any], tolerance: float) -> str:
    if row["verdict"] == SAME and row["equivalent"]:
        return f"same (within +-{_percent(tolerance)})"
    return str(row["verdict"])


def _columns(header: list[str], lines: list[list[str]]) -> list[str]:
    """Left-aligned columns, each as wide as its widest entry."""
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    return [
        "  ".join(text.ljust(w) for text, w in zip(line, widths, strict=True)).rstrip() for line in [header, *lines]
    ]


TEXT_HEADER = ("ratio", "A [95% CI]", "B [95% CI]", "B/A [95% CI]", "verdict")


def rows_text(comparison: Comparison) -> list[str]:
    """The compared ratios, one table per ratio table: key, A, B, change [interval], verdict."""
    out = []
    compared = comparison.compared
    for kind in TABLES:
        rows = compared[compared["table"] == kind.name]
        if rows.empty:
            continue
        lines = [
            [
                row["label"],
                _interval(row["ratio_a"], row["ci_low_a"], row["ci_high_a"]),
                _interval(row["ratio_b"], row["ci_low_b"], row["ci_high_b"]),
                _interval(row["change"], row["change_low"], row["change_high"], "x"),
                _verdict_text(row, comparison.tolerance),
            ]
            for row in rows.to_dict("records")
        ]
        out += [f"{kind.filename} ({len(rows)} ratios in both runs)"]
        out += ["  " + line for line in _columns(list(TEXT_HEADER), lines)]
        out += [""]
    without = compared[compared["reason"].astype(str) != ""]
    out += [f"no change interval for {row['label']}: {row['reason']}" for row in without.to_dict("records")]
    return out


def summary_text(comparison: Comparison) -> str:
    summary = comparison.summary()
    median = summary["median_abs_change"]
    parts = [
        f"{summary['compared']} ratios in both runs: {summary[SAME]} same "
        f"({summary['same_equivalent']} shown within +-{_percent(comparison.tolerance)}), {summary[CHANGED]} changed, "
        f"{summary[FLIPPED]} flipped, {summary[NO_INTERVAL]} without a change interval",
        f"{summary[MISSING_IN_A]} missing in A, {summary[MISSING_IN_B]} missing in B",
        f"median |change| {_percent(median)}" if median is not None else "no median change",
    ]
    return "summary: " + "; ".join(parts)


def missing_text(comparison: Comparison) -> list[str]:
    out = []
    for name, other in ((MISSING_IN_A, "B"), (MISSING_IN_B, "A")):
        rows = comparison.missing(name)
        if rows.empty:
            continue
        out.append(f"{name} ({len(rows)}, only {other} has them):")
        out += [f"  {row['table']}: {row['label']} ({row['reason']})" for row in rows.to_dict("records")]
    return out


def _values(values: list[str], limit: int = 100) -> str:
    text = ", ".join(values)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def difference_text(item: Mapping[str, Any]) -> str:
    """One differing fact in print: "a -> b" for one value a side, else what each run alone has (a list of CPU
    flags shows the flags that differ, not two long lists)."""
    a, b = item["a"], item["b"]
    if len(a) == 1 or len(b) == 1 or NOT_RECORDED in (*a, *b):
        return f"{_values(a)} -> {_values(b)}"
    only_a, only_b = [v for v in a if v not in b], [v for v in b if v not in a]
    parts = [f"A only: {_values(only_a)}" if only_a else "", f"B only: {_values(only_b)}" if only_b else ""]
    common = len(a) - len(only_a)
    return "; ".join([part for part in parts if part] + ([f"{common} in common"] if common else []))


def environment_text(comparison: Comparison) -> list[str]:
    if not comparison.environment_compared:
        return []
    if not comparison.environment:
        return ["environment: no recorded difference between the runs' cells"]
    out = ["environment differences (A -> B):"]
    for category in CATEGORIES:
        items = [item for item in comparison.environment if item["category"] == category]
        if items:
            out.append(f"  {category}")
            out += [f"    {item['key']}: {difference_text(item)}" for item in items]
    if comparison.summary()["hardware_differs"]:
        out.append("the runs differ in hardware: a change can come from the machine, not only from the code")
    return out


def render(comparison: Comparison) -> str:
    """What `fwbench compare` prints: the compared ratios, the summary line, the missing ratios, notes and the
    environment's differences."""
    lines = [f"A: {comparison.run_a}", f"B: {comparison.run_b}", ""]
    lines += rows_text(comparison)
    lines += [summary_text(comparison), *missing_text(comparison)]
    lines += [f"note: {note}" for note in comparison.notes]
    lines += ["", *environment_text(comparison)]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------------------------------
# Files


def as_json(comparison: Comparison) -> dict[str, Any]:
    """compare.json: the runs, the compared rows, the missing ones, the environment's differences, the summary."""

    def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
        return json.loads(frame.to_json(orient="records")) if len(frame) else []

    return {
        "run_a": comparison.run_a,
        "run_b": comparison.run_b,
        "tolerance": comparison.tolerance,
        "level": LEVEL,
        "rows": records(comparison.compared),
        "missing_in_a": records(comparison.missing(MISSING_IN_A)),
        "missing_in_b": records(comparison.missing(MISSING_IN_B)),
        "environment": comparison.environment,
        "notes": comparison.notes,
        "summary": comparison.summary(),
    }


def write_outputs(comparison: Comparison, out_dir: str | os.PathLike) -> list[Path]:
    """compare.csv (every row, the missing ones included), compare.json (`as_json`) and the plot (`plot_changes`)
    in `out_dir`; the paths written."""
    out = Path(out_dir)
    paths = [out / name for name in ("compare.csv", "compare.json", "compare.png", "compare.pdf")]
    try:
        atomic_write_text(paths[0], comparison.rows.to_csv(index=False))
        atomic_write_json(paths[1], as_json(comparison))
        plot_changes(comparison, png=paths[2], pdf=paths[3])
    except OSError as exc:
        raise CompareError(f"{exc.filename or out}: cannot be written ({exc.strerror or exc})") from None
    return paths


def _plain_log_ticks(axes: Any) -> None:
    """Ticks at 1, 2, 5 per decade (every digit within a narrow range) labelled 0.5, 1, 2 rather than 5 x 10^-1: a
    change reads as a plain factor."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = axes.get_xlim()
    subs = (1.0, 2.0, 5.0) if high / low > 10 else tuple(float(digit) for digit in range(1, 10))
    axes.xaxis.set_major_locator(LogLocator(subs=subs))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_formatter(NullFormatter())


VERDICT_COLOURS = {SAME: "#7f7f7f", CHANGED: "#e08214", FLIPPED: "#b2182b", NO_INTERVAL: "#9ecae1"}


def plot_changes(comparison: Comparison, png: str | os.PathLike, pdf: str | os.PathLike) -> None:
    """Each compared ratio's change B/A with its 95% interval on a log axis, sorted by the change, coloured by
    verdict, with a line at 1 and the tolerance band shaded; the title names both runs. Drawn on a figure of its
    own with the Agg canvas, so no pyplot state or backend is touched."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = comparison.compared.sort_values("change", kind="stable").reset_index(drop=True)
    figure = Figure(figsize=(8.0, 1.6 + 0.22 * max(len(rows), 1)))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    bound = 1.0 + comparison.tolerance
    band = f"within +-{_percent(comparison.tolerance)}"
    axes.axvspan(1.0 / bound, bound, color="#eeeeee", zorder=0)
    axes.axvline(1.0, color="black", linewidth=0.8, zorder=1)
    for position, row in enumerate(rows.to_dict("records")):
        colour = VERDICT_COLOURS.get(row["verdict"], "black")
        if finite(row["change_low"]) and finite(row["change_high"]):
            axes.plot([row["change_low"], row["change_high"]], [position, position], color=colour, linewidth=1.5)
        hollow = not finite(row["change_low"])
        axes.plot([row["change"]], [position], "o", color=colour, markerfacecolor="white" if hollow else colour)
    axes.set_xscale("log")
    _plain_log_ticks(axes)
    axes.set_yticks(range(len(rows)), [f"{r['table']}: {r['label']}" for r in rows.to_dict("records")], fontsize=7)
    axes.set_ylim(-1, max(len(rows), 1))
    axes.set_xlabel("change of the ratio, B / A (95% interval, log scale)")
    if rows.empty:
        axes.text(0.5, 0.5, "no ratio in both runs", transform=axes.transAxes, ha="center", va="center")
    present = [name for name in VERDICT_COLOURS if (rows["verdict"] == name).any()]
    handles = [Line2D([], [], color=VERDICT_COLOURS[name], marker="o", label=name) for name in present]
    handles.append(Patch(color="#eeeeee", label=band))
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    axes.set_title(f"B: {comparison.run_b}\nover A: {comparison.run_a}", fontsize=9)
    for path, options in ((Path(png), {"dpi": 150}), (Path(pdf), {"metadata": {"CreationDate": None}})):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.tmp{path.suffix}")
        figure.savefig(partial, bbox_inches="tight", **options)
        os.replace(partial, path)
