"""The setup section's tables: the machine and software the study ran on (`environment_table`, from the cells'
provenance: fwbench.analysis.setup.provenance) and the models' parameter counts and FLOPs per image from both
counters (`models_table`), with the counters' disagreements explained in notes rather than hidden."""

from __future__ import annotations

from typing import Any

from fwbench.analysis.common.latex import breakable, escape, number
from fwbench.analysis.common.names import model_name

# The environment table sits in one column of the paper, and its values are whatever the machine reports (a CPU
# model string, a GPU name, XLA_FLAGS): both columns have fixed widths that add up to the column and wrap, and a long
# value may break after a separator, so no machine's names can make the table wider than the column.
ENVIRONMENT_COLUMNS = (
    r"@{}>{\raggedright\arraybackslash}p{0.40\columnwidth}"
    r">{\raggedright\arraybackslash}p{0.56\columnwidth}@{}"
)


def environment_table(env: dict[str, Any]) -> str:
    """Machine and software the study ran on, from the cells' provenance."""
    lines = [rf"\begin{{tabular}}{{{ENVIRONMENT_COLUMNS}}}", r"\toprule"]
    for key, value in env.items():
        lines.append(rf"{escape(key)} & {breakable(value) if value is not None else '---'} \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _count(value: int) -> str:
    return f"{int(value):,}".replace(",", "{,}")


def _flops(value: float) -> str:
    return number(value / 1e9, 3)


def models_table(facts: list[dict[str, Any]], starts: dict[str, str]) -> str:
    """Parameter counts and FLOPs per image from both counters, at the study's and torchvision's configuration.
    Each model is named as the prose names it on its first row and by its config name (the identifier a study file
    uses) on its second: the one place in the paper where identifiers belong, so a reader can map one to the other,
    without a column of its own that would widen the table past the page.

    The counters' disagreements are explained by lettered notes under the table rather than hidden.
    """
    notes: dict[str, str] = {}
    lines = [
        r"\begin{tabular}{l l r r r r l}",
        r"\toprule",
        r"\textbf{Model} & \textbf{Setting} & \textbf{Params} & \textbf{GFLOP/img (torch)} & "
        r"\textbf{GFLOP/img (XLA)} & \textbf{XLA/torch} & \textbf{Note} \\",
        r"\midrule",
    ]
    rows = sorted(facts, key=lambda r: (r["model"], r["configuration"] != "study"))
    for index, row in enumerate(rows):
        params = (
            _count(row["params_torch"])
            if row["params_torch"] == row["params_flax"]
            else rf"{_count(row['params_torch'])} vs {_count(row['params_flax'])}\,(!)"
        )
        letter = notes.setdefault(row["note"], "abcdefgh"[len(notes)])
        config = f"{row['image_size']} px, {row['num_classes']} cl."
        first = index == 0 or rows[index - 1]["model"] != row["model"]
        names = escape(model_name(row["model"])) if first else f"\\texttt{{{escape(row['model'])}}}"
        lines.append(
            f"{names} & {config} & {params} & {_flops(row['flops_torch'])} & "
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
        f"{'all models' if len(by_start) == 1 else escape(', '.join(model_name(m) for m in models))}: {escape(text)}"
        for text, models in by_start.items()
    )
    lines.append(rf"\par\smallskip{{\footnotesize Notes: {legend}. Counters: {counters} Start: {start}.}}")
    return "\n".join(lines) + "\n"
