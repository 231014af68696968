"""What the published comparison found, as numbers and display names: the verdicts counted (`PublishedCounts`) and
the modes the published figures were taken in (`PublishedModes`). The section (report/templates/published.tex.j2)
and the conclusions (conclusions.tex.j2) both say them, through the same macros (published_macros.tex.j2), so the
two never count differently."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.common.names import MODE_ADJECTIVES, framework_name
from fwbench.analysis.published.judgement import (
    DIFFERENT,
    DIRECTION_ONLY,
    FAILED,
    HIGHER,
    INCONCLUSIVE,
    LOWER,
    OPPOSITE,
    REPRODUCED,
    SAME,
    VERDICTS,
    factor,
    margin_of,
    verdict_counts,
)
from fwbench.analysis.published.sources import BASELINE
from fwbench.analysis.published.table import across_classes, device_classes, flag


@dataclass(frozen=True)
class PublishedCounts:
    """Matched rows by verdict, the different ones by side (ours `higher` or `lower`), the direction-only ones by
    direction (`same`, `opposite`; never agreement), the equivalence margin as the factor either way (`margin`, "1.1"),
    how many rows compare across device classes (`across`) and which (`classes`: (published, ours) pairs such as
    ("GPU", "CPU")), and any verdict outside the fixed vocabulary with its count (`unknown`)."""

    total: int
    reproduced: int
    different: int
    higher: int
    lower: int
    inconclusive: int
    direction_only: int
    same: int
    opposite: int
    failed: int
    margin: str
    across: int
    classes: tuple[tuple[str, str], ...]
    unknown: tuple[tuple[str, int], ...] = ()


def _of(rows: pd.DataFrame, column: str, value: str) -> int:
    return int((rows[column].astype(str) == value).sum()) if column in rows else 0


def published_counts(rows: pd.DataFrame) -> PublishedCounts:
    """The rows of published.csv counted (matching.compare's, or the file read back)."""
    counts = verdict_counts(rows) if len(rows) else dict.fromkeys(VERDICTS, 0)
    verdict = rows["verdict"].astype(str) if len(rows) else pd.Series(dtype=str)
    different, direction = rows[verdict == DIFFERENT], rows[verdict == DIRECTION_ONLY]
    return PublishedCounts(
        total=len(rows),
        reproduced=counts[REPRODUCED],
        different=counts[DIFFERENT],
        higher=_of(different, "ours_vs_published", HIGHER),
        lower=_of(different, "ours_vs_published", LOWER),
        inconclusive=counts[INCONCLUSIVE],
        direction_only=counts[DIRECTION_ONLY],
        same=_of(direction, "direction", SAME),
        opposite=_of(direction, "direction", OPPOSITE),
        failed=counts[FAILED],
        margin=factor(margin_of(rows)) if len(rows) else "",
        across=across_classes(rows),
        classes=device_classes(rows),
        unknown=tuple((v, n) for v, n in counts.items() if v not in VERDICTS and n),
    )


@dataclass(frozen=True)
class PublishedModes:
    """The modes the matched published figures were taken in, as people write them (`variants`: "eager PyTorch",
    "jitted JAX"), whether the sources state them (`stated`: "all", "some" or "none"; where none does, each
    framework's primary mode is taken, torch.compile being opt-in), and how many rows set them beside cells of
    another mode here for want of one in the published mode (`other`; the tables mark them table.OTHER_MODE_MARK,
    which the templates print beside the count)."""

    variants: tuple[str, ...]
    stated: str
    other: int


def published_modes(rows: pd.DataFrame) -> PublishedModes | None:
    """The modes of the matched rows (None without a row, or for a table from before modes)."""
    if rows.empty or "published_torch_mode" not in rows:
        return None
    modes = [(BASELINE, m) for m in sorted(set(rows["published_torch_mode"].astype(str)))]
    for framework, mine in rows.groupby("framework", sort=True):
        modes += [(str(framework), m) for m in sorted(set(mine["published_other_mode"].astype(str)))]
    stated = flag(rows, "modes_stated", False)
    return PublishedModes(
        variants=tuple(f"{MODE_ADJECTIVES.get(m, m)} {framework_name(f)}" for f, m in modes),
        stated="all" if stated.all() else ("some" if stated.any() else "none"),
        other=int((~flag(rows, "modes_match", True)).sum()),
    )
