"""The numbers the micro section's macros and values are read as: small numbers in scientific notation, a column's
distinct values, and the counts of cells (the sentences are the templates', report/templates/micro*.tex.j2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape
from fwbench.analysis.micro.vocabulary import is_measured, is_measured_text


def sci(value: float) -> str:
    """A small number as $m \\times 10^{e}$ (LaTeX math, no package needed)."""
    if not is_measured(value):
        return "---"
    if value == 0:
        return "0"
    mantissa, exponent = f"{float(value):.1e}".split("e")
    return rf"${mantissa}\times10^{{{int(exponent)}}}$"


def distinct(series: pd.Series) -> list[Any]:
    return sorted({v for v in series if is_measured_text(v)}, key=str)


def joined_text(values: Sequence[Any], empty: str = "not recorded") -> str:
    return " / ".join(escape(v) for v in values) if values else empty


def int_text(values: Sequence[Any]) -> str:
    return " / ".join(str(int(v)) for v in values) if values else "---"


def cell_counts(frame: pd.DataFrame) -> tuple[int, int, int]:
    cells = frame.drop_duplicates("path")
    ok = int((cells["status"] == "ok").sum())
    return len(cells), ok, len(cells) - ok
