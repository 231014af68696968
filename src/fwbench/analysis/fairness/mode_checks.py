"""The fairness ledger's checks of the execution modes (fwbench.study.modes): compilation and first calls kept apart
from the steady state, ratios between frameworks that pair compiled with compiled (or say where they do not), kernel
autotuning alike in every cell, and no compiled cell that recompiled or broke its graph while timed.

They exist apart from the other checks because they change with the modes: a new mode, or a new way of pairing them
in a ratio (`partners.ratio_variant`), changes these rows and no other.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, label, ordered_frameworks
from fwbench.analysis.common.partners import mixed_modes, ratio_variant, variant_names
from fwbench.analysis.fairness.rows import (
    HELD,
    NOT_HELD,
    NOT_MEASURED,
    cell_name,
    group_key,
    in_suite,
    named,
    row,
    settings_of,
    succeeded,
    variant_of,
)
from fwbench.analysis.inference.summary import mixed_modes as mixed_ratios
from fwbench.analysis.inference.summary import refused
from fwbench.analysis.inference.tidy import graph_breaks
from fwbench.study.modes import is_compiled


def _compile_seconds(result: dict[str, Any]) -> float:
    """A cell's compilation and first calls: its compile launch's (cold) and every trial's, and a training cell's
    compile wall time."""
    metrics = result["metrics"]
    launches = [metrics["compile_launch"]] if metrics.get("compile_launch") else []
    seconds = sum(
        float(t.get("compile_s") or 0.0) + float(t.get("first_call_s") or 0.0)
        for t in launches + (metrics.get("trials") or [metrics])
    )
    if result["cell"]["suite"] == "training":
        seconds += float(metrics.get("compile_wall_s") or 0.0)
    return seconds


# A compiled cell's timed step that took at least this share of the shortest compile its launches recorded, at least
# LEAK_FLOOR_MS and LEAK_MEDIANS times its median step, looks like a compilation inside the timed loop (a step of a
# warm program takes milliseconds, a compile or a cache load a tenth of a second and more); the floor keeps a VM's
# scheduling stall of tens of milliseconds from reading as one.
LEAK_SHARE, LEAK_MEDIANS, LEAK_FLOOR_MS = 0.5, 10.0, 250.0


def _unseparated(result: dict[str, Any]) -> str | None:
    """Why a cell's compile and first call were not shown to be outside its timed loop, or None where its records
    show they were: every launch recorded its first call (and a compiled mode its compile) apart, and no timed step
    of a compiled cell looks like a compile (`LEAK_SHARE`, `LEAK_MEDIANS`, `LEAK_FLOOR_MS`)."""
    if result["cell"]["suite"] != "inference":
        return None  # training records its compile wall time apart (compile_wall_s); micro times prepared programs
    metrics = result["metrics"]
    trials = metrics.get("trials") or [metrics]
    if any(t.get("first_call_s") is None for t in trials):
        return "no first call recorded apart"
    if not is_compiled(variant_of(result)[1]):
        return None  # nothing compiles: the first call, recorded apart, was all there was to keep out
    compiles = [float(t["compile_s"]) for t in trials if t.get("compile_s") is not None]
    if not compiles:
        return "no compile recorded apart"
    samples = [float(s) for s in result.get("samples_ms") or []]
    if not samples:
        return None
    slowest, median = max(samples), float(pd.Series(samples).median())
    bound = max(LEAK_SHARE * 1000.0 * min(compiles), LEAK_FLOOR_MS, LEAK_MEDIANS * median)
    if slowest >= bound:
        return f"a timed step of {slowest:.0f} ms ({slowest / median:.0f}x the median) as slow as a compile"
    return None


def compile_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Compilation and first calls kept outside the timed loops: how much time that was per framework and mode (an
    eager mode's is its first calls alone; compiled PyTorch's is torch.compile's tracing and code generation), decided
    by each cell's records (`_unseparated`): a cell that did not record them apart, or whose timed steps hold one as
    slow as a compile, does not hold."""
    control = "Compile time apart from steady state"
    seconds: Counter = Counter()
    failing = []
    for r in succeeded(results):
        seconds[variant_of(r)] += _compile_seconds(r)
        why = _unseparated(r)
        if why:
            failing.append(f"{cell_name(r)} ({why})")
    if not seconds:
        return row(control, NOT_MEASURED, "no successful cell")
    names = variant_names(seconds)
    parts = [f"{names[v]} {seconds[v]:.1f} s" + ("" if is_compiled(v[1]) else " (eager: first calls)") for v in names]
    measured = "compile and first calls recorded outside the timed loops: " + ", ".join(parts)
    return row(control, NOT_HELD if failing else HELD, measured, named(failing))


def recompile_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No compiled cell recompiled while timed (a retrace, a recompilation, or torch.compile falling back to a graph
    break inside the timed loop: `flags.recompiled`), in any suite, and no torch.compile graph break at all (a break
    runs part of the program eagerly, so the compiled cell is not wholly the compiled program it is named)."""
    control = "No recompilation or graph break while timed"
    ok = succeeded(results)
    recompiled = [cell_name(r) for r in ok if (r["metrics"].get("flags") or {}).get("recompiled")]
    breaks = {cell_name(r): graph_breaks(r["metrics"]) for r in ok}
    broken = [f"{name} ({count})" for name, count in breaks.items() if count]
    counted = sum(count is not None for count in breaks.values())
    measured = f"{len(recompiled)} of {len(ok)} cells recompiled inside the timed loop"
    if counted:
        measured += f"; {len(broken)} of {counted} torch.compile cells had graph breaks"
    where = [
        f"recompiled in {named(recompiled)}" if recompiled else "",
        f"graph breaks in {named(broken)}" if broken else "",
    ]
    return row(control, NOT_HELD if recompiled or broken else HELD, measured, "; ".join(filter(None, where)))


def _ratio_modes(results: list[dict[str, Any]], suite: str, config: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(comparison, mixed) of every ratio between frameworks of `suite` as the analysis pairs it
    (`partners.ratio_variant`: each framework's ratio mode, its first successful mode standing in), from the
    successful cells: a ratio per other framework and comparison where PyTorch and it have a cell."""
    groups: dict[tuple, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in succeeded(in_suite(results, suite)):
        framework, mode = variant_of(r)
        groups[group_key(r)][framework].append(mode)
    out = []
    for key, modes in groups.items():
        base = ratio_variant(BASELINE, modes.get(BASELINE, []), config)[0]
        for framework in (f for f in ordered_frameworks(modes) if f != BASELINE):
            mode = ratio_variant(framework, modes[framework], config)[0]
            if base is not None and mode is not None:
                out.append((f"{key[0]} {framework} {key[1]} {key[2]} bs{key[3]}", mixed_modes(mode, base)))
    return out


def _inference_pairing(speedups: pd.DataFrame) -> list[tuple[str, bool]]:
    """(comparison, mixed) of every computed inference ratio of the speedups table (`mixed_modes`)."""
    kept = speedups[~refused(speedups)]
    names = [f"inference {r.numerator} {r.model} {r.precision} bs{r.batch_size}" for r in kept.itertuples()]
    return list(zip(names, mixed_ratios(kept).tolist(), strict=True))


# How a mixed ratio is shown, per suite: the tables mark it ($^m$ or the column's named pairing), the conclusions
# name both modes in the sentence that gives it.
SHOWN = {"inference": "each marked in its table", "training": "each named as such in the conclusions"}


def pairing_row(
    results: list[dict[str, Any]], speedups: pd.DataFrame | None, config: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The ratios between frameworks pair compiled programs with compiled ones. A ratio that sets an eager program
    against a compiled one (eager PyTorch standing in where no compiled PyTorch cell exists) measures the compiler as
    much as the framework: the row does not hold, names those ratios and says how they are shown (marked in their
    table, named in the conclusions). Inference ratios are read from the speedups table (its `mixed_modes` column is
    what the tables mark); training ratios from the cells, paired as the conclusions pair them. Without the speedups
    table the inference pairing is derived from the cells, and whether its mixed ratios are marked is not measured."""
    control = "Ratios pair compiled with compiled"
    config = config or {}
    read = speedups is not None and "mixed_modes" in speedups
    suites = {
        "inference": _inference_pairing(speedups) if read else _ratio_modes(results, "inference", config),
        "training": _ratio_modes(results, "training", config),
    }
    shown = SHOWN | ({} if read else {"inference": "whether marked is read from the speedups table, not given"})
    parts, where = [], []
    for suite, ratios in suites.items():
        mixed = [name for name, is_mixed in ratios if is_mixed]
        if ratios:
            parts.append(f"{suite}: {len(ratios) - len(mixed)} of {len(ratios)} ratios pair compiled with compiled")
        if mixed:
            parts[-1] += f", {len(mixed)} set a compiled program against an eager one ({shown[suite]})"
            where.append(f"{suite}: {named(mixed)}")
    if not parts:
        return row(control, NOT_MEASURED, "no ratio between frameworks (no comparison with PyTorch and another)")
    unread = not read and any(is_mixed for _, is_mixed in suites["inference"])
    status = NOT_MEASURED if unread else (NOT_HELD if where else HELD)
    return row(control, status, "; ".join(parts), "; ".join(where))


def autotune_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Kernel autotuning alike: every cell recorded the same `autotune` setting, and where it could be in effect (a
    GPU) it was in effect in every framework alike; on a CPU no framework autotunes kernels (in_effect None)."""
    control = "Autotuning alike"
    settings: dict[str, list[str]] = defaultdict(list)
    effect: dict[str, set[Any]] = defaultdict(set)
    unrecorded = []
    for r in succeeded(results):
        record = settings_of(r).get("autotune")
        if not isinstance(record, dict):
            if r["cell"]["framework"] != "numpy":  # the host baseline tunes nothing: its record is optional
                unrecorded.append(cell_name(r))
            continue
        settings[str(record.get("setting"))].append(cell_name(r))
        if record.get("in_effect") is not None:
            effect[r["cell"]["framework"]].add(bool(record["in_effect"]))
    if not settings:
        return row(control, NOT_MEASURED, "no cell recorded its autotune setting (cells from before fwbench did)")
    count = sum(len(cells) for cells in settings.values())
    measured = "; ".join(f"{setting} in {len(cells)} of {count} cells" for setting, cells in sorted(settings.items()))
    if effect:
        measured += "; in effect: " + ", ".join(
            f"{label(f)} {'/'.join('yes' if e else 'no' for e in sorted(effect[f]))}"
            for f in ordered_frameworks(effect)
        )
    else:
        measured += "; not applicable: every cell ran on a CPU, where no framework autotunes kernels"
    where = []
    if len(settings) > 1:
        where.append("settings differ: " + "; ".join(f"{s} in {named(c)}" for s, c in sorted(settings.items())))
    if len({frozenset(e) for e in effect.values()}) > 1:
        where.append("in effect in some frameworks only")
    if where:
        return row(control, NOT_HELD, measured, "; ".join(where))
    if unrecorded:
        return row(control, NOT_MEASURED, measured, f"no autotune record in {named(unrecorded)}")
    return row(control, HELD, measured)
