"""The files of the section "Where the time goes" below the paper (`write_profile_tables`): from the inference cells,
the tidy table and the ratio table, the three op-profile tables and the figure, each written atomically, so a killed
job never leaves a half-written table that looks complete. The section's text is rendered a floor up, by
fwbench.analysis.paper.profile_section.write_profile_outputs, the entry point the workflow calls.

The cells are read and checked once (`fwbench.analysis.common.cells.cells_by_path`: a broken file is named), and
every table is built before any file is written: a cell whose shares do not sum to 1 stops the job before it
writes anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common.cells import cells_by_path
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.profile.figure import profile_figure
from fwbench.analysis.profile.tables import (
    failed_profiles,
    op_profile_table,
    op_profile_top_table,
    op_profile_unmapped_table,
)
from fwbench.io import atomic_write_text

# table: op_profile.csv; top: op_profile_top.csv; unmapped: op_profile_unmapped.csv; pdf, png: the figure (the
# section includes it by the pdf's base name).
OUTPUT_KEYS = ("table", "top", "unmapped", "pdf", "png")


@dataclass(frozen=True)
class ProfileTables:
    """What `write_profile_tables` wrote, as frames, with what the section reads beside them: the ratios and the
    cells whose profiling failed."""

    table: pd.DataFrame
    top: pd.DataFrame
    unmapped: pd.DataFrame
    ratios: pd.DataFrame
    failed: list[tuple[dict[str, Any], str]]


def _read_csv(path: str | Path | None) -> pd.DataFrame:
    """A table the workflow wrote, or an empty one where there is none (no path, or an empty file)."""
    if path is None or not Path(path).exists() or Path(path).stat().st_size == 0:
        return pd.DataFrame()
    return read_tidy(path)


def write_profile_tables(
    cell_paths: Iterable[str | Path],
    inference_csv: str | Path | None,
    speedups_csv: str | Path | None,
    outputs: Mapping[str, str | Path],
) -> ProfileTables:
    """The section's files below the paper (OUTPUT_KEYS), each written atomically: the op-profile tables as CSV
    (table, top, unmapped) and the figure (pdf, png). `cell_paths`: the inference cells' result files
    (those without an op profile are read and left out); `inference_csv`: the tidy table (the timed medians);
    `speedups_csv`: the ratios between frameworks. Either CSV may be None (a study without them): no timed median,
    no ratio to attribute."""
    lacking = [key for key in OUTPUT_KEYS if key not in outputs]
    if lacking:
        raise KeyError(f"write_profile_tables needs outputs {', '.join(lacking)}")
    cells = cells_by_path(cell_paths)
    tidy, ratios = _read_csv(inference_csv), _read_csv(speedups_csv)
    table = op_profile_table(cells, tidy)
    top = op_profile_top_table(cells)
    unmapped = op_profile_unmapped_table(cells)
    atomic_write_text(outputs["table"], table.to_csv(index=False))
    atomic_write_text(outputs["top"], top.to_csv(index=False))
    atomic_write_text(outputs["unmapped"], unmapped.to_csv(index=False))
    profile_figure(table, outputs["pdf"], outputs["png"])
    return ProfileTables(table, top, unmapped, ratios, failed_profiles(cells))
