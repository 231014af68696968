"""Numbers quoted in the paper's prose, as LaTeX macros computed from the results (never typed by hand).

`macros` writes the one macro file the paper reads: the study's setup and cells, the burst checks, the environment,
and, from the modules beside it, which ratios the summaries count (fwbench.analysis.inference.ratio_macros) and the
execution-mode axis (fwbench.analysis.inference.mode_macros). Sentences are no macros: the Results' findings
are a template's (fwbench.analysis.inference.findings, report/templates/inference_results.tex.j2)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import (
    default_title,
    define_macros,
    escape,
    join_words,
    number,
    variant_label,
)
from fwbench.analysis.common.names import model_in_text
from fwbench.analysis.common.partners import multi_mode, with_modes
from fwbench.analysis.common.verdicts import multiplicity_setting
from fwbench.analysis.inference.mode_macros import mode_macros
from fwbench.analysis.inference.ratio_macros import (
    computed_ratios,
    multiplicity_macros,
    ratio_totals,
    summary_ratios,
)
from fwbench.scenarios.blocks import STEAL_FLAG


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


def burst_macros(ok: pd.DataFrame) -> dict[str, str]:
    """The burst checks the paper quotes: bursts in all, those flagged for steal and the cells they fell in, and
    the most CPU a waiting worker used (percent of one core, the worst launch of any cell); "n/a" where no cell was
    measured in blocks."""
    bursts = ok["bursts"].dropna() if "bursts" in ok else pd.Series(dtype=float)
    if bursts.empty:
        return {"fwbNumBursts": "n/a", "fwbNumStealBursts": "n/a", "fwbNumStealCells": "n/a", "fwbIdleCpuMax": "n/a"}
    flagged = ok["steal_flagged_bursts"].fillna(0)
    idle = ok["idle_cpu_per_wall"].dropna()
    return {
        "fwbNumBursts": str(int(bursts.sum())),
        "fwbNumStealBursts": str(int(flagged.sum())),
        "fwbNumStealCells": str(int((flagged > 0).sum())),
        "fwbIdleCpuMax": number(100 * float(idle.max()), 2) if not idle.empty else "n/a",
    }


def peaks_used(ok: pd.DataFrame) -> str:
    """The peaks the cells' MFU divides by, one per arithmetic the cells ran in ("50,882 GFLOP/s for cells in fp32"):
    each cell is measured against the peak of the arithmetic it recorded (tidy's `arithmetic`), so an fp32 figure
    alone would name no peak a TF32 cell used (the first GPU study's paper printed "---" there)."""
    kinds = ok["arithmetic"] if "arithmetic" in ok else ok["precision"]
    peaks = ok.dropna(subset=["peak_flops"]).groupby(kinds.astype(str), sort=True)["peak_flops"].max()
    if peaks.empty:
        return "--- GFLOP/s"
    return join_words([f"{number(float(v) / 1e9)} GFLOP/s for cells in {escape(p)}" for p, v in peaks.items()])


def macros(
    frame: pd.DataFrame,
    ratios: pd.DataFrame,
    env: dict[str, Any],
    config: dict[str, Any],
    extra: dict[str, str] | None = None,
) -> str:
    """`extra`: macros computed elsewhere (the data section's, the templates' sentences), defined in the same file.

    Refused ratios (cells on different device models) are in no summary (fwbNumRatiosRefused counts them). Ratios
    whose two cells ran with different workarounds from the fallback ladder (`deviation_differs`) are left
    out of every summary of the ratios unless `fallbacks.include_deviating_in_summary` is set;
    fwbNumPairsExcludedDeviating counts them, fwbNumRatiosStandIn the ratios with another mode standing in for their
    column's. The summaries themselves are the Results' (fwbench.analysis.inference.findings), in a template's
    words."""
    frame = with_modes(frame)
    ok = frame[frame["status"] == "ok"]
    several = multi_mode(zip(frame["framework"], frame["mode"], strict=True))
    every_ratio = computed_ratios(ratios)  # beyond refusals, the summary leaves out deviating pairs and stand-ins
    mode_defs = mode_macros(ratios, env)
    ratios, deviation_defs = summary_ratios(ratios, config)
    defs = {
        "fwbStudyName": escape(config["study"]),
        "fwbTitle": escape(config["report"]["title"] or default_title(config["frameworks"])),
        "fwbNumCells": str(len(frame)),
        "fwbNumOk": str(len(ok)),
        "fwbNumFailed": str(len(frame) - len(ok)),
        "fwbNumModels": str(frame["model"].nunique()),
        "fwbBatchSizes": ", ".join(str(b) for b in sorted(frame["batch_size"].unique())),
        "fwbImageSize": str(int(frame["image_size"].iloc[0])),
        "fwbNumClasses": str(config["dataset"]["num_classes"]),
        "fwbWarmupIters": str(config["inference"]["warmup_iters"]),
        "fwbTrials": str(int(config["inference"].get("trials", 1))),
        "fwbBlocks": str(int(config["inference"]["blocks"])),
        "fwbBurstMs": number(1000 * float(config["inference"]["burst_s"]), 3),
        "fwbBurstDiscard": str(int(config["inference"]["burst_discard"])),
        "fwbStealFlag": number(100 * STEAL_FLAG, 2),
        "fwbNumNoisy": str(int(ok["noisy"].fillna(False).astype(bool).sum())),
        **burst_macros(ok),
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
        fw = variant_label(best["framework"], best["mode"], alone=best["framework"] not in several)
        defs["fwbMaxMFU"] = number(100 * float(best["mfu"]), 2)
        defs["fwbMaxMFUCell"] = escape(f"{fw} on {model_in_text(best['model'])} at batch {best['batch_size']}")
        defs["fwbPeakGflopsFloat"] = peaks_used(ok)
    else:
        defs["fwbMaxMFU"], defs["fwbMaxMFUCell"], defs["fwbPeakGflopsFloat"] = "---", "no cell", "--- GFLOP/s"
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
    defs.update(deviation_defs)
    defs["fwbFallbackLadder"] = fallback_ladder(config)
    defs |= ratio_totals(ratios)
    setting = multiplicity_setting(config.get("analysis"))
    defs |= multiplicity_macros(every_ratio, setting)
    defs |= mode_defs
    defs.update(extra or {})
    return "% Generated by fwbench.analysis.inference.macros from the study's results; do not edit.\n" + define_macros(
        defs
    )
