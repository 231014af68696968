"""The published sources: reference/sources.yaml (what each source ran, where and how it was measured) and each
source's figures, read with the framework names mapped to ours, and the speed ratios to PyTorch they publish.

A misread reference would be printed as published, so a missing key, an unknown suite, framework or mode, or a file
without the named metric is refused with the file's name.

Execution modes (fwbench.study.modes): a source may state the mode each framework ran in (`modes` in sources.yaml);
where it does not, each framework's figures are taken as its primary mode (PyTorch eager: torch.compile is opt-in; JAX
jit), and said so (`Source.mode_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from fwbench.study.modes import MODES, primary

BASELINE = "torch"
# The references' framework names -> ours.
PUBLISHED_FRAMEWORKS = {"pytorch": "torch", "jax": "jax", "tensorflow": "tensorflow"}
SOURCE_KEYS = {
    "file",
    "suite",
    "metric",
    "unit",
    "higher_is_better",
    "precision",
    "image_size",
    "device",
    "device_kind",
    "source",
    "notes",
}
# Keys a source may add: `modes`, {framework (the reference's name or ours): mode} where the source states them.
OPTIONAL_KEYS = {"modes"}
SUITES = ("inference", "training")


@dataclass(frozen=True)
class Source:
    """One published figure set and how it was measured (reference/sources.yaml)."""

    key: str
    path: Path
    suite: str
    metric: str
    unit: str
    higher_is_better: bool
    precision: str
    image_size: int
    device: str
    device_kind: str
    source: str
    notes: str
    modes: dict[str, str] | None = None

    def mode_of(self, framework: str) -> tuple[str, bool]:
        """(mode, stated): the mode the source states for `framework`, or the framework's primary mode, not stated."""
        stated = (self.modes or {}).get(framework)
        return (stated, True) if stated else (primary(framework), False)


def _modes(path: Path, key: str, value) -> dict[str, str] | None:
    """A source's `modes` with its framework names mapped to ours; an unknown framework or mode is refused."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: source {key!r} has modes {value!r}; expected a mapping of framework to mode")
    modes = {PUBLISHED_FRAMEWORKS.get(str(f), str(f)): str(m) for f, m in value.items()}
    unknown = sorted(f"{f}: {m}" for f, m in modes.items() if m not in MODES.get(f, ()))
    if unknown:
        raise ValueError(f"{path}: source {key!r} has unknown mode(s) {', '.join(unknown)}")
    return modes


def read_sources(path: str | Path) -> list[Source]:
    """The sources listed in `path`, each file beside it; a missing key, an unknown suite or a file without the
    named metric is refused with the file's name, since a misread reference would be printed as published."""
    path = Path(path)
    listing = yaml.safe_load(path.read_text()) or {}
    if not isinstance(listing, dict):
        raise ValueError(f"{path}: expected a mapping of source names to their descriptions")
    sources = []
    for key, entry in listing.items():
        missing = sorted(SOURCE_KEYS - set(entry or {}))
        if missing:
            raise ValueError(f"{path}: source {key!r} lacks {', '.join(missing)}")
        if entry["suite"] not in SUITES:
            raise ValueError(f"{path}: source {key!r} has suite {entry['suite']!r}; known: {', '.join(SUITES)}")
        sources.append(
            Source(
                key=str(key),
                path=path.parent / entry["file"],
                **{k: entry[k] for k in sorted(SOURCE_KEYS - {"file"})},
                modes=_modes(path, key, entry.get("modes")),
            )
        )
    return sources


def read_published(source: Source) -> pd.DataFrame:
    """The source's rows: model, batch_size, framework (ours), value (its metric)."""
    table = pd.read_csv(source.path)
    needed = {"model", "framework", "batch_size", source.metric}
    if not needed <= set(table.columns):
        raise ValueError(f"{source.path}: expected the columns {', '.join(sorted(needed))}, found {', '.join(table)}")
    unknown = sorted(set(table["framework"]) - set(PUBLISHED_FRAMEWORKS))
    if unknown:
        raise ValueError(f"{source.path}: unknown framework(s) {', '.join(unknown)}")
    return pd.DataFrame(
        {
            "model": table["model"],
            "batch_size": table["batch_size"].astype(int),
            "framework": table["framework"].map(PUBLISHED_FRAMEWORKS),
            "value": table[source.metric].astype(float),
        }
    )


def published_ratios(source: Source, rows: pd.DataFrame) -> pd.DataFrame:
    """Each other framework's speed ratio to PyTorch per model and batch size (throughputs divided, or times
    divided the other way round, so that above one means faster than PyTorch, as this study's ratios do)."""
    wide = rows.pivot_table(index=["model", "batch_size"], columns="framework", values="value", aggfunc="first")
    if BASELINE not in wide:
        return pd.DataFrame(columns=["model", "batch_size", "framework", "published_torch", "published_other"])
    out = []
    for framework in [f for f in wide.columns if f != BASELINE]:
        both = wide[[BASELINE, framework]].dropna()
        for (model, batch), values in both.iterrows():
            out.append(
                {
                    "model": model,
                    "batch_size": int(batch),
                    "framework": framework,
                    "published_torch": float(values[BASELINE]),
                    "published_other": float(values[framework]),
                }
            )
    frame = pd.DataFrame(out, columns=["model", "batch_size", "framework", "published_torch", "published_other"])
    ratio = frame["published_other"] / frame["published_torch"]
    return frame.assign(published_ratio=ratio if source.higher_is_better else 1.0 / ratio)
