"""A fairness ledger row and the words every row names cells with: the three statuses, the columns, how a cell, a
variant and a list of cells are named, and which cells a check reads. Shared by the modules of checks
(`input_checks`, `mode_checks`, `placement_checks`, `outcome_checks`) so that every row of the ledger reads alike.

Cells are (framework, execution mode) variants (fwbench.study.modes): PyTorch eager and PyTorch compiled are two cells
of one comparison, named apart in every row.
"""

from __future__ import annotations

from typing import Any

from fwbench.analysis.common.partners import cell_mode

HELD = "held"
NOT_HELD = "did not hold"
NOT_MEASURED = "not measured"
COLUMNS = ["control", "status", "measured", "where"]
WHERE_LIMIT = 4  # cells named in a row before "and N more"


def cell_name(result: dict[str, Any]) -> str:
    """A cell as the ledger names it, its mode included (two modes of one framework are two cells)."""
    c = result["cell"]
    return f"{c['suite']} {c['framework']} {cell_mode(c)} {c['model']} {c['precision']} bs{c['batch_size']}"


def variant_of(result: dict[str, Any]) -> tuple[str, str]:
    return result["cell"]["framework"], cell_mode(result["cell"])


def named(names: list[str]) -> str:
    names = sorted(names)
    shown = ", ".join(names[:WHERE_LIMIT])
    return shown + (f" and {len(names) - WHERE_LIMIT} more" if len(names) > WHERE_LIMIT else "")


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def row(control: str, status: str, measured: str, where: str = "") -> dict[str, str]:
    return {"control": control, "status": status, "measured": measured, "where": where}


def succeeded(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r.get("status") == "ok"]


def in_suite(results: list[dict[str, Any]], suite: str) -> list[dict[str, Any]]:
    return [r for r in results if r["cell"]["suite"] == suite]


def group_key(result: dict[str, Any]) -> tuple:
    c = result["cell"]
    return (c["suite"], c["model"], c["precision"], c["batch_size"])


def settings_of(result: dict[str, Any]) -> dict[str, Any]:
    return result["provenance"]["framework"].get("settings", {})
