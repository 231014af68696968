"""The study's findings as numbers, verdicts and display names, for the templates that say them (the abstract, the
README's summary, the HTML report's front page: report/templates/, fwbench.analysis.paper.templates).

A reader of an abstract wants per framework pair which is faster on which kind of model and by how much, not a list
of every comparison, so the findings are grouped by model family (CNN, transformer: names.model_family): per family
how many comparisons each framework won with a resolved difference (the paper's reading, the paired test adjusted
within its family: summary.resolved_adjusted), their typical ratio (the geometric mean, which inverting every ratio
inverts exactly) and their range; per pair the one figure worth quoting, its largest resolved difference, with the
interval picked extremes are quoted with (summary.quoted_interval) and where the op profile says the difference
comes from. Then what the numbers stand on: the machine, the arithmetic (and where the frameworks' TF32 use
differed, since such ratios measure the arithmetic too), the cells and failures, and which PyTorch each ratio stands
against: compiled where the study compiled it, else eager, and a pair whose baseline changes with the model says so.

Nothing here is a sentence: a template that rewords the abstract must never need a change in Python.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, ordered_frameworks
from fwbench.analysis.common.names import framework_name, model_family, model_name, precision_name, variant_name
from fwbench.analysis.inference.ratio_macros import computed_ratios, deviating
from fwbench.analysis.inference.summary import multiplicity_of, quoted_interval, resolved_adjusted
from fwbench.analysis.profile.categories import category_phrase
from fwbench.analysis.profile.sentences import THRESHOLD, attribution
from fwbench.analysis.profile.tables import category_times
from fwbench.study.modes import is_compiled

# Families in the order the prose names them; a model the registry does not know is of family "model", last.
FAMILY_ORDER = ("CNN", "transformer")


@dataclass(frozen=True)
class Machine:
    device: str  # "CPU" or "GPU"
    name: str | None  # "AMD EPYC", "NVIDIA H200"; None where no cell recorded it
    threads: int | None  # threads per process on a CPU; None where the cells differed or did not record them


@dataclass(frozen=True)
class TF32Use:
    """One precision in which the frameworks' TF32 use differed: per framework, what TF32 computed ("" for
    nothing)."""

    precision: str
    scopes: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Arithmetic:
    precisions: tuple[str, ...]
    tf32: tuple[TF32Use, ...]  # empty where every framework used TF32 alike


@dataclass(frozen=True)
class Reason:
    """The operation category that accounts for most of a difference in the profiled steps (profile.sentences)."""

    category: str
    numerator_ms: float
    denominator_ms: float


@dataclass(frozen=True)
class Quoted:
    """A pair's largest resolved difference, with the interval an extreme is quoted with."""

    model: str
    batch: int
    precision: str | None  # only where the study has several precisions
    ratio: float
    low: float
    high: float
    simultaneous: bool  # the interval is simultaneous over the family's tests
    baseline: str  # the PyTorch it stands against: "eager PyTorch", or "PyTorch" where PyTorch ran one way only
    reason: Reason | None


@dataclass(frozen=True)
class Family:
    name: str  # "CNN", "transformer", "model"
    models: tuple[str, ...]
    comparisons: int
    faster: int  # resolved, the framework faster than PyTorch
    slower: int
    unresolved: int
    typical: float  # geometric mean of the family's ratios
    low: float
    high: float


@dataclass(frozen=True)
class Baseline:
    """The PyTorch a pair's ratios stand against: one variant (`name`), or compiled for some models and eager for
    the others (`compiled_for`, `eager_for`, and `name` is plain PyTorch)."""

    name: str
    compiled_for: tuple[str, ...] = ()
    eager_for: tuple[str, ...] = ()

    @property
    def mixed(self) -> bool:
        return bool(self.compiled_for and self.eager_for)


@dataclass(frozen=True)
class Pair:
    framework: str
    baseline: Baseline
    families: tuple[Family, ...]
    largest: Quoted | None  # None where nothing is resolved


@dataclass(frozen=True)
class Headline:
    frameworks: tuple[str, ...]
    families: tuple[tuple[str, tuple[str, ...]], ...]  # the models studied, by family
    batches: tuple[int, ...]
    machine: Machine
    arithmetic: Arithmetic
    cells: int
    failed: int
    launches: int | None  # launches (fresh processes) each paired ratio is taken over
    adjustment: str  # the verdicts' multiplicity adjustment: "holm", "bh", "none"
    baseline: Baseline | None  # the pairs' common baseline; None where they differ or there is no pair
    pairs: tuple[Pair, ...]
    # each family's range and typical ratio, said unless the abstract needs the words (abstract.fitted)
    spreads: bool = True


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series(dtype=object, index=frame.index)


def _ok(inference: pd.DataFrame) -> pd.DataFrame:
    return inference[inference["status"] == "ok"] if "status" in inference else inference


def _family_key(family: str) -> tuple[int, str]:
    return (FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER), family)


def cpu_name(model: str) -> str:
    """A CPU's model as people write it: "Intel Xeon" for "Intel(R) Xeon(R) Processor", without clock or "CPU"."""
    text = re.sub(r"\((R|TM|tm)\)|@.*$|\b(CPU|Processor)\b", " ", str(model))
    return " ".join(text.split()) or str(model)


def machine(inference: pd.DataFrame) -> Machine:
    """The GPU the cells ran on, or the CPU's model with the threads each process had (the most frequent where
    several were recorded)."""
    ok = _ok(inference)
    platforms = set(_column(ok, "platform").dropna().astype(str))
    if platforms and platforms <= {"cpu"}:
        cpus = _column(ok, "cpu_model").dropna().astype(str)
        threads = {int(t) for t in _column(ok, "threads").dropna()}
        name = cpu_name(cpus.mode().iloc[0]) if len(cpus) else None
        return Machine("CPU", name, threads.pop() if len(threads) == 1 else None)
    devices = _column(ok, "device").dropna().astype(str)
    devices = devices[devices != "cpu"]
    return Machine("GPU", devices.mode().iloc[0] if len(devices) else None, None)


def arithmetic(inference: pd.DataFrame, ratios: pd.DataFrame, frameworks: list[str]) -> Arithmetic:
    """The precisions measured, and each precision in which the frameworks' TF32 use differed (precision `default`
    on a GPU: PyTorch computes convolutions in TF32 and matmuls in true FP32, JAX both in TF32), since every ratio of
    those cells measures the arithmetic as well as the framework. The first GPU study's ViT-B/16 ratio, 3.27x, is
    mostly this (docs/gpus.md)."""
    precisions = sorted(
        set(_column(inference, "precision").dropna().astype(str))
        | set(_column(ratios, "precision").dropna().astype(str))
    )
    ok = _ok(inference)
    uses = []
    if "tf32_scope" in ok and "framework" in ok:
        for precision, cells in ok.groupby(_column(ok, "precision").fillna("").astype(str), sort=True):
            scopes = {
                f: "/".join(sorted(set(cells.loc[cells["framework"] == f, "tf32_scope"].dropna().astype(str))))
                for f in frameworks
                if (cells["framework"] == f).any()
            }
            if len(set(scopes.values())) > 1:
                used = tuple((framework_name(f), "" if s in ("", "none") else s) for f, s in scopes.items())
                uses.append(TF32Use(precision_name(precision), used))
    return Arithmetic(tuple(precision_name(p) for p in precisions), tuple(uses))


def _mode_of(row: pd.Series, side: str) -> str:
    value = row.get(f"{side}_mode")
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def reason(row: pd.Series, times: Mapping[tuple, Mapping[str, float]]) -> Reason | None:
    """Where a large difference comes from, from the two cells' profiled steps: the category that accounts for most
    of it; None where a cell was not profiled, the difference is under the profile section's threshold, or the
    profiled steps order the two cells otherwise than the timed ones (as the profile section says)."""
    ratio = float(row["ratio"])
    if THRESHOLD > ratio > 1 / THRESHOLD:
        return None
    model, precision, batch = str(row["model"]), str(row["precision"]), int(row["batch_size"])
    numerator = (model, str(row["numerator"]), _mode_of(row, "numerator"), precision, batch)
    denominator = (model, str(row.get("denominator", BASELINE)), _mode_of(row, "denominator"), precision, batch)
    if numerator not in times or denominator not in times:
        return None
    num, den = times[numerator], times[denominator]
    if (math.fsum(num.values()) > math.fsum(den.values())) != (ratio < 1):
        return None
    shares = attribution(dict(num), dict(den))
    if not shares:
        return None
    return Reason(category_phrase(shares[0].category), shares[0].numerator_ms, shares[0].denominator_ms)


def baseline(rows: pd.DataFrame, torch_alone: bool) -> Baseline:
    """Which PyTorch `rows` (ratios of one pair) stand against: its one mode, or compiled for some models and eager
    for the others."""
    modes = _column(rows, "denominator_mode").dropna().astype(str)
    if modes.empty:
        return Baseline(framework_name(BASELINE))
    flags = _column(rows, "denominator_mode").map(lambda mode: isinstance(mode, str) and is_compiled(mode))
    by_model = flags.astype(bool).groupby(rows["model"]).all()
    compiled = tuple(model_name(m) for m in sorted(by_model[by_model].index))
    eager = tuple(model_name(m) for m in sorted(by_model[~by_model].index))
    if compiled and eager:
        return Baseline(framework_name(BASELINE), compiled, eager)
    return Baseline(variant_name(BASELINE, modes.mode().iloc[0], alone=torch_alone))


def _families(rows: pd.DataFrame, resolved: pd.Series) -> tuple[Family, ...]:
    out = []
    kinds = rows["model"].map(model_family)
    for name in sorted(set(kinds), key=_family_key):
        mine = rows[kinds == name]
        won = resolved[mine.index]
        ratio = mine["ratio"].astype(float)
        out.append(
            Family(
                name=name,
                models=tuple(model_name(m) for m in dict.fromkeys(mine["model"])),
                comparisons=len(mine),
                faster=int((won & (ratio > 1)).sum()),
                slower=int((won & (ratio < 1)).sum()),
                unresolved=int((~won).sum()),
                typical=math.exp(float(ratio.map(math.log).mean())),
                low=float(ratio.min()),
                high=float(ratio.max()),
            )
        )
    return tuple(out)


def _largest(rows: pd.DataFrame, resolved: pd.Series, several: bool, torch_alone: bool, times) -> Quoted | None:
    chosen = rows[resolved]
    if chosen.empty:
        return None
    row = chosen.loc[chosen["ratio"].astype(float).map(math.log).abs().idxmax()]
    low, high, simultaneous = quoted_interval(row)
    return Quoted(
        model=model_name(row["model"]),
        batch=int(row["batch_size"]),
        precision=precision_name(row["precision"]) if several else None,
        ratio=float(row["ratio"]),
        low=low,
        high=high,
        simultaneous=simultaneous,
        baseline=variant_name(BASELINE, _mode_of(row, "denominator") or None, alone=torch_alone),
        reason=reason(row, times),
    )


def headline(
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    profile: pd.DataFrame | None,
    frameworks: list[str],
    *,
    include_deviating: bool = False,
) -> Headline:
    """The findings of a study's speedups.csv, inference.csv and op_profile.csv (None or empty: no profile). A ratio
    whose two cells ran with different workarounds measures the workaround too: it is left out, as the paper's other
    summaries leave it out, unless the study counts such ratios (`fallbacks.include_deviating_in_summary`)."""
    if "suite" in inference:
        inference = inference[inference["suite"] == "inference"]
    kept = computed_ratios(ratios) if not ratios.empty else ratios
    kept = kept[kept["ratio"].notna()] if "ratio" in kept else kept
    if not include_deviating:
        kept = kept[~deviating(kept)]
    torch_cells = _ok(inference)
    torch_cells = torch_cells[_column(torch_cells, "framework") == BASELINE]
    torch_alone = _column(torch_cells, "mode").dropna().nunique() <= 1
    times = category_times(profile) if profile is not None and not profile.empty else {}
    models = list(dict.fromkeys([*_column(inference, "model").dropna().astype(str), *_column(kept, "model")]))
    by_family: dict[str, list[str]] = {}
    for model in models:
        by_family.setdefault(model_family(model), []).append(model_name(model))
    several = len(set(_column(kept, "precision").dropna())) > 1
    pairs = []
    present = set(_column(kept, "numerator").astype(str))
    for framework in ordered_frameworks(frameworks):
        if framework == BASELINE or BASELINE not in frameworks or framework not in present:
            continue
        rows = kept[kept["numerator"] == framework]
        resolved = resolved_adjusted(rows)
        pairs.append(
            Pair(
                framework=framework_name(framework),
                baseline=baseline(rows, torch_alone),
                families=_families(rows, resolved),
                largest=_largest(rows, resolved, several, torch_alone, times),
            )
        )
    baselines = {p.baseline for p in pairs}
    launches = _column(kept, "pairs").dropna()
    return Headline(
        frameworks=tuple(framework_name(f) for f in ordered_frameworks(frameworks)),
        families=tuple((name, tuple(by_family[name])) for name in sorted(by_family, key=_family_key)),
        batches=tuple(sorted({int(b) for b in _column(inference, "batch_size").dropna()})),
        machine=machine(inference),
        arithmetic=arithmetic(inference, kept, frameworks),
        cells=len(inference),
        failed=len(inference) - len(_ok(inference)),
        launches=int(launches.max()) if len(launches) else None,
        adjustment=multiplicity_of(kept),
        baseline=baselines.pop() if len(baselines) == 1 else None,
        pairs=tuple(pairs),
    )
