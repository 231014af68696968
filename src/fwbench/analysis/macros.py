"""Numbers quoted in the paper's prose, as LaTeX macros computed from the results (never typed by hand)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.latex import FRAMEWORK_LABELS, define_macros, escape, macro_name, number


def include_deviating(config: dict[str, Any]) -> bool:
    """Whether the summary statistics count ratios between cells that ran with different workarounds."""
    return bool((config.get("fallbacks") or {}).get("include_deviating_in_summary", False))


def _deviating(ratios: pd.DataFrame) -> pd.Series:
    if "deviation_differs" not in ratios:
        return pd.Series(False, index=ratios.index)
    return ratios["deviation_differs"].astype(str) == "True"


def summary_ratios(ratios: pd.DataFrame, config: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The ratios the summary statistics are taken over, and the macros saying what was left out:
    fwbNumPairsAll (every ratio), fwbNumPairsDeviating (ratios whose cells ran with different workarounds, marked
    in the table), fwbNumPairsExcludedDeviating (those left out of the summary: all of them, or none when
    `fallbacks.include_deviating_in_summary` is set) and fwbDeviatingPairsSentence (one sentence for the text)."""
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
    defs = {
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


def macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    env: dict[str, Any],
    config: dict[str, Any],
    extra: dict[str, str] | None = None,
) -> str:
    """`extra`: macros computed elsewhere (the data section's), defined in the same file.

    Ratios whose two cells ran with different workarounds from the fallback ladder (`deviation_differs`) are left
    out of every summary of the ratios (median, extremes, pair counts, resolved tallies) unless
    `fallbacks.include_deviating_in_summary` is set; fwbNumPairsExcludedDeviating counts them."""
    ok = frame[frame["status"] == "ok"]
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
    for key, label in (
        ("CPU", "fwbCPU"),
        ("Device", "fwbDevice"),
        ("PyTorch", "fwbTorchVersion"),
        ("JAX", "fwbJaxVersion"),
        ("Flax", "fwbFlaxVersion"),
        ("Python", "fwbPythonVersion"),
        ("Threads per cell", "fwbThreads"),
        ("fwbench commit", "fwbCommit"),
    ):
        defs[label] = escape(env.get(key) if env.get(key) is not None else "---")
    for framework, label in FRAMEWORK_LABELS.items():  # every framework defined, so the paper compiles for any subset
        mine = ok[ok["framework"] == framework]
        best = mine.sort_values("throughput_img_s").iloc[-1] if not mine.empty else None
        defs[macro_name("peak", framework)] = number(best["throughput_img_s"]) if best is not None else "---"
        defs[macro_name("peak", framework, "cell")] = (
            escape(f"{best['model']} at batch {best['batch_size']}") if best is not None else "no successful cell"
        )
        defs[macro_name("label", framework)] = label
    defs.update(deviation_defs)
    defs["fwbFallbackLadder"] = fallback_ladder(config)
    if not ratios.empty:
        lo, hi = ratios.loc[ratios["ratio"].idxmin()], ratios.loc[ratios["ratio"].idxmax()]
        defs["fwbSpeedupMedian"] = number(float(ratios["ratio"].median()))
        defs["fwbSpeedupMin"] = number(float(lo["ratio"]))
        defs["fwbSpeedupMinCI"] = f"[{number(float(lo['ci_low']))}, {number(float(lo['ci_high']))}]"
        defs["fwbSpeedupMinCell"] = escape(f"{lo['model']} at batch {lo['batch_size']}")
        defs["fwbSpeedupMax"] = number(float(hi["ratio"]))
        defs["fwbSpeedupMaxCI"] = f"[{number(float(hi['ci_low']))}, {number(float(hi['ci_high']))}]"
        defs["fwbSpeedupMaxCell"] = escape(f"{hi['model']} at batch {hi['batch_size']}")
        defs["fwbNumPairs"] = str(len(ratios))
        # Resolved: the paired CI over interleaved rounds excludes 1 (a within-process or unpaired CI never counts).
        resolved = ratios["resolved"].astype(str) == "True"
        defs["fwbJaxFasterPairs"] = str(int((resolved & (ratios["ci_low"] > 1)).sum()))
        defs["fwbTorchFasterPairs"] = str(int((resolved & (ratios["ci_high"] < 1)).sum()))
        defs["fwbNumPairsUnresolvable"] = str(int((ratios["ci_scope"] != "paired_rounds").sum()))
    else:
        for name in ("fwbSpeedupMedian", "fwbSpeedupMin", "fwbSpeedupMax", "fwbSpeedupMinCI", "fwbSpeedupMaxCI"):
            defs[name] = "---"
        defs["fwbSpeedupMinCell"] = defs["fwbSpeedupMaxCell"] = "no cell pair"
        defs["fwbNumPairs"] = defs["fwbJaxFasterPairs"] = defs["fwbTorchFasterPairs"] = "0"
        defs["fwbNumPairsUnresolvable"] = "0"
    defs.update(extra or {})
    return "% Generated by fwbench.analysis.macros from the study's results; do not edit.\n" + define_macros(defs)
