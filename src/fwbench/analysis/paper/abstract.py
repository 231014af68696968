"""The paper's abstract, written for a practitioner who reads nothing else: per framework pair, which framework is
faster on which model and batch size and by how much, with the interval of the largest difference each way, the one
line from the op profile that says where that difference comes from, and the machine it was measured on.

A geometric mean over models with an interval such as [0.176, 2.96] tells a reader nothing they can act on, so the
abstract lists the comparisons themselves: for each framework against PyTorch, the resolved ones (the paper's
reading: the paired test adjusted within its family, fwbench.analysis.inference.summary.resolved_adjusted) faster,
then slower, largest first, and how many stayed unresolved. Where the lists would take the abstract past MAX_WORDS,
the smallest differences are counted instead of named, so the largest are always there. Every number comes from the
study's tables: speedups.csv (ratios, intervals, modes), inference.csv (the machine, the cells) and op_profile.csv
(the profiled steps, fwbench.analysis.profile.sentences.attribution).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, escape, join_words, label, number
from fwbench.analysis.inference.ratio_macros import computed_ratios
from fwbench.analysis.inference.summary import multiplicity_of, resolved_adjusted
from fwbench.analysis.profile.categories import category_phrase
from fwbench.analysis.profile.sentences import THRESHOLD, attribution
from fwbench.analysis.profile.tables import category_times
from fwbench.study.modes import is_compiled

MAX_WORDS = 200
MULTIPLICITY_WORDS = {"holm": "Holm's", "bonferroni": "Bonferroni's", "none": "no"}


def words(text: str) -> int:
    """The words a reader counts in LaTeX text: commands and math markup dropped, a number or a bracket one word."""
    plain = re.sub(r"\\[a-zA-Z]+(\{\})?|\$[^$]*\$|[{}~]", " ", text)
    return len(plain.split())


def _mode_of(row: pd.Series, side: str) -> str | None:
    value = row.get(f"{side}_mode")
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _where(row: pd.Series, precisions: int) -> str:
    """ "resnet50 at batch 32" (and its precision where the study has several)."""
    text = f"{escape(row['model'])} at batch {int(row['batch_size'])}"
    return text + (f" in {escape(row['precision'])}" if precisions > 1 else "")


def _times(ratio: float) -> str:
    return f"{number(ratio)}$\\times$"


def _reason(row: pd.Series, times: Mapping[tuple, Mapping[str, float]]) -> str:
    """Where a large difference comes from, from the two cells' profiled steps: "convolution 191 against 29~ms per
    step" (the category that accounts for most of it); "" where a cell was not profiled or the difference is under
    the profile section's threshold."""
    ratio = float(row["ratio"])
    if THRESHOLD > ratio > 1 / THRESHOLD:
        return ""
    model, precision, batch = str(row["model"]), str(row["precision"]), int(row["batch_size"])
    numerator = (model, str(row["numerator"]), _mode_of(row, "numerator") or "", precision, batch)
    denominator = (model, str(row.get("denominator", BASELINE)), _mode_of(row, "denominator") or "", precision, batch)
    if numerator not in times or denominator not in times:
        return ""
    num, den = times[numerator], times[denominator]
    if (math.fsum(num.values()) > math.fsum(den.values())) != (ratio < 1):
        return ""  # the profiled steps order them otherwise: nothing to attribute (as the profile section says)
    shares = attribution(dict(num), dict(den))
    if not shares:
        return ""
    top = shares[0]
    return (
        f"{category_phrase(top.category)} {number(top.numerator_ms)} against {number(top.denominator_ms)}~ms per "
        "profiled step"
    )


def _listed(rows: pd.DataFrame, named: int, precisions: int, times: Mapping) -> str:
    """The first `named` rows, the first with its interval and its reason, the rest counted."""
    items = []
    for index, (_, row) in enumerate(rows.head(named).iterrows()):
        if index == 0:
            reason = _reason(row, times)
            interval = f"[{number(float(row['ci_low']))}, {number(float(row['ci_high']))}]"
            items.append(
                f"{_where(row, precisions)} ({_times(float(row['ratio']))} {interval}{'; ' + reason if reason else ''})"
            )
        else:
            items.append(f"{_where(row, precisions)} ({_times(float(row['ratio']))})")
    rest = len(rows) - len(items)
    if rest > 0:
        items.append(f"{rest} more")
    return join_words(items)


def pair_sentence(framework: str, rows: pd.DataFrame, named: int, precisions: int, times: Mapping) -> str:
    """One framework against PyTorch: faster on ..., slower on ..., and how many comparisons are unresolved."""
    resolved = resolved_adjusted(rows)
    faster = rows[resolved & (rows["ratio"] > 1)].sort_values("ratio", ascending=False)
    slower = rows[resolved & (rows["ratio"] < 1)].sort_values("ratio")
    open_ = int((~resolved).sum())
    parts = []
    if len(faster):
        parts.append(f"faster on {_listed(faster, named, precisions, times)}")
    if len(slower):
        parts.append(f"slower on {_listed(slower, named, precisions, times)}")
    if open_:
        parts.append(f"no resolved difference in {open_} comparison{'' if open_ == 1 else 's'}")
    what = "; ".join(parts) if parts else "no comparison"
    return f"{label(framework)} against {label(BASELINE)}: {what}."


def machine_text(inference: pd.DataFrame) -> str:
    """What the cells ran on: the GPU's name, or the CPU's model with the threads each cell had."""
    ok = inference[inference["status"] == "ok"] if "status" in inference else inference
    platforms = set(ok.get("platform", pd.Series(dtype=str)).dropna().astype(str))
    if platforms and platforms <= {"cpu"}:
        cpu = ok["cpu_model"].dropna().astype(str)
        threads = ok.get("threads", pd.Series(dtype=float)).dropna()
        per_cell = f", {int(threads.iloc[0])} threads per cell" if len(threads) else ""
        return f"{escape(cpu.iloc[0]) if len(cpu) else 'a CPU'} (CPU only{per_cell})"
    devices = ok.get("device", pd.Series(dtype=str)).dropna().astype(str)
    return f"an {escape(devices.iloc[0])}" if len(devices) else "a GPU"


def _baseline_modes(ratios: pd.DataFrame) -> str:
    """How PyTorch ran where the ratios pair it with different modes by model: "PyTorch compiled for a and b, eager
    for the other models" ("" where it ran in one mode throughout, or the table has no modes)."""
    if "denominator_mode" not in ratios:
        return ""
    modes = ratios.groupby("model")["denominator_mode"].agg(lambda v: "/".join(sorted(set(map(str, v)))))
    if modes.nunique() < 2:
        return ""
    compiled = sorted(m for m, mode in modes.items() if is_compiled(mode))
    return (
        f", {label(BASELINE)} compiled for {join_words([escape(m) for m in compiled])} and eager for the other models"
    )


def arithmetic_sentence(inference: pd.DataFrame, frameworks: list[str]) -> str:
    """Where the frameworks' float32 arithmetic differed (precision `default` on a GPU: PyTorch computes convolutions
    in TF32 and matmuls in true FP32, JAX both in TF32), one sentence saying so, since every ratio of those cells
    measures the arithmetic as well as the framework; "" where every framework's TF32 use was the same. The first
    GPU study's ViT-B/16 ratio, 3.27x, is mostly this (docs/gpus.md)."""
    ok = inference[inference["status"] == "ok"] if "status" in inference else inference
    if "tf32_scope" not in ok or "framework" not in ok:
        return ""
    sentences = []
    for precision, cells in ok.groupby(ok.get("precision", pd.Series("", index=ok.index)).astype(str), sort=True):
        scopes = {
            str(f): "/".join(sorted(set(cells.loc[cells["framework"] == f, "tf32_scope"].dropna().astype(str))))
            for f in frameworks
            if (cells["framework"] == f).any()
        }
        if len(set(scopes.values())) < 2:
            continue
        parts = [f"{'nothing' if s in ('', 'none') else 'the ' + escape(s)} in {label(f)}" for f, s in scopes.items()]
        sentences.append(
            f"TF32 computed {join_words(parts)} ({escape(precision)}; the rest in true FP32), so these ratios measure "
            "the arithmetic as well as the frameworks."
        )
    return " ".join(sentences)


def abstract(
    ratios: pd.DataFrame,
    inference: pd.DataFrame,
    profile: pd.DataFrame | None,
    frameworks: list[str],
    *,
    max_words: int = MAX_WORDS,
) -> str:
    """The abstract's text (LaTeX), at most `max_words` words: the study in one sentence, then one sentence per
    framework against PyTorch, where the frameworks' arithmetic differed a sentence saying so, then how a difference
    was resolved."""
    ok = inference[inference["status"] == "ok"] if "status" in inference else inference
    cells = int(len(inference))
    failed = cells - int(len(ok))
    precisions = sorted(
        set(inference.get("precision", pd.Series(dtype=str)).dropna().astype(str))
        | set(ratios.get("precision", pd.Series(dtype=str)).dropna().astype(str))
    )
    batches = sorted({int(b) for b in inference.get("batch_size", pd.Series(dtype=int)).dropna()})
    kept = computed_ratios(ratios) if not ratios.empty else ratios
    failures = f"{failed} failed" if failed else "none failed"
    intro = (
        f"We compare {join_words([label(f) for f in frameworks])} on identical models, weights and input bytes, each "
        f"benchmark configuration in a fresh process of its own, on {machine_text(inference)}: {cells} inference "
        f"cells ({failures}) in {join_words([escape(p) for p in precisions])} at batch "
        f"{join_words([str(b) for b in batches])}{_baseline_modes(kept)}."
    )
    if kept.empty or BASELINE not in frameworks:
        return intro + " The study has no ratio to PyTorch to report."
    times = category_times(profile) if profile is not None and not profile.empty else {}
    method = MULTIPLICITY_WORDS.get(multiplicity_of(kept), escape(multiplicity_of(kept)))
    closing = (
        "A difference counts as resolved when its paired 95\\% interval over launches excludes 1 after "
        f"{method} adjustment within each framework pair."
    )
    others = [f for f in frameworks if f != BASELINE and f in set(kept["numerator"])]
    arithmetic = arithmetic_sentence(inference, frameworks)
    for named in range(max(len(kept), 1), 0, -1):
        pairs = [pair_sentence(f, kept[kept["numerator"] == f], named, len(precisions), times) for f in others]
        text = " ".join([intro, *pairs, *([arithmetic] if arithmetic else []), closing])
        if words(text) <= max_words:
            return text
    return text


def abstract_from_tables(
    ratios: pd.DataFrame, inference: pd.DataFrame, profile: pd.DataFrame | None, config: Mapping[str, Any]
) -> str:
    return abstract(ratios, inference, profile, list(config["frameworks"])) + "\n"
