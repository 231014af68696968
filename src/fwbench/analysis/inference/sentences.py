"""The sentences of the abstract and the results that name every framework of the study (`sentence_macros`):
each framework's ratios against PyTorch in the modes they pair, summarised, counted as resolved and placed by their
range, and each framework's peak throughput.

They are written from the macros already computed (`ratio_macros.ratio_names` gives each framework's), so the
prose says exactly what the macros quote, for any subset of frameworks, in the config's order; apart from the
macros themselves (fwbench.analysis.inference.macros) because their wording changes on its own."""

from __future__ import annotations

from fwbench.analysis.common.latex import (
    BASELINE,
    escape,
    join_words,
    label,
    macro_name,
    mode_label,
    pairing_label,
    ratio_label,
)
from fwbench.analysis.common.names import models_in_text
from fwbench.analysis.inference.ratio_macros import adjusted_phrase, ratio_names


def _pairing_name(framework: str, pairing: dict[str, tuple[str, str]]) -> str:
    """A framework's ratio in prose with the modes it pairs ("JAX/PyTorch-compiled"), or without modes where the
    speedups table has none ("JAX/PyTorch")."""
    if framework not in pairing:
        return ratio_label(framework)
    return pairing_label(framework, *pairing[framework])


def _baseline_name(framework: str, pairing: dict[str, tuple[str, str]]) -> str:
    """The PyTorch a framework's ratios stand against, in prose: "compiled PyTorch", "eager PyTorch", or
    "PyTorch" where the speedups table has no modes."""
    if framework not in pairing:
        return label(BASELINE)
    return f"{mode_label(pairing[framework][1])} {label(BASELINE)}"


def _compared(frameworks: list[str]) -> list[str]:
    """The study's frameworks that have ratios against PyTorch (none when the study has no PyTorch), config order."""
    return [f for f in frameworks if f != BASELINE] if BASELINE in frameworks else []


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _values(defs: dict[str, str], framework: str, family: str = "") -> dict[str, str]:
    return {role: defs[name] for role, name in ratio_names(framework, family).items()}


def _pairs(count: str | int) -> str:
    return f"{count} model and batch-size pair{'' if str(count) == '1' else 's'}"


def abstract_ratio_sentence(
    defs: dict[str, str], frameworks: list[str], pairing: dict[str, tuple[str, str]] | None = None
) -> str:
    """The abstract's headline (fwbAbstractRatioSentence): each framework's throughput over PyTorch's (in the modes
    its ratios pair) as the geometric mean of its ratios, with the interval that takes the model as the unit."""
    compared, pairing = _compared(frameworks), pairing or {}
    if not compared:
        return "The study has no framework to compare with PyTorch, so it reports no throughput ratio."
    if len(compared) == 1:
        framework = compared[0]
        values = _values(defs, framework)
        if values["pairs"] == "0":
            return f"No model and batch-size pair has both {label(framework)} and PyTorch results to compare."
        return (
            f"Over the {_pairs(values['pairs'])} where both frameworks succeeded, {label(framework)}'s throughput is "
            f"{values['geomean']}$\\times$ {_baseline_name(framework, pairing)}'s in geometric mean "
            f"({_interval_of(defs, framework)})."
        )
    measured = [f for f in compared if _values(defs, f)["pairs"] != "0"]
    baselines = {_baseline_name(f, pairing) for f in measured}
    common = baselines.pop() if len(baselines) == 1 else None
    clauses = []
    for framework in measured:
        values = _values(defs, framework)
        against = "" if common else f" against {_baseline_name(framework, pairing)}"
        clauses.append(
            f"{values['geomean']} for {label(framework)}{against} ({_interval_of(defs, framework)}; "
            f"{values['pairs']} pair{'' if values['pairs'] == '1' else 's'})"
        )
    lead = f"Against {common}, the" if common else "The"
    text = (
        f"{lead} throughput ratio's geometric mean over the model and batch-size pairs where both frameworks "
        f"succeeded is {join_words(clauses)}."
        if clauses
        else ""
    )
    missing = [label(f) for f in compared if f not in measured]
    if missing:
        text += f" {join_words(missing)} {'has' if len(missing) == 1 else 'have'} no pair with PyTorch to compare."
    return text.strip()


def _interval_of(defs: dict[str, str], framework: str) -> str:
    """The interval of a framework's geometric mean in words ("95\\% CI [0.553, 1.20] across 5 models")."""
    return _values(defs, framework)["interval"]


def abstract_verdict_sentence(defs: dict[str, str], frameworks: list[str], method: str) -> str:
    """The abstract's count of resolved ratios (fwbAbstractVerdictSentence), with the adjustment they were made
    with (`adjusted_phrase`); or that no ratio could be resolved (no paired interval)."""
    compared = [f for f in _compared(frameworks) if _values(defs, f)["pairs"] != "0"]
    if not compared:
        return ""
    values = {f: _values(defs, f) for f in compared}
    if all(v["unresolvable"] == v["pairs"] for v in values.values()):
        return "None of these ratios has a paired interval over interleaved rounds, so none is resolved."
    clauses = [
        f"{label(f)} is faster than PyTorch in {v['faster']} and slower in {v['slower']} of {v['pairs']} pairs"
        if index == 0
        else f"{label(f)} faster in {v['faster']} and slower in {v['slower']} of {v['pairs']}"
        for index, (f, v) in enumerate(values.items())
    ]
    return f"{_capitalised(adjusted_phrase(method))}, {join_words(clauses)}; the rest are not resolved."


def abstract_left_out_sentence(excluded: dict[str, int], stand_in: dict[str, int], mixed: bool) -> str:
    """The abstract's short note of the pairs its figures leave out (fwbAbstractLeftOutSentence): those in which
    another execution mode stood in for a missing cell (`mixed`: an eager against a compiled program), and those
    whose cells ran with different workarounds; empty when none was left out."""
    stood, deviating = sum(stand_in.values()), sum(excluded.values())
    kind = " (an eager against a compiled program)" if mixed else ""
    stood_text = f"in which another execution mode stood in for a missing cell{kind}"
    deviating_text = "whose cells ran with different workarounds"
    if stood and deviating:
        return (
            f"Left out of these figures are {stood + deviating} further pairs: {stood} {stood_text}, and {deviating} "
            f"{deviating_text}."
        )
    count = stood or deviating
    if not count:
        return ""
    lead = "One further pair" if count == 1 else f"A further {count} pairs"
    verb = "is" if count == 1 else "are"
    return f"{lead}, {stood_text if stood else deviating_text}, {verb} left out of these figures."


def eager_family_sentence(defs: dict[str, str], frameworks: list[str], models: list[str], method: str) -> str:
    """The family against eager PyTorch (fwbEagerFamilySentence, in the abstract and the results): for the models
    with no compiled PyTorch cell to pair with (`models`), each framework's ratios over eager PyTorch, summarised as
    its column's are (the geometric mean with its interval over models, and the resolved counts with the ratio
    table's adjustment); empty where every ratio pairs its column's modes."""
    compared = [f for f in _compared(frameworks) if _values(defs, f, "eager")["pairs"] != "0"]
    if not compared:
        return ""
    clauses = []
    for framework in compared:
        values = _values(defs, framework, "eager")
        clauses.append(
            f"{values['geomean']} for {label(framework)} ({values['interval']}; faster in {values['faster']} and "
            f"slower in {values['slower']} of {_pairs(values['pairs'])})"
        )
    where = join_words([escape(model) for model in models_in_text(models)])
    return (
        f"Against eager PyTorch, in the pairs without a compiled PyTorch cell to pair with (on {where}), the "
        f"throughput ratio's geometric mean is {join_words(clauses)}, counted {adjusted_phrase(method)}."
    )


def faster_sentence(
    defs: dict[str, str],
    frameworks: list[str],
    pairing: dict[str, tuple[str, str]] | None = None,
    method: str = "none",
) -> str:
    """The results' count of resolved ratios, each framework against PyTorch in the modes its ratios pair
    (fwbFasterSentence): the adjusted verdicts (`adjusted_phrase`), and each ratio's own where they differ."""
    compared = _compared(frameworks)
    if not compared:
        return "No framework is compared with PyTorch in this study."
    clauses = []
    for framework in compared:
        values = _values(defs, framework)
        modes = f" ({_pairing_name(framework, pairing)})" if framework in (pairing or {}) else ""
        own = ""
        if method != "none" and (values["faster"], values["slower"]) != (
            values["faster_unadjusted"],
            values["slower_unadjusted"],
        ):
            own = f" ({values['faster_unadjusted']} and {values['slower_unadjusted']} by their own 95\\% intervals)"
        clauses.append(
            f"of {values['pairs']} comparable cells{modes}, {label(framework)} is faster in {values['faster']} and "
            f"PyTorch in {values['slower']}{own}"
        )
    return (
        _capitalised(adjusted_phrase(method))
        + " (paired $t$ tests over interleaved rounds), "
        + "; ".join(clauses)
        + "; the rest are not resolved."
    )


def range_sentence(
    defs: dict[str, str], frameworks: list[str], pairing: dict[str, tuple[str, str]] | None = None
) -> str:
    """The results' summary of each framework's ratios (fwbSpeedupRangeSentence): their geometric mean with its
    interval over models, and their range with the cells at its ends (descriptive); the ratios of a single model
    get the range alone (no interval)."""
    clauses = []
    for framework in _compared(frameworks):
        values = _values(defs, framework)
        if values["pairs"] == "0":
            continue
        name = _pairing_name(framework, pairing or {})
        ends = f"range from {values['min']} ({values['min_cell']}) to {values['max']} ({values['max_cell']})"
        if values["pairs"] == "1":
            text = f"the one {name} ratio is {values['summary']}"
        elif values["models"] == "1":
            text = f"the {name} ratios, all of one model (so no interval), have a geometric mean of {values['geomean']}"
            text += f" and {ends}"
        else:
            text = f"the {name} ratios have a geometric mean of {values['summary']} and {ends}"
        clauses.append(text)
    return _capitalised("; ".join(clauses)) + "." if clauses else ""


def peak_sentence(defs: dict[str, str], frameworks: list[str]) -> str:
    """Each framework's peak throughput and the cell it was reached in (fwbPeakSentence)."""
    clauses = [
        f"{label(f)}'s {'peak throughput ' if index == 0 else ''}is {defs[macro_name('peak', f)]}~img/s "
        f"({defs[macro_name('peak', f, 'cell')]})"
        for index, f in enumerate(frameworks)
    ]
    return "; ".join(clauses) + "."


def sentence_macros(
    defs: dict[str, str],
    frameworks: list[str],
    excluded: dict[str, int],
    stand_in: dict[str, int] | None = None,
    pairing: dict[str, tuple[str, str]] | None = None,
    method: str = "none",
    mixed_stand_in: bool = False,
    eager_models: list[str] | None = None,
) -> dict[str, str]:
    """The sentences of the abstract and the results that name every framework of the study (config order):
    fwbFrameworkList, the abstract's fwbAbstractRatioSentence, fwbAbstractVerdictSentence and
    fwbAbstractLeftOutSentence, and the results' fwbFasterSentence, fwbSpeedupRangeSentence and fwbPeakSentence;
    the ratios named with the modes they pair (`pairing`, `summary.pairings`), the counts made with the ratio
    table's adjustment (`method`); and fwbEagerFamilySentence, in both, for the ratios against eager PyTorch of
    `eager_models` (those without a compiled PyTorch cell)."""
    return {
        "fwbFrameworkList": join_words([label(f) for f in frameworks]),
        "fwbAbstractRatioSentence": abstract_ratio_sentence(defs, frameworks, pairing),
        "fwbAbstractVerdictSentence": abstract_verdict_sentence(defs, frameworks, method),
        "fwbAbstractLeftOutSentence": abstract_left_out_sentence(excluded, stand_in or {}, mixed_stand_in),
        "fwbFasterSentence": faster_sentence(defs, frameworks, pairing, method),
        "fwbSpeedupRangeSentence": range_sentence(defs, frameworks, pairing),
        "fwbPeakSentence": peak_sentence(defs, frameworks),
        "fwbEagerFamilySentence": eager_family_sentence(defs, frameworks, eager_models or [], method),
    }
