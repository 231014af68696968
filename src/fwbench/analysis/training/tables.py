"""The training section's LaTeX tables: per model, variant and batch size the time and cost table (tab:training) and
the loss and accuracy table (tab:training-accuracy), and the step-0 agreement table (tab:step0); and how the tables
and text name each variant.

PyTorch eager and PyTorch compiled (torch.compile) are two rows everywhere, labelled with their mode wherever a
framework trains in more than one; compiled PyTorch's step-0 row is named against eager PyTorch."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.common.latex import BASELINE, escape, number, ordered_variants, stacked_header, variant_short
from fwbench.analysis.common.names import model_name
from fwbench.analysis.common.partners import variant_names, with_modes
from fwbench.analysis.training.step0 import agreement_variant, denominator_tag, variant_tag
from fwbench.study.modes import primary

DEVIATION_MARK = r"$^{d}$"  # a cell that ran with a workaround; a pair whose cells ran with different ones
# A cell that spent more than this share of its step time waiting for data is marked $^w$.
DATA_WAIT_FRACTION = 0.05

# The two training tables' columns after Model, Framework and Batch: time and cost (tab:training), then loss and
# accuracy (tab:training-accuracy). Split in two, each fits the page at 8 pt with nothing scaled.
TRAINING_PARTS = {
    "time": [
        r"\textbf{s/epoch}",
        r"\textbf{img/s}",
        stacked_header("Compile", "(s)"),
        r"\textbf{J/epoch}",
        stacked_header("RSS max", "(MB)"),
        stacked_header("To target", "(s)"),
    ],
    "accuracy": [
        r"\textbf{Loss}",
        r"\textbf{Top-1}",
        r"\textbf{Top-5}",
        r"\textbf{Top-1$^r$}",
        r"\textbf{Top-1$^b$}",
    ],
}


def _training_values(ok: pd.DataFrame, part: str) -> list[str]:
    last = ok.sort_values("epoch").iloc[-1]
    if part == "accuracy":
        return [
            number(last["train_loss"]),
            f"{number(100 * last['top1'])}\\%",
            f"{number(100 * last['top5'])}\\%",
            _percent(last.get("top1_running_statistics")),
            _percent(last.get("top1_batch_statistics")),
        ]
    wait = r"$^w$" if (ok["data_wait_frac"] > DATA_WAIT_FRACTION).any() else ""
    energy = number(ok["energy_j"].mean()) if ok["energy_j"].notna().any() else "---"
    return [
        number(ok["time_s"].mean()),
        f"{number(ok['img_s'].iloc[-1])}{wait}",
        number(ok["compile_s"].iloc[0]),
        energy,
        number(last["rss_max_mb"]),
        number(last["time_to_target_s"]),
    ]


def frame_names(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(framework, mode) -> how the training tables and text name each variant of a training table
    (`partners.variant_names`: the mode where a framework trains in several)."""
    frame = with_modes(frame)
    return variant_names(zip(frame["framework"], frame["mode"], strict=True))


def _training_groups(frame: pd.DataFrame):
    """(model, framework, mode, batch) and its rows, by model, then variant in the paper's order, then batch."""
    frame = with_modes(frame)
    order = {v: i for i, v in enumerate(ordered_variants(zip(frame["framework"], frame["mode"], strict=True)))}
    keys = sorted(
        frame.groupby(["model", "framework", "mode", "batch_size"]).groups,
        key=lambda k: (k[0], order[(k[1], k[2])], k[3]),
    )
    groups = frame.groupby(["model", "framework", "mode", "batch_size"])
    return [(key, groups.get_group(key)) for key in keys]


def training_table(frame: pd.DataFrame, part: str = "time") -> str:
    """Model x variant (framework and execution mode) x batch size, `part` "time": time/epoch, steady img/s
    (data-wait marked), compile time, energy, memory and time to the target top-1; "accuracy": final train loss and
    top-1/5 (with the running and the batch statistics)."""
    columns = TRAINING_PARTS[part]
    names = frame_names(frame)
    lines = [
        r"\begin{tabular}{l l r " + "r " * len(columns) + "}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Framework} & \textbf{Batch} & " + " & ".join(columns) + r" \\",
        r"\midrule",
    ]
    for (model, framework, mode, batch), group in _training_groups(frame):
        ok = group[group["status"] == "ok"]
        deviated = not ok.empty and present(ok["deviations"].iloc[0] if "deviations" in ok else None)
        head = f"{escape(model_name(model))} & {names[(framework, mode)]}{DEVIATION_MARK if deviated else ''} & {batch}"
        if ok.empty:
            kind = group["failure_kind"].iloc[0] if "failure_kind" in group else None
            failed = f"failed ({escape(kind)})" if present(kind) else "failed"
            reason = escape(str(group["reason"].iloc[0])[:60])
            lines.append(rf"{head} & \multicolumn{{{len(columns)}}}{{l}}{{{failed}: {reason}}} \\")
            continue
        lines.append(f"{head} & " + " & ".join(_training_values(ok, part)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def step0_table(agreement: pd.DataFrame) -> str:
    """Step-0 agreement of each variant with eager PyTorch; a Framework column only when more than one variant is
    compared (with one, the table is the two-framework table it always was). Compiled PyTorch's row is named
    "PyTorch (compiled)": the check that torch.compile's step computes what the eager one does."""
    variants = list(dict.fromkeys(agreement.apply(agreement_variant, axis=1)))
    several = len(variants) > 1
    final = (
        stacked_header("Final top-1", "framework/", "PyTorch")
        if several
        else stacked_header("Final top-1", f"{variant_short(*variants[0])}/PyTorch")
    )
    names = compared_names(variants)
    baseline = "PyTorch eager" if BASELINE in {framework for framework, _ in variants} else "PyTorch"
    lines = [
        r"\begin{tabular}{l l r " + ("l " if several else "") + "r r r r r r}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Prec.} & \textbf{Batch} & "
        + (r"\textbf{Framework} & " if several else "")
        + " & ".join(
            [
                stacked_header("Loss", f"({baseline})"),
                r"\textbf{$\Delta$ loss}",
                stacked_header(r"$\Delta$ loss", "after step"),
                stacked_header("PyTorch fp32", "vs fp64"),
                stacked_header(r"$\Delta$ grad", "norm"),
                final,
            ]
        )
        + r" \\",
        r"\midrule",
    ]
    for _, row in agreement.iterrows():
        variant, base = agreement_variant(row), denominator_tag(row)
        flag = r"$^\ast$" if str(row["flagged"]) == "True" else ""
        own = row.get("torch_fp32_error_after_step")
        deviating = DEVIATION_MARK if str(row.get("deviation_differs")) == "True" else ""
        lines.append(
            f"{escape(model_name(row['model']))}{deviating} & {row['precision']} & {row['batch_size']} & "
            + (f"{escape(names[variant])} & " if several else "")
            + f"{number(row[f'loss_{base}'], 5)} & "
            f"{row['rel_diff_loss']:.1e} & {row['rel_diff_loss_after_step']:.1e}{flag} & {_sci(own)} & "
            f"{row['rel_diff_grad_norm']:.1e} & {number(100 * row[f'final_top1_{variant_tag(*variant)}'])} / "
            f"{number(100 * row[f'final_top1_{base}'])}\\% \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def compared_names(variants) -> dict[tuple[str, str], str]:
    """How the step-0 text and table name each compared variant: with its mode where its framework has another one
    among them or is the baseline's (compiled PyTorch against eager PyTorch), else the framework alone."""
    return variant_names(variants, [(BASELINE, primary(BASELINE))])


def _percent(value) -> str:
    return "---" if value is None or value != value else f"{number(100 * value)}\\%"


def _sci(value) -> str:
    return "---" if value is None or value != value else f"{value:.1e}"


def present(value) -> bool:
    return value is not None and not (not isinstance(value, str) and pd.isna(value)) and str(value) != ""
