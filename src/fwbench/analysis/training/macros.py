"""The training section's numbers as LaTeX macros (cells, epochs, training time, the step-0 and top-1 summaries over
every pair and per compared variant), for an author who quotes one in hand-written text. The section's own sentences
are the templates' (report/templates/training.tex.j2, from fwbench.analysis.training.findings).

Every summary is defined for every variant the study could train, so the paper compiles for any subset of them."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, FRAMEWORK_LABELS, macro_name, number
from fwbench.analysis.training.step0 import agreement_for, top1_gap
from fwbench.analysis.training.tables import present
from fwbench.study.modes import MODES, primary

# Every variant the step-0 summaries are defined for (the baseline's primary mode is what they compare with), so
# the paper compiles for any subset of them.
COMPARED_VARIANTS = [
    (framework, mode)
    for framework in FRAMEWORK_LABELS
    for mode in MODES.get(framework, ())
    if (framework, mode) != (BASELINE, primary(BASELINE))
]


def macro_parts(framework: str, mode: str) -> tuple[str, ...]:
    """A variant's part of a macro name: the framework for its primary mode (fwbStepZeroMaxDiffJax), the framework
    and mode otherwise (fwbStepZeroMaxDiffTorchCompile)."""
    return (framework,) if mode == primary(framework) else (framework, mode)


def _agreement_macros(agreement: pd.DataFrame, *variant: str) -> dict[str, str]:
    """Step-0 and top-1 summary of some pairs: the largest relative difference of the loss after the step (and of
    the step-0 loss and gradient norm), how many fp32 pairs are flagged, the largest top-1 gap (points) and the
    number of pairs. Names end in the variant for its own pairs (fwbStepZeroMaxDiffTensorflow,
    fwbStepZeroLossDiffTorchCompile: compiled PyTorch against eager); without one they cover every pair
    (fwbStepZeroMaxDiff)."""
    if agreement.empty:
        values = {
            "step zero max diff": "---",
            "step zero loss diff": "---",
            "step zero grad norm diff": "---",
            "step zero flagged": "0",
            "top one max gap": "---",
            "num train pairs": "0",
        }
    else:
        values = {
            "step zero max diff": f"{agreement['rel_diff_loss_after_step'].max():.1e}",
            "step zero loss diff": f"{agreement['rel_diff_loss'].max():.1e}",
            "step zero grad norm diff": f"{agreement['rel_diff_grad_norm'].max():.1e}",
            "step zero flagged": str(int((agreement["flagged"].astype(str) == "True").sum())),
            "top one max gap": number(float(top1_gap(agreement).max())),
            "num train pairs": str(len(agreement)),
        }
    return {macro_name(role, *variant): value for role, value in values.items()}


def training_macros(frame: pd.DataFrame, agreement: pd.DataFrame, include_deviating: bool = False) -> dict[str, str]:
    """The training section's numbers. Pairs whose two cells ran with different workarounds are left out of the
    step-0 and top-1 summaries unless `include_deviating` (`fallbacks.include_deviating_in_summary`). The step-0 and
    top-1 summaries cover every framework's pairs with PyTorch, and each framework's own under names ending in it
    (defined for every framework, so the paper compiles for any subset). Compiled PyTorch is one of them: its
    summaries (against eager PyTorch) end in TorchCompile."""
    ok = frame[frame["status"] == "ok"]
    cells = frame.drop_duplicates("path")
    deviating = (
        agreement["deviation_differs"].astype(str) == "True"
        if "deviation_differs" in agreement
        else pd.Series(False, index=agreement.index)
    )
    excluded = 0 if include_deviating else int(deviating.sum())
    agreement = agreement if include_deviating else agreement[~deviating]
    with_workaround = cells["deviations"].map(present) & (cells["status"] == "ok") if "deviations" in cells else []
    defs = {
        "fwbNumTrainCells": str(len(cells)),
        "fwbNumTrainOk": str(int((cells["status"] == "ok").sum())),
        "fwbNumTrainDeviating": str(int(sum(with_workaround))),
        "fwbNumTrainPairsDeviating": str(int(deviating.sum())),
        "fwbNumTrainPairsExcludedDeviating": str(excluded),
        "fwbTrainEpochs": str(int(ok["epoch"].max() + 1)) if not ok.empty else "0",
        "fwbTrainTime": number(float(ok["time_s"].sum())) if not ok.empty else "---",
        "fwbBnRecalBatches": str(int(ok["bn_recalibration_batches"].max())) if not ok.empty else "0",
    }
    defs |= _agreement_macros(agreement)
    for framework, mode in COMPARED_VARIANTS:
        defs |= _agreement_macros(agreement_for(agreement, framework, mode), *macro_parts(framework, mode))
    return defs
