"""LaTeX tables for the paper, generated from the tidy table (never typed by hand)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fwbench.analysis.latex import FRAMEWORK_LABELS, escape, number

FAILED = r"failed$^\dagger$"


def _cell(frame: pd.DataFrame, framework: str, column: str, digits: int = 3) -> str:
    if frame.empty or framework not in set(frame["framework"]):
        return "---"
    row = frame[frame["framework"] == framework].iloc[0]
    if row["status"] != "ok":
        return FAILED
    marks = ""
    if column == "throughput_img_s":
        marks = (
            (r"$^{n}$" if row.get("noisy") is True else "")
            + (r"$^{c}$" if row.get("ci_not_reached") is True else "")
            + (r"$^{s}$" if str(row.get("settings_differ")) == "True" else "")
        )
    return number(row[column], digits) + marks


# How a ratio's CI was obtained, when it cannot resolve a comparison (see fwbench.analysis.aggregate.ratio_interval).
SCOPE_MARKS = {"within_process": r"$^{w}$", "unpaired_trials": r"$^{u}$"}


def _ratio(row) -> str:
    """Ratio with its 95% CI; bold where it is resolved (a paired CI over interleaved rounds that excludes 1).
    A CI from within one process (one trial) or from trials not interleaved is marked and never bold."""
    text = rf"{number(row['ratio'])}$\times$ {{\scriptsize[{number(row['ci_low'])}, {number(row['ci_high'])}]}}"
    if str(row.get("resolved")) == "True":
        return rf"\textbf{{{text}}}"
    return text + SCOPE_MARKS.get(str(row.get("ci_scope")), "")


def inference_table(frame: pd.DataFrame, frameworks: list[str], ratios: pd.DataFrame) -> str:
    """Throughput, median latency and compile time per model and batch size, frameworks side by side."""
    show_ratio = {"torch", "jax"} <= set(frameworks)
    columns = ["Model", "Prec.", "BS"]
    columns += [f"{FRAMEWORK_LABELS.get(f, f)} img/s" for f in frameworks]
    columns += ["JAX/PT [95% CI]"] if show_ratio else []
    columns += [f"{FRAMEWORK_LABELS.get(f, f)} p50 ms" for f in frameworks]
    show_mfu = "mfu" in frame
    columns += [f"{FRAMEWORK_LABELS.get(f, f)} MFU %" for f in frameworks] if show_mfu else []
    columns += ["JAX compile s"] if "jax" in frameworks else []
    lines = [
        r"\begin{tabular}{ll r " + "r" * (len(columns) - 3) + "}",
        r"\toprule",
        " & ".join(rf"\textbf{{{escape(c)}}}" for c in columns) + r" \\",
        r"\midrule",
    ]
    groups = list(frame.groupby(["model", "precision"], sort=True))
    for index, ((model, precision), group) in enumerate(groups):
        for row_index, (batch, cells) in enumerate(group.groupby("batch_size", sort=True)):
            values = [escape(model) if row_index == 0 else "", escape(precision) if row_index == 0 else "", str(batch)]
            values += [_cell(cells, f, "throughput_img_s") for f in frameworks]
            if show_ratio:
                match = ratios[
                    (ratios["model"] == model) & (ratios["precision"] == precision) & (ratios["batch_size"] == batch)
                ]
                values.append(_ratio(match.iloc[0]) if not match.empty else "---")
            values += [_cell(cells, f, "latency_p50_ms") for f in frameworks]
            if show_mfu:
                values += [_cell(cells.assign(mfu=cells["mfu"] * 100), f, "mfu", 2) for f in frameworks]
            if "jax" in frameworks:
                values.append(_cell(cells, "jax", "compile_s"))
            lines.append(" & ".join(values) + r" \\")
        if index < len(groups) - 1:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def failures_table(frame: pd.DataFrame) -> str:
    """Every failed cell with its recorded reason; a sentence saying so when none failed."""
    failed = frame[frame["status"] != "ok"]
    if failed.empty:
        return "No benchmark cell failed.\n"
    lines = [
        r"\begin{tabular}{l p{0.62\linewidth}}",
        r"\toprule",
        r"\textbf{Cell} & \textbf{Recorded reason} \\",
        r"\midrule",
    ]
    for _, row in failed.iterrows():
        framework = FRAMEWORK_LABELS.get(row["framework"], row["framework"])
        label = f"{framework} {row['model']} {row['precision']} bs{row['batch_size']}"
        lines.append(rf"{escape(label)} & \footnotesize {escape(row['reason'])} \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def environment_table(env: dict[str, Any]) -> str:
    """Machine and software the study ran on, from the cells' provenance."""
    lines = [r"\begin{tabular}{ll}", r"\toprule"]
    for key, value in env.items():
        lines.append(rf"{escape(key)} & {escape(value if value is not None else '---')} \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _count(value: int) -> str:
    return f"{int(value):,}".replace(",", "{,}")


def _flops(value: float) -> str:
    return number(value / 1e9, 3)


def models_table(facts: list[dict[str, Any]], starts: dict[str, str]) -> str:
    """Parameter counts and FLOPs per image from both counters, at the study's and torchvision's configuration.

    The counters' disagreements are explained by lettered notes under the table rather than hidden.
    """
    notes: dict[str, str] = {}
    lines = [
        r"\begin{tabular}{l l r r r r l}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Config.} & \textbf{Params} & \textbf{GFLOP/img (torch)} & "
        r"\textbf{GFLOP/img (XLA)} & \textbf{XLA/torch} & \textbf{Note} \\",
        r"\midrule",
    ]
    for row in sorted(facts, key=lambda r: (r["model"], r["configuration"] != "study")):
        params = (
            _count(row["params_torch"])
            if row["params_torch"] == row["params_flax"]
            else rf"{_count(row['params_torch'])} vs {_count(row['params_flax'])}\,(!)"
        )
        letter = notes.setdefault(row["note"], "abcdefgh"[len(notes)])
        config = f"{row['image_size']} px, {row['num_classes']} cl."
        lines.append(
            f"{escape(row['model'])} & {config} & {params} & {_flops(row['flops_torch'])} & "
            f"{_flops(row['flops_xla'])} & {number(1 + row['flops_difference'], 3)} & {letter} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    legend = "; ".join(f"({letter}) {escape(note)}" for note, letter in notes.items())
    counters = (
        r"torch: \texttt{torch.utils.flop\_counter.FlopCounterMode}; XLA: \texttt{compiled.cost\_analysis()}; "
        r"FLOPs = 2 $\times$ MACs."
    )
    by_start: dict[str, list[str]] = {}
    for model, text in sorted(starts.items()):
        by_start.setdefault(text, []).append(model)
    start = "; ".join(
        f"{'all models' if len(by_start) == 1 else escape(', '.join(models))}: {escape(text)}"
        for text, models in by_start.items()
    )
    lines.append(rf"\par\smallskip{{\footnotesize Notes: {legend}. Counters: {counters} Start: {start}.}}")
    return "\n".join(lines) + "\n"
