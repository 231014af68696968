"""Numbers quoted in the paper's prose, as LaTeX macros computed from the results (never typed by hand)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.aggregate import node_differs, ratios_for, refused
from fwbench.analysis.latex import (
    BASELINE,
    FRAMEWORK_LABELS,
    define_macros,
    escape,
    join_words,
    label,
    macro_name,
    number,
    ordered_frameworks,
    others,
    ratio_label,
)


def include_deviating(config: dict[str, Any]) -> bool:
    """Whether the summary statistics count ratios between cells that ran with different workarounds."""
    return bool((config.get("fallbacks") or {}).get("include_deviating_in_summary", False))


def _deviating(ratios: pd.DataFrame) -> pd.Series:
    if "deviation_differs" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["deviation_differs"].astype(str) == "True"


def computed_ratios(ratios: pd.DataFrame) -> pd.DataFrame:
    """The rows of a speedups table that hold a ratio: refused ones (cells on different device models, NaN) never
    enter a summary, whatever the configuration."""
    return ratios[~refused(ratios)]


def placement_macros(ratios: pd.DataFrame) -> dict[str, str]:
    """fwbNumRatiosRefused (ratios refused: their cells ran on different device models, a marked dash in the table)
    and fwbNumRatiosNodeDiffer (kept ratios whose cells ran on different nodes of one device model, marked)."""
    return {
        "fwbNumRatiosRefused": str(int(refused(ratios).sum())),
        "fwbNumRatiosNodeDiffer": str(int(node_differs(ratios).sum())),
    }


def summary_ratios(ratios: pd.DataFrame, config: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The ratios the summary statistics are taken over, and the macros saying what was left out: refused ratios
    always (`computed_ratios`; counted by `placement_macros`), then fwbNumPairsAll (every computed ratio),
    fwbNumPairsDeviating (ratios whose cells ran with different workarounds, marked in the table),
    fwbNumPairsExcludedDeviating (those left out of the summary: all of them, or none when
    `fallbacks.include_deviating_in_summary` is set) and fwbDeviatingPairsSentence (one sentence for the text)."""
    placement = placement_macros(ratios)
    ratios = computed_ratios(ratios)
    deviating = _deviating(ratios)
    include = include_deviating(config)
    kept = ratios if include else ratios[~deviating]
    count, excluded = int(deviating.sum()), 0 if include else int(deviating.sum())
    if count == 0:
        sentence = "No ratio compares cells that ran with different workarounds."
    elif include:
        sentence = (
            f"{count} of these ratios compare{'s' if count == 1 else ''} cells that ran with different workarounds "
            "(marked $^{d}$); the study's configuration counts them in these figures."
        )
    else:
        one = count == 1
        sentence = (
            f"{count} further ratio{'' if one else 's'} compare{'s' if one else ''} cells that ran with different "
            f"workarounds (marked $^{{d}}$) and {'is' if one else 'are'} left out of these figures."
        )
    defs = placement | {
        "fwbNumPairsAll": str(len(ratios)),
        "fwbNumPairsDeviating": str(count),
        "fwbNumPairsExcludedDeviating": str(excluded),
        "fwbDeviatingPairsSentence": sentence,
        # after "the N pairs where both frameworks succeeded" in the abstract
        "fwbPairsExcludedNote": (
            f" (and with the same workarounds: {excluded} further pair{'' if excluded == 1 else 's'} left out)"
            if excluded
            else ""
        ),
    }
    return kept, defs


def fallback_ladder(config: dict[str, Any]) -> str:
    """The configured fallback ladder in words: its rungs' names in order, or that it is off or empty."""
    fallbacks = config.get("fallbacks") or {}
    rungs = [rung["name"] for rung in fallbacks.get("ladder") or []]
    if not fallbacks.get("enabled", True):
        return "disabled in this study's configuration"
    if not rungs:
        return "empty in this study's configuration"
    names = ", ".join(rf"\texttt{{{escape(name)}}}" for name in rungs)
    return f"{len(rungs)} rung{'' if len(rungs) == 1 else 's'} in this study: {names}"


def ratio_names(framework: str = "") -> dict[str, str]:
    """The macro names of one framework's ratio summary, by role. Names end in the framework
    (fwbSpeedupMedianTensorflow, fwbNumPairsTensorflow, fwbTensorflowFasterPairs, fwbTorchFasterThanTensorflowPairs);
    without one they are the names the paper used when JAX was the only framework compared (fwbSpeedupMedian,
    fwbNumPairs, fwbJaxFasterPairs, fwbTorchFasterPairs)."""

    def name(*parts: str) -> str:
        return macro_name(*parts, framework)

    return {
        "median": name("speedup", "median"),
        "min": name("speedup", "min"),
        "min_ci": name("speedup", "min", "CI"),
        "min_cell": name("speedup", "min", "cell"),
        "max": name("speedup", "max"),
        "max_ci": name("speedup", "max", "CI"),
        "max_cell": name("speedup", "max", "cell"),
        "pairs": name("num", "pairs"),
        "faster": macro_name(framework or "jax", "faster", "pairs"),
        "slower": macro_name("torch", "faster", "than", framework, "pairs") if framework else "fwbTorchFasterPairs",
        "unresolvable": name("num", "pairs", "unresolvable"),
    }


def _ratio_summary(ratios: pd.DataFrame) -> dict[str, str]:
    """One framework's ratios against PyTorch by role (see `ratio_names`): median, extremes with their CIs and
    cells, the number of pairs, how many resolve each way and how many cannot resolve."""
    if ratios.empty:
        none = dict.fromkeys(("median", "min", "max", "min_ci", "max_ci"), "---")
        return (
            none
            | {"min_cell": "no cell pair", "max_cell": "no cell pair"}
            | dict.fromkeys(("pairs", "faster", "slower", "unresolvable"), "0")
        )
    lo, hi = ratios.loc[ratios["ratio"].idxmin()], ratios.loc[ratios["ratio"].idxmax()]
    # Resolved: the paired CI over interleaved rounds excludes 1 (a within-process or unpaired CI never counts).
    resolved = ratios["resolved"].astype(str) == "True"
    return {
        "median": number(float(ratios["ratio"].median())),
        "min": number(float(lo["ratio"])),
        "min_ci": f"[{number(float(lo['ci_low']))}, {number(float(lo['ci_high']))}]",
        "min_cell": escape(f"{lo['model']} at batch {lo['batch_size']}"),
        "max": number(float(hi["ratio"])),
        "max_ci": f"[{number(float(hi['ci_low']))}, {number(float(hi['ci_high']))}]",
        "max_cell": escape(f"{hi['model']} at batch {hi['batch_size']}"),
        "pairs": str(len(ratios)),
        "faster": str(int((resolved & (ratios["ci_low"] > 1)).sum())),
        "slower": str(int((resolved & (ratios["ci_high"] < 1)).sum())),
        "unresolvable": str(int((ratios["ci_scope"] != "paired_rounds").sum())),
    }


def ratio_macros(ratios: pd.DataFrame, framework: str = "") -> dict[str, str]:
    """One framework's ratio summary (deviating ratios already left out) under its macro names."""
    names = ratio_names(framework)
    return {names[role]: value for role, value in _ratio_summary(ratios).items()}


def ratio_totals(ratios: pd.DataFrame) -> dict[str, str]:
    """Over the ratios of every framework (deviating ones left out): fwbNumRatios, and fwbNumRatiosUnresolvable,
    how many of them have only a within-process or unpaired interval."""
    return {
        "fwbNumRatios": str(len(ratios)),
        "fwbNumRatiosUnresolvable": str(int((ratios["ci_scope"] != "paired_rounds").sum())) if len(ratios) else "0",
    }


def _excluded_note(excluded: int) -> str:
    """After "the N pairs where both frameworks succeeded": the pairs left out for their workarounds, if any."""
    if not excluded:
        return ""
    return f" (and with the same workarounds: {excluded} further pair{'' if excluded == 1 else 's'} left out)"


def _compared(frameworks: list[str]) -> list[str]:
    """The study's frameworks that have ratios against PyTorch (none when the study has no PyTorch), config order."""
    return [f for f in frameworks if f != BASELINE] if BASELINE in frameworks else []


def _speedup_clause(framework: str, values: dict[str, str], excluded: int, alone: bool) -> str:
    if values["pairs"] == "0":
        return f"no model and batch-size pair has both {label(framework)} and PyTorch results to compare"
    both = "both frameworks" if alone else f"{label(framework)} and PyTorch both"
    return (
        f"across the {values['pairs']} model and batch-size pairs where {both} succeeded{_excluded_note(excluded)}, "
        f"the median {ratio_label(framework)} throughput ratio is {values['median']}, ranging from {values['min']} "
        f"(95\\% CI {values['min_ci']}, {values['min_cell']}) to {values['max']} (95\\% CI {values['max_ci']}, "
        f"{values['max_cell']})"
    )


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def speedup_sentence(defs: dict[str, str], frameworks: list[str], excluded: dict[str, int]) -> str:
    """The abstract's summary of the ratios (fwbSpeedupSentence): for each framework against PyTorch, over how many
    pairs (and how many were left out for their workarounds), the median and the extremes with their CIs."""
    compared = _compared(frameworks)
    if not compared:
        return "The study has no framework to compare with PyTorch, so it reports no throughput ratio."
    clauses = [_speedup_clause(f, _values(defs, f), excluded.get(f, 0), alone=len(compared) == 1) for f in compared]
    return _capitalised("; ".join(clauses)) + "."


def _values(defs: dict[str, str], framework: str) -> dict[str, str]:
    return {role: defs[name] for role, name in ratio_names(framework).items()}


def faster_sentence(defs: dict[str, str], frameworks: list[str]) -> str:
    """The results' count of resolved ratios, each framework against PyTorch (fwbFasterSentence)."""
    compared = _compared(frameworks)
    if not compared:
        return "No framework is compared with PyTorch in this study."
    clauses = []
    for framework in compared:
        values = _values(defs, framework)
        clauses.append(
            f"of {values['pairs']} comparable cells, {label(framework)} is faster in {values['faster']} and PyTorch "
            f"in {values['slower']}"
        )
    return _capitalised("; ".join(clauses)) + (
        " (the paired 95\\% CI over interleaved rounds entirely above, respectively below, one); the rest are not "
        "resolved."
    )


def peak_sentence(defs: dict[str, str], frameworks: list[str]) -> str:
    """Each framework's peak throughput and the cell it was reached in (fwbPeakSentence)."""
    clauses = [
        f"{label(f)}'s {'peak throughput ' if index == 0 else ''}is {defs[macro_name('peak', f)]}~img/s "
        f"({defs[macro_name('peak', f, 'cell')]})"
        for index, f in enumerate(frameworks)
    ]
    return "; ".join(clauses) + "."


def sentence_macros(defs: dict[str, str], frameworks: list[str], excluded: dict[str, int]) -> dict[str, str]:
    """The sentences of the abstract and the results that name every framework of the study (config order):
    fwbFrameworkList, fwbSpeedupSentence, fwbFasterSentence and fwbPeakSentence."""
    return {
        "fwbFrameworkList": join_words([label(f) for f in frameworks]),
        "fwbSpeedupSentence": speedup_sentence(defs, frameworks, excluded),
        "fwbFasterSentence": faster_sentence(defs, frameworks),
        "fwbPeakSentence": peak_sentence(defs, frameworks),
    }


def macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    env: dict[str, Any],
    config: dict[str, Any],
    extra: dict[str, str] | None = None,
) -> str:
    """`extra`: macros computed elsewhere (the data section's), defined in the same file.

    Refused ratios (cells on different device models) are in no summary (fwbNumRatiosRefused counts them). Ratios
    whose two cells ran with different workarounds from the fallback ladder (`deviation_differs`) are left
    out of every summary of the ratios (median, extremes, pair counts, resolved tallies) unless
    `fallbacks.include_deviating_in_summary` is set; fwbNumPairsExcludedDeviating counts them.

    Every framework's ratios against PyTorch are summarised under its own names (`ratio_names`), JAX's also under
    the names the paper used when it was the only one; the sentences naming the study's frameworks
    (`sentence_macros`) follow the config's order."""
    ok = frame[frame["status"] == "ok"]
    every_ratio = computed_ratios(ratios)  # what the summary leaves out beyond refusals is the deviating pairs
    ratios, deviation_defs = summary_ratios(ratios, config)
    defs = {
        "fwbStudyName": escape(config["study"]),
        "fwbTitle": escape(config["report"]["title"]),
        "fwbNumCells": str(len(frame)),
        "fwbNumOk": str(len(ok)),
        "fwbNumFailed": str(len(frame) - len(ok)),
        "fwbNumModels": str(frame["model"].nunique()),
        "fwbBatchSizes": ", ".join(str(b) for b in sorted(frame["batch_size"].unique())),
        "fwbImageSize": str(int(frame["image_size"].iloc[0])),
        "fwbNumClasses": str(config["dataset"]["num_classes"]),
        "fwbMinIters": str(config["inference"]["min_iters"]),
        "fwbMinSeconds": number(float(config["inference"]["min_seconds"]), 2),
        "fwbWarmupIters": str(config["inference"]["warmup_iters"]),
        "fwbCITarget": number(100 * float(config["inference"]["ci_target"]), 2),
        "fwbTrials": str(int(config["inference"].get("trials", 1))),
        "fwbNumNoisy": str(int(ok["noisy"].fillna(False).astype(bool).sum())),
        "fwbNumCINotReached": str(int(ok["ci_not_reached"].fillna(False).astype(bool).sum())),
        "fwbNumSettingsDiffer": str(
            int((ok["settings_differ"].astype(str) == "True").sum()) if "settings_differ" in ok else 0
        ),
    }

    def _first(column: str, default: str) -> str:
        values = ok[column].dropna() if column in ok else []
        return escape(values.iloc[0]) if len(values) else default

    def _count(column: str) -> str:
        return str(int(ok[column].fillna(False).astype(bool).sum())) if column in ok else "0"

    defs.update(
        fwbNumEnergy=str(int(ok["energy_j_per_image"].notna().sum())) if "energy_j_per_image" in ok else "0",
        fwbEnergySource=_first("energy_source", "none"),
        fwbEnergyMissing=_first("energy_missing", "none"),
        fwbNumDeviceMemory=str(int(ok["device_peak_bytes"].notna().sum())) if "device_peak_bytes" in ok else "0",
        fwbDeviceMemoryMissing=_first("device_memory_missing", "none"),
        fwbNumRecompiled=_count("recompiled"),
        fwbNumOtherGPU=_count("other_gpu_processes"),
    )
    if "mfu" in ok and ok["mfu"].notna().any():
        best = ok.loc[ok["mfu"].idxmax()]
        fw = FRAMEWORK_LABELS.get(best["framework"], best["framework"])
        defs["fwbMaxMFU"] = number(100 * float(best["mfu"]), 2)
        defs["fwbMaxMFUCell"] = escape(f"{fw} {best['model']} at batch {best['batch_size']}")
        fp32_peaks = ok.loc[ok["precision"] == "fp32", "peak_flops"].dropna()  # the tf32 peak has its own row
        defs["fwbPeakGflopsFloat"] = number(float(fp32_peaks.max()) / 1e9) if len(fp32_peaks) else "---"
    else:
        defs["fwbMaxMFU"], defs["fwbMaxMFUCell"], defs["fwbPeakGflopsFloat"] = "---", "no cell", "---"
    for key, name in (
        ("CPU", "fwbCPU"),
        ("Device", "fwbDevice"),
        ("PyTorch", "fwbTorchVersion"),
        ("JAX", "fwbJaxVersion"),
        ("Flax", "fwbFlaxVersion"),
        ("TensorFlow", "fwbTensorflowVersion"),
        ("Keras", "fwbKerasVersion"),
        ("Python", "fwbPythonVersion"),
        ("Threads per cell", "fwbThreads"),
        ("fwbench commit", "fwbCommit"),
    ):
        defs[name] = escape(env.get(key) if env.get(key) is not None else "---")
    for framework, text in FRAMEWORK_LABELS.items():  # every framework defined, so the paper compiles for any subset
        mine = ok[ok["framework"] == framework]
        best = mine.sort_values("throughput_img_s").iloc[-1] if not mine.empty else None
        defs[macro_name("peak", framework)] = number(best["throughput_img_s"]) if best is not None else "---"
        defs[macro_name("peak", framework, "cell")] = (
            escape(f"{best['model']} at batch {best['batch_size']}") if best is not None else "no successful cell"
        )
        defs[macro_name("label", framework)] = text
    defs.update(deviation_defs)
    defs["fwbFallbackLadder"] = fallback_ladder(config)
    for framework in others(FRAMEWORK_LABELS):  # every framework defined, so the paper compiles for any subset
        defs |= ratio_macros(ratios_for(ratios, framework), framework)
    defs |= ratio_macros(ratios_for(ratios, "jax"))  # the names the paper used when JAX was the only ratio
    defs |= ratio_totals(ratios)
    excluded = {f: len(ratios_for(every_ratio, f)) - len(ratios_for(ratios, f)) for f in others(FRAMEWORK_LABELS)}
    frameworks = list(config.get("frameworks") or ordered_frameworks(frame["framework"]))
    defs |= sentence_macros(defs, frameworks, excluded)
    defs.update(extra or {})
    return "% Generated by fwbench.analysis.macros from the study's results; do not edit.\n" + define_macros(defs)
