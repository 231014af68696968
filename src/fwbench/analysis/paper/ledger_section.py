"""The fairness ledger's section (results/tables/ledger_section.tex, an appendix), in the words of
report/templates/ledger.tex.j2, which an author rewords without touching Python: the ledger counted
(fwbench.analysis.fairness.ledger.ledger_counts), then its table.

It sits on the paper's floor because rendering a template is the paper's job (fwbench.analysis.paper.templates): the
fairness package hands counts and control names up, never sentences."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.fairness.ledger import ledger_counts, ledger_table
from fwbench.analysis.paper.templates import render


def ledger_section(rows: pd.DataFrame) -> str:
    """The section for the ledger's `rows` (fwbench.analysis.fairness.ledger.ledger): its prose, then its table."""
    return render("ledger.tex.j2", {"ledger": ledger_counts(rows)}) + "\n\n" + ledger_table(rows)
