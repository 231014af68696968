"""Published vs reproduced: each published figure beside the matching cell of this study.

A published row matches a cell when suite, model, batch size and precision agree (reference/sources.yaml says what
each source ran); a row without a match is not shown. Another framework's ratio to PyTorch is compared, never the
absolute numbers across devices: a CPU study at 32 px and an H100 paper at 224 px measure different things in
img/s, but both can say which framework was faster and by how much. Absolute numbers are shown labelled as not
comparable unless device and resolution are the same, and a verdict on a ratio published on another class of device
(a GPU there, a CPU here) says so.

Verdicts (`judge`; the `verdict` column's vocabulary, VERDICTS). Only a ratio with a paired t interval over
interleaved rounds (its log-scale standard error and degrees of freedom, speedups.csv's se_log and df) is tested:

- **reproduced**: two one-sided tests at 5% (fwbench.analysis.common.verdicts.tost) show this study's ratio within the
  equivalence margin m of the published one (its 90% interval inside published x [1/(1+m), 1+m]; m is the config's
  `analysis.equivalence_margin`, recorded per row). The only verdict that counts as agreement.
- **different**: this study's 95% interval excludes the published ratio (and equivalence is not shown); which side
  (ours higher or lower) is recorded.
- **inconclusive**: the 95% interval contains the published ratio but is too wide to show equivalence. Failing to
  find a difference is never evidence of sameness.
- **direction only**: no usable interval (a training run, one run each; a within-process interval from one trial;
  trials not interleaved; the cells' throughputs divided): only whether the ratio lies on the same side of 1 as the
  published one, said separately, and never counted as agreement.
- **failed**: a cell failed here, or the ratio was refused (cells on different device models).

The `direction` column says on which side of 1 this study's ratio lies against the published one: from the 95%
interval where there is one (`not resolved` where it contains 1), from the point estimate otherwise.

Execution modes (fwbench.study.modes): a source may state the mode each framework ran in (`modes` in sources.yaml);
where it does not, each framework's figures are taken as its primary mode (PyTorch eager: torch.compile is opt-in; JAX
jit), and said so. A published ratio is matched with this study's cells in those modes (eager PyTorch cells for an eager
published baseline, where the study has them), and each row records which modes were matched on both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from fwbench.analysis.common import verdicts
from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.common.latex import escape, join_words, label, literal, mode_label, number, short_label
from fwbench.analysis.common.partners import check_placement, ratio_variant, with_modes
from fwbench.analysis.inference.aggregate import PAIRED, UNPAIRED, refused
from fwbench.analysis.inference.aggregate import WITHIN as WITHIN_PROCESS
from fwbench.analysis.inference.aggregate import speedups as speedups_of
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
# Verdicts (the `verdict` column's fixed vocabulary), in the order the text counts them; only REPRODUCED is agreement.
REPRODUCED = "reproduced"
DIFFERENT = "different"
INCONCLUSIVE = "inconclusive"
DIRECTION_ONLY = "direction only"
FAILED = "failed"
VERDICTS = (REPRODUCED, DIFFERENT, INCONCLUSIVE, DIRECTION_ONLY, FAILED)
AGREES = (REPRODUCED,)
# Verdicts drawn from an interval (the paper's table prints it beside them).
TESTED = (REPRODUCED, DIFFERENT, INCONCLUSIVE)
# The `direction` column: this study's ratio on the same side of 1 as the published one, the other side, or (with an
# interval) an interval that contains 1.
SAME, OPPOSITE, UNRESOLVED = "same", "opposite", "not resolved"
# The `ours_vs_published` column of a DIFFERENT row.
HIGHER, LOWER = "higher", "lower"
# analysis.equivalence_margin's default (workflow/schemas/config.schema.yaml).
DEFAULT_MARGIN = 0.1
ALPHA = verdicts.ALPHA
ONE_RUN = "one run"  # the ci_scope of a training ratio: one run per framework
COLUMNS = [
    "source",
    "suite",
    "model",
    "batch_size",
    "precision",
    "framework",
    "unit",
    "published_torch",
    "published_other",
    "published_ratio",
    "ours_torch",
    "ours_other",
    "published_torch_mode",
    "published_other_mode",
    "modes_stated",
    "ours_torch_mode",
    "ours_other_mode",
    "modes_match",
    "ratio",
    "ci_low",
    "ci_high",
    "ci_scope",
    "se_log",
    "df",
    "margin",
    "margin_low",
    "margin_high",
    "ci90_low",
    "ci90_high",
    "tost_p",
    "verdict",
    "direction",
    "ours_vs_published",
    "verdict_text",
    "agrees",
    "published_device_kind",
    "ours_device_kind",
    "absolute_comparable",
    "absolute_note",
    "reason",
]


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


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def factor(margin: float) -> str:
    """The margin as the factor either way that the text names: 0.1 -> "1.1"."""
    return f"{1.0 + float(margin):.4g}"


@dataclass(frozen=True)
class Judgement:
    """How this study's ratio stands to a published one (`judge`): the verdict (VERDICTS), the direction (SAME,
    OPPOSITE, UNRESOLVED; None without a ratio), which side a DIFFERENT ratio lies on (HIGHER, LOWER), the
    equivalence test's p and the 90% interval it used (NaN without an interval), and the human text."""

    verdict: str
    direction: str | None = None
    ours_vs_published: str | None = None
    tost_p: float = math.nan
    ci90_low: float = math.nan
    ci90_high: float = math.nan
    text: str = "failed here"

    def columns(self) -> dict:
        return {
            "verdict": self.verdict,
            "direction": self.direction,
            "ours_vs_published": self.ours_vs_published,
            "tost_p": self.tost_p,
            "ci90_low": self.ci90_low,
            "ci90_high": self.ci90_high,
            "verdict_text": self.text,
            "agrees": self.verdict in AGREES,
        }


def _no_interval_why(scope: str | None) -> str:
    """Why a ratio has no interval to test (a direction-only verdict's parenthesis)."""
    return {
        ONE_RUN: "one run each",
        WITHIN_PROCESS: "one trial each: a within-process interval only",
        UNPAIRED: "trials not interleaved",
        UNPAIRED_SCOPE: "the cells' throughputs divided",
        PAIRED: "no standard error recorded",
    }.get(scope, "no paired interval")


def _direction_text(direction: str) -> str:
    return {SAME: "same direction", OPPOSITE: "opposite direction", UNRESOLVED: "direction not resolved here"}[
        direction
    ]


def judge(
    published: float,
    ratio: float | None,
    *,
    scope: str | None,
    ci_low: float | None = None,
    ci_high: float | None = None,
    se_log: float | None = None,
    df: float | None = None,
    margin: float = DEFAULT_MARGIN,
    alpha: float = ALPHA,
) -> Judgement:
    """This study's ratio against a published one (the module's docstring defines the verdicts). Only a paired
    interval over interleaved rounds with its log-scale standard error and degrees of freedom is tested: two
    one-sided tests at `alpha` that the log ratio lies within log(1 + margin) of the published one's (reproduced),
    else the (1 - alpha) interval excludes the published ratio (different: ours higher or lower) or contains it
    (inconclusive). Any other ratio is judged by its direction alone and never agrees."""
    if not _finite(ratio) or ratio <= 0:
        return Judgement(FAILED)
    if not _finite(published) or published <= 0:
        return Judgement(FAILED, text="no positive published ratio")
    published_faster = published > 1
    if scope != PAIRED or not (_finite(se_log) and _finite(df) and float(df) > 0 and float(se_log) >= 0):
        direction = SAME if (ratio > 1) == published_faster else OPPOSITE
        why = _no_interval_why(scope)
        return Judgement(DIRECTION_ONLY, direction, text=f"direction only, no interval ({why}): {direction} direction")
    log_ratio, se, dof = math.log(ratio), float(se_log), float(df)
    if _finite(ci_low) and _finite(ci_high):
        low, high = float(ci_low), float(ci_high)
    else:
        low, high = verdicts.interval(log_ratio, se, dof, 1 - alpha)
    test = verdicts.tost(log_ratio, se, dof, math.log(published), math.log1p(margin), alpha)
    ci90 = verdicts.interval(log_ratio, se, dof, 1 - 2 * alpha)
    direction = UNRESOLVED if low <= 1 <= high else SAME if (low > 1) == published_faster else OPPOSITE
    common = {"direction": direction, "tost_p": test.p, "ci90_low": ci90[0], "ci90_high": ci90[1]}
    p = f"TOST p = {test.p:.2g}"
    if test.equivalent:
        return Judgement(REPRODUCED, **common, text=f"reproduced within a factor of {factor(margin)} ({p})")
    if low <= published <= high:
        text = (
            f"inconclusive: the 95% CI contains the published ratio but is too wide to show it within a factor of "
            f"{factor(margin)} ({p})"
        )
        return Judgement(INCONCLUSIVE, **common, text=text)
    side = HIGHER if low > published else LOWER
    text = f"different: ours {side} than published (the 95% CI excludes it); {_direction_text(direction)}"
    return Judgement(DIFFERENT, **common, ours_vs_published=side, text=text)


def across_classes(published_kind: str, ours_kind: str) -> str:
    """The verdict text's note on a ratio compared across device classes ("" within one class)."""
    if str(published_kind).lower() == str(ours_kind).lower():
        return ""
    return f"across device classes ({str(published_kind).upper()} there, {str(ours_kind).upper()} here)"


def _study_device(frame: pd.DataFrame) -> tuple[str, str]:
    """(kind, name) of the device this study's cells ran on: ('gpu', the GPU's name) or ('cpu', the CPU model)."""
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    platforms = set(ok.get("platform", pd.Series(dtype=str)).dropna().astype(str))
    if platforms and platforms <= {"cpu"}:
        names = ok.get("cpu_model", pd.Series(dtype=str)).dropna().astype(str)
        return "cpu", names.iloc[0] if len(names) else "CPU"
    names = ok.get("device", pd.Series(dtype=str)).dropna().astype(str)
    return "gpu", names.iloc[0] if len(names) else "GPU"


def absolute_comparability(source: Source, frame: pd.DataFrame, image_size: int) -> tuple[bool, str]:
    """Whether this study's absolute numbers can stand beside the source's: the same device and resolution."""
    kind, name = _study_device(frame)
    differences = []
    if kind != source.device_kind or source.device.lower() not in name.lower():
        differences.append(f"{source.device} there, {name} ({kind.upper()}) here")
    if int(image_size) != int(source.image_size):
        differences.append(f"{source.image_size} px there, {image_size} px here")
    if differences:
        return False, "not comparable: " + "; ".join(differences)
    return True, f"comparable: {source.device} at {image_size} px in both"


def _our_mode(cells: pd.DataFrame, framework: str, wanted: str) -> str | None:
    """The mode of this study's cells of `framework` (at one model, batch and precision) to set beside a published
    figure in mode `wanted`: that mode where there is a cell in it, else the first mode with a successful cell
    (`partners.ratio_variant`'s order), else any; None without a cell."""
    mine = cells[cells["framework"] == framework]
    modes = list(dict.fromkeys(mine["mode"]))
    if wanted in modes:
        return wanted
    succeeded = list(dict.fromkeys(mine.loc[mine["status"] == "ok", "mode"]))
    return ratio_variant(framework, succeeded or modes, {"ratio_modes": {framework: wanted}})[0]


def _our_cells(table: pd.DataFrame, row, source: Source) -> dict[str, pd.DataFrame] | None:
    """This study's cells (rows of `table`) matching a published row: {PyTorch: ..., the row's framework: ...} at
    the row's model and batch size and the source's precision, each in the mode the source ran (stated, or its
    framework's primary one) where the study has it, or None when either framework has no cell (not shown)."""
    cells = with_modes(
        table[
            (table["model"] == row.model)
            & (table["batch_size"] == row.batch_size)
            & (table["precision"] == source.precision)
        ]
    )
    ours = {}
    for framework in (BASELINE, row.framework):
        mode = _our_mode(cells, framework, source.mode_of(framework)[0])
        ours[framework] = cells[(cells["framework"] == framework) & (cells["mode"] == mode)]
    return None if any(c.empty for c in ours.values()) else ours


def _modes_part(source: Source, framework: str, ours: dict[str, pd.DataFrame]) -> dict:
    """Which modes a matched row pairs: the source's for PyTorch and the other framework (and whether it states
    them), ours, and whether ours are the source's on both sides."""
    published = {f: source.mode_of(f) for f in (BASELINE, framework)}
    mine = {f: ours[f].iloc[0]["mode"] for f in (BASELINE, framework)}
    return {
        "published_torch_mode": published[BASELINE][0],
        "published_other_mode": published[framework][0],
        "modes_stated": published[BASELINE][1] and published[framework][1],
        "ours_torch_mode": mine[BASELINE],
        "ours_other_mode": mine[framework],
        "modes_match": all(mine[f] == published[f][0] for f in mine),
    }


def _failure_reason(ours: dict[str, pd.DataFrame]) -> str:
    """Why a matched pair has no ratio of ours: each failed cell's framework and reason ("" when none failed)."""
    failed = [c.iloc[0] for c in ours.values() if c.iloc[0]["status"] != "ok"]
    return "; ".join(f"{label(c['framework'])}: {c.get('reason') or c['status']}" for c in failed)


def _speedup_pair(speedups: pd.DataFrame, row, source: Source, modes: dict) -> pd.DataFrame:
    """This study's ratio rows (speedups.csv) of the matched cells: same comparison and framework, and, where the
    table records modes, the matched cells' modes on both sides (a table from before modes has one per pair)."""
    if speedups.empty or "numerator" not in speedups:
        return speedups.iloc[0:0]
    pair = speedups[
        (speedups["model"] == row.model)
        & (speedups["batch_size"] == row.batch_size)
        & (speedups["precision"] == source.precision)
        & (speedups["numerator"] == row.framework)
    ]
    if {"numerator_mode", "denominator_mode"} <= set(pair.columns):
        other, torch = pair["numerator_mode"], pair["denominator_mode"]
        pair = pair[(other == modes["ours_other_mode"]) & (torch == modes["ours_torch_mode"])]
    return pair


# A matched pair of cells whose modes the speedups table does not pair (it pairs the ratio modes: compiled PyTorch
# where there is one, while the published baseline ran eagerly): its ratio is that of the two cells' throughputs,
# without a paired interval, and judged by its direction alone.
UNPAIRED_SCOPE = "cells' throughputs (the ratio table pairs other modes)"


class _PairedFromCells:
    """Ratios in the published modes from the cells themselves, where the study's ratio table pairs other modes
    (compiled PyTorch, while the published baseline ran eagerly): the cells of one comparison ran interleaved in one
    group whatever their modes, so `speedups` gives the same paired interval for any pairing. The cells are read,
    and one ratio table per pairing of modes computed, on first use only."""

    def __init__(self, cell_paths: list | None):
        self.cell_paths, self.results, self.tables = cell_paths, None, {}

    def pair(self, row, source: Source, modes: dict) -> pd.DataFrame:
        if not self.cell_paths:
            return pd.DataFrame()
        if self.results is None:
            self.results = load_cells(self.cell_paths)
        wanted = {BASELINE: modes["ours_torch_mode"], row.framework: modes["ours_other_mode"]}
        key = tuple(sorted(wanted.items()))
        if key not in self.tables:
            self.tables[key] = speedups_of(self.results, numerator=row.framework, ratio_modes=wanted)
        return _speedup_pair(self.tables[key], row, source, modes)


def _inference_matches(
    source: Source, ratios: pd.DataFrame, frame: pd.DataFrame, speedups: pd.DataFrame, cells: _PairedFromCells
):
    for row in ratios.itertuples():
        ours = _our_cells(frame, row, source)
        if ours is None:
            continue  # no cell of this study matches: not shown
        modes = _modes_part(source, row.framework, ours)
        pair = _speedup_pair(speedups, row, source, modes)
        if pair.empty:
            pair = cells.pair(row, source, modes)
        result = {"model": row.model, "batch_size": row.batch_size, "precision": source.precision}
        result |= {"framework": row.framework, **_published_part(row), **modes}
        result["ours_torch"] = _value(ours[BASELINE], "throughput_img_s")
        result["ours_other"] = _value(ours[row.framework], "throughput_img_s")
        reason = _failure_reason(ours)
        # a ratio refused for its cells' different device models has none to set beside the published one
        if not reason and refused(pair).any():
            reason = f"ratio refused, {pair.iloc[0]['refused']}"
        if not reason and pair.empty:
            yield result | _unpaired(row, ours, result)
            continue
        if reason:
            yield result | {"reason": reason}
            continue
        p = pair.iloc[0]
        yield result | {
            "ratio": float(p["ratio"]),
            "ci_low": float(p["ci_low"]),
            "ci_high": float(p["ci_high"]),
            "ci_scope": p["ci_scope"],
            # a table from before the log-scale standard error has none: its ratio is judged by direction alone
            "se_log": float(p["se_log"]) if _finite(p.get("se_log")) else math.nan,
            "df": float(p["df"]) if _finite(p.get("df")) else math.nan,
        }


def _unpaired(row, ours: dict[str, pd.DataFrame], result: dict) -> dict:
    """The ratio of two matched cells the speedups table has no row for: their throughputs divided, unless a cell
    ran on another device model than its partner (refused, as `speedups` refuses it)."""
    placement = check_placement([ours[BASELINE].iloc[0], ours[row.framework].iloc[0]])
    if placement.models_differ:
        return {"reason": f"ratio refused, {placement.models_detail}"}
    if result["ours_torch"] is None or result["ours_other"] is None:
        return {"reason": "no ratio for this pair"}
    return {"ratio": result["ours_other"] / result["ours_torch"], "ci_scope": UNPAIRED_SCOPE}


def _published_part(row) -> dict:
    return {
        "published_torch": row.published_torch,
        "published_other": row.published_other,
        "published_ratio": row.published_ratio,
    }


def _value(cells: pd.DataFrame, column: str) -> float | None:
    value = cells.iloc[0].get(column) if len(cells) else None
    return float(value) if value is not None and pd.notna(value) else None


# Where a training cell ran (fwbench.analysis.common.partners.check_placement reads them), kept per cell where the
# epochs' table has them (tables written before it did have none).
PLACEMENT_COLUMNS = ["device", "platform", "cpu_model", "node"]


def training_times(epochs: pd.DataFrame) -> pd.DataFrame:
    """Per training cell (framework and mode): its status, its training time (the epochs' times summed; compilation
    is apart) and where it ran."""
    keys = ["framework", "mode", "model", "precision", "batch_size"]
    placement = [c for c in PLACEMENT_COLUMNS if c in epochs]
    rows = []
    for key, cell in with_modes(epochs).groupby(keys, sort=False):
        ok = (cell["status"] == "ok").all()
        rows.append(
            dict(zip(keys, key, strict=True))
            | {
                "status": "ok" if ok else cell["status"].iloc[0],
                "reason": None if ok else cell["reason"].iloc[0],
                "time_s": float(cell["time_s"].sum()) if ok else None,
            }
            | {column: cell[column].iloc[0] for column in placement}
        )
    return pd.DataFrame(rows, columns=[*keys, "status", "reason", "time_s", *placement])


def _training_matches(source: Source, ratios: pd.DataFrame, epochs: pd.DataFrame):
    times = training_times(epochs)
    for row in ratios.itertuples():
        ours = _our_cells(times, row, source)
        if ours is None:
            continue
        result = {
            "model": row.model,
            "batch_size": row.batch_size,
            "precision": source.precision,
            "framework": row.framework,
            **_published_part(row),
            **_modes_part(source, row.framework, ours),
            "ours_torch": _value(ours[BASELINE], "time_s"),
            "ours_other": _value(ours[row.framework], "time_s"),
        }
        reason = _failure_reason(ours)
        placement = check_placement([ours[BASELINE].iloc[0], ours[row.framework].iloc[0]])
        if not reason and placement.models_differ:  # as the conclusions' training sentence refuses it
            reason = f"ratio refused, {placement.models_detail}"
        if reason or result["ours_torch"] is None or result["ours_other"] is None:
            yield result | {"reason": reason or "no training time for this pair"}
            continue
        # times: PyTorch's over the other's = speed ratio; one run each, so no interval
        yield result | {"ratio": result["ours_torch"] / result["ours_other"], "ci_scope": ONE_RUN}


def _judged(match: dict, published_kind: str, ours_kind: str, margin: float) -> dict:
    """A match's verdict columns (`judge`; FAILED where the match carries a reason), its margin and the bounds it
    sets around the published ratio, and the note on device classes in the verdict text."""
    published = float(match["published_ratio"])
    bounds = {"margin": margin, "margin_low": published / (1.0 + margin), "margin_high": published * (1.0 + margin)}
    if match.get("reason"):
        judgement = Judgement(FAILED)
    else:
        judgement = judge(
            published,
            match.get("ratio"),
            scope=match.get("ci_scope"),
            ci_low=match.get("ci_low"),
            ci_high=match.get("ci_high"),
            se_log=match.get("se_log"),
            df=match.get("df"),
            margin=margin,
        )
    columns = judgement.columns()
    note = across_classes(published_kind, ours_kind)
    if note and judgement.verdict != FAILED:
        columns["verdict_text"] += f"; {note}"
    return bounds | columns | {"published_device_kind": published_kind, "ours_device_kind": ours_kind}


def compare(
    sources: list[Source],
    *,
    inference: pd.DataFrame,
    speedups: pd.DataFrame,
    training: pd.DataFrame | None,
    image_size: int,
    cell_paths: list | None = None,
    margin: float = DEFAULT_MARGIN,
) -> pd.DataFrame:
    """Every published ratio that has a matching pair of cells here, beside this study's, with its verdict (`judge`,
    at the equivalence `margin`: the config's analysis.equivalence_margin) (COLUMNS). `cell_paths`: the inference
    cells, for a paired interval where the published modes are not the ones the ratio table pairs; without them
    such a ratio is the cells' throughputs divided, judged by its direction alone."""
    if not 0 < margin <= 1:
        raise ValueError(f"equivalence margin {margin!r}: expected a number in (0, 1]")
    rows = []
    paired = _PairedFromCells(cell_paths)
    ours_kind = _study_device(inference)[0]
    for source in sources:
        ratios = published_ratios(source, read_published(source))
        if source.suite == "inference":
            matches = list(_inference_matches(source, ratios, inference, speedups, paired))
        elif training is not None and not training.empty:
            matches = list(_training_matches(source, ratios, training))
        else:
            matches = []
        comparable, note = absolute_comparability(source, inference, image_size)
        for match in matches:
            rows.append(
                {"source": source.key, "suite": source.suite, "unit": source.unit}
                | match
                | _judged(match, source.device_kind, ours_kind, margin)
                | {"absolute_comparable": comparable, "absolute_note": note}
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _ours(value: float | None, digits: int = 3) -> str:
    return number(value, digits) if value is not None and pd.notna(value) else "---"


def _ratio_with_ci(row) -> str:
    """This study's ratio, with its 95% CI where a verdict was drawn from it (a direction-only ratio's within-process
    or unpaired interval is not printed: it is not the interval the verdicts test)."""
    if pd.isna(row.ratio):
        return "---"
    if row.verdict not in TESTED or pd.isna(row.ci_low):
        return number(row.ratio)
    return f"{number(row.ratio)} [{number(row.ci_low)}, {number(row.ci_high)}]"


OTHER_MODE_MARK = r"$^{\ddagger}$"  # a row whose cells here ran in another mode than the source's


def _flag(rows: pd.DataFrame, column: str, default: bool) -> pd.Series:
    """A boolean column of a published.csv read back ("True"/"False" or bools), `default` where it is absent."""
    if column not in rows:
        return pd.Series(default, index=rows.index)
    return rows[column].astype(str) == "True"


def modes_caption(rows: pd.DataFrame, source: Source) -> str:
    """The caption's sentence on modes: the mode of each framework's published figures (stated, or taken as its
    primary mode), that this study's cells are in the same modes, and the mark on rows whose cells here are not."""
    frameworks = [BASELINE, *sorted(set(rows["framework"]))]
    stated = [source.mode_of(f)[1] for f in frameworks]
    if all(stated):
        how = "as the source states them"
    elif any(stated):
        how = "each framework's primary one where the source states none"
    else:
        how = "not stated by the source, so each framework's primary one"
    modes = "; ".join(f"{short_label(f)} {mode_label(source.mode_of(f)[0])}" for f in frameworks)
    text = f" Modes of the published figures ({how}): {escape(modes)}; this study's cells are in the same modes"
    other = rows[~_flag(rows, "modes_match", True)]
    if len(other):
        ran = {
            f"{short_label(BASELINE)} {mode_label(r.ours_torch_mode)}, {short_label(r.framework)} "
            f"{mode_label(r.ours_other_mode)}"
            for r in other.itertuples()
        }
        text += (
            f" except where marked {OTHER_MODE_MARK}: no cell here in the published mode, so the cells here ran "
            f"{escape('; '.join(sorted(ran)))}"
        )
    return text + "."


def table_verdict(row) -> str:
    """A row's verdict as the paper's table prints it (short; the CSV's verdict_text has it in full)."""
    if row.verdict in (REPRODUCED, INCONCLUSIVE):
        return f"{row.verdict} (TOST p = {row.tost_p:.2g})"
    if row.verdict == DIFFERENT:
        return f"different: ours {row.ours_vs_published}"
    if row.verdict == DIRECTION_ONLY:
        return f"direction only, no interval: {row.direction}"
    return "failed here" if row.verdict == FAILED else str(row.verdict)


def margin_of(rows: pd.DataFrame) -> float:
    """The equivalence margin the rows were judged at (DEFAULT_MARGIN for rows that record none)."""
    recorded = pd.to_numeric(rows.get("margin", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(recorded.iloc[0]) if len(recorded) else DEFAULT_MARGIN


def _classes_note(rows: pd.DataFrame) -> str:
    """'GPU there, CPU here' for rows compared across device classes ('' within one class, or before the columns)."""
    if not {"published_device_kind", "ours_device_kind"} <= set(rows):
        return ""
    pairs = sorted(
        {
            (str(a).upper(), str(b).upper())
            for a, b in zip(rows["published_device_kind"], rows["ours_device_kind"], strict=True)
            if str(a).lower() != str(b).lower()
        }
    )
    return "; ".join(f"{a} there, {b} here" for a, b in pairs)


def comparison_table(rows: pd.DataFrame, source: Source) -> str:
    """One source's matched rows as a LaTeX table (a full-width float, footnotesize); the caption names the modes
    matched and the verdicts' rule, and a row whose cells here ran in another mode than the source's is marked."""
    others = sorted(set(rows["framework"]))
    comparable = bool(rows["absolute_comparable"].iloc[0])
    mark = "" if comparable else "$^\\ast$"
    other_mode = ~_flag(rows, "modes_match", True)
    classes = _classes_note(rows)
    rule = (
        f" Verdicts: reproduced when two one-sided tests at 5\\% show this study's ratio within a factor of "
        f"{factor(margin_of(rows))} of the published one; different when its 95\\% CI excludes it; inconclusive when "
        "the CI contains it but is too wide; direction only (never agreement) without a paired CI"
        + (f"; ratios across device classes ({escape(classes)})" if classes else "")
        + "."
    )
    lines = [
        r"\begin{table*}[t]",
        r"\centering",
        f"\\caption{{Published vs reproduced: {escape(source.source)} on the {escape(source.device)} "
        f"({source.image_size}~px, {source.precision}), beside this study's matching cells. Ratios: "
        f"{join_words([short_label(f) for f in others])} speed relative to PyTorch (above 1: faster than PyTorch); "
        f"this study's with its paired 95\\% CI where it has one.{rule}{modes_caption(rows, source)} "
        + (
            f"$^\\ast$: absolute {escape(source.unit)} from different machines, "
            f"{escape(rows['absolute_note'].iloc[0])}; only ratios and directions are compared.}}"
            if not comparable
            else "}"
        ),
        f"\\label{{tab:published-{source.key}}}",
        r"\footnotesize",
        r"\begin{tabular}{llr rr rr r l >{\raggedright\arraybackslash}p{2.6cm}}",  # a verdict may wrap
        r"\toprule",
        f"Model & vs & Batch & \\multicolumn{{2}}{{c}}{{PT {escape(source.unit)}{mark}}} & "
        f"\\multicolumn{{2}}{{c}}{{Other {escape(source.unit)}{mark}}} & \\multicolumn{{2}}{{c}}{{Ratio to PT}} & "
        r"Verdict \\",
        r"\cmidrule(lr){4-5}\cmidrule(lr){6-7}\cmidrule(lr){8-9}",
        r" & & & publ. & here & publ. & here & publ. & here [95\% CI] & \\",
        r"\midrule",
    ]
    for index, row in zip(rows.index, rows.itertuples(), strict=True):
        marked = OTHER_MODE_MARK if other_mode[index] else ""
        lines.append(
            f"{escape(row.model)}{marked} & {short_label(row.framework)} & {row.batch_size} & "
            f"{_ours(row.published_torch)} & {_ours(row.ours_torch)} & "
            f"{_ours(row.published_other)} & {_ours(row.ours_other)} & "
            f"{number(row.published_ratio)} & {_ratio_with_ci(row)} & {escape(table_verdict(row))} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def verdict_counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many matched rows fall under each verdict (VERDICTS, in order; a value outside them under itself). Only
    REPRODUCED counts as agreement: a direction-only row is counted under DIRECTION_ONLY whatever its direction."""
    counts = dict.fromkeys(VERDICTS, 0)
    for value in rows["verdict"].astype(str):
        counts[value] = counts.get(value, 0) + 1
    return counts


def agreeing(rows: pd.DataFrame) -> pd.Series:
    """Which rows agree with their published figure: the reproduced ones, and no other (whatever `agrees` says in a
    table read back)."""
    return rows["verdict"].astype(str) == REPRODUCED


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


def _of(rows: pd.DataFrame, column: str, value: str) -> int:
    return int((rows[column].astype(str) == value).sum()) if column in rows else 0


def summary_sentence(rows: pd.DataFrame) -> str:
    """What the comparison found, counted from the rows: how many published ratios are reproduced (equivalent
    within the margin), different (ours higher or lower), inconclusive, or compared by direction only (same or
    opposite, never counted as agreement), and whether they were compared across device classes."""
    if rows.empty:
        return "No published figure matches a cell of this study (same suite, model, batch size and precision)."
    counts = verdict_counts(rows)
    margin = factor(margin_of(rows))
    reproduced = _count(counts[REPRODUCED], "is", "are") if counts[REPRODUCED] else "none is"
    parts = [f"{reproduced} reproduced (shown equivalent within a factor of {margin} by two one-sided tests at 5\\%)"]
    if counts[DIFFERENT]:
        different = rows[rows["verdict"].astype(str) == DIFFERENT]
        sides = [f"{side} in {n}" for side in (HIGHER, LOWER) if (n := _of(different, "ours_vs_published", side))]
        parts.append(
            _count(counts[DIFFERENT], "is", "are")
            + f" different (outside this study's 95\\% CI: ours {', '.join(sides) or 'not on one side'})"
        )
    if counts[INCONCLUSIVE]:
        parts.append(
            _count(counts[INCONCLUSIVE], "is", "are")
            + " inconclusive (inside this study's 95\\% CI, which is too wide to show equivalence)"
        )
    if counts[DIRECTION_ONLY]:
        direction = rows[rows["verdict"].astype(str) == DIRECTION_ONLY]
        ways = [f"{n} in the {way} direction" for way in (SAME, OPPOSITE) if (n := _of(direction, "direction", way))]
        parts.append(
            _count(counts[DIRECTION_ONLY], "has", "have")
            + f" no paired interval here and {'is' if counts[DIRECTION_ONLY] == 1 else 'are'} compared by direction "
            f"only ({', '.join(ways)}), which never counts as agreement"
        )
    if counts[FAILED]:
        parts.append(_count(counts[FAILED], "has", "have") + " a failed cell here")
    others = {v: n for v, n in counts.items() if v not in VERDICTS and n}
    parts += [f"{n} {escape(v)}" for v, n in others.items()]
    total = len(rows)
    text = (
        f"Of the {_count(total, 'published ratio', 'published ratios')} that match a pair of cells of this study, "
        + join_words(parts)
        + "."
    )
    classes = _classes_note(rows)
    if classes:
        across = int(
            (
                rows["published_device_kind"].astype(str).str.lower()
                != rows["ours_device_kind"].astype(str).str.lower()
            ).sum()
        )
        who = "All of them compare" if across == total else f"{across} of them compare"
        text += f" {who} ratios across device classes ({escape(classes)})."
    return text


def modes_sentence(rows: pd.DataFrame) -> str:
    """Which modes the matched published ratios were compared in, read from the rows: each framework's published
    mode (and whether the sources state it or it is taken as the framework's primary one: torch.compile is opt-in),
    that this study's cells are in the same modes, and how many rows set them beside cells in another mode for want
    of one in the published mode. Empty without a row, or for a table from before modes."""
    if rows.empty or "published_torch_mode" not in rows:
        return ""
    modes = {BASELINE: set(rows["published_torch_mode"].astype(str))}
    for framework, mine in rows.groupby("framework"):
        modes[framework] = set(mine["published_other_mode"].astype(str))
    named = join_words([f"{label(f)} {' / '.join(mode_label(m) for m in sorted(modes[f]))}" for f in modes])
    stated = _flag(rows, "modes_stated", False)
    if stated.all():
        how = "as the sources state"
    elif stated.any():
        how = "as stated where a source states a mode, otherwise each framework's primary one"
    else:
        how = "no source states a mode, so each framework's primary one: torch.compile is opt-in"
    other = int((~_flag(rows, "modes_match", True)).sum())
    text = f"The published figures are taken as {named} ({how}), and compared with this study's cells in those modes"
    if other:
        text += (
            f" except in {_count(other, 'row', 'rows')} (marked {OTHER_MODE_MARK} in the tables), where this study has "
            "no cell in the published mode"
        )
    return text + "."


def _describe(source: Source, matched: pd.DataFrame) -> str:
    """One sentence on a source: what it ran where, how it was measured, and what of it matches here."""
    found = (
        f"{_count(len(matched), 'published ratio matches', 'published ratios match')} a pair of cells here "
        f"(Table~\\ref{{tab:published-{source.key}}})"
        if len(matched)
        else "no cell of this study has its suite, model, batch size and precision, so none of it is shown"
    )
    what = escape(source.source)
    return (
        f"{what[:1].upper()}{what[1:]} ran the {source.suite} suite on the {escape(source.device)} at "
        f"{source.image_size}~px in {source.precision} ({literal(source.notes.rstrip('.'))}); {found}."
    )


def rule_sentence(margin: float) -> str:
    """The verdicts' rule and the margin, in one sentence."""
    f = factor(margin)
    return (
        f"A published ratio counts as reproduced only when two one-sided tests at the 5\\% level show this study's "
        f"ratio within a factor of {f} of it either way (its paired 90\\% CI inside the published ratio times "
        f"[1/{f}, {f}]; equivalence margin {margin:g}, \\texttt{{analysis.equivalence\\_margin}}), as different "
        "when its paired 95\\% CI excludes the published ratio, as inconclusive when that CI contains it but is too "
        "wide to show equivalence, and by direction only, never as agreement, when this study has no paired CI "
        "(one training run each, one trial each, or trials not interleaved)."
    )


def section(rows: pd.DataFrame, sources: list[Source], figure: str | None, margin: float | None = None) -> str:
    """The paper's published-vs-reproduced section: what each source measured, the rule of the verdicts with its
    `margin` (the rows' where not given), the summary, one table per source with matches, and the figure."""
    margin = margin_of(rows) if margin is None else margin
    lines = [r"\section{Published vs reproduced}", r"\label{sec:published}"]
    described = [_describe(source, rows[rows["source"] == source.key]) for source in sources]
    lines.append(
        "Published figures are compared with this study's matching cells: the same suite, model, batch size and "
        "precision, and no row where none matches. The sources, as copied into the repository with how they were "
        "measured (\\texttt{reference/}). " + " ".join(described) + " "
        "A ratio is compared, never an absolute number across machines. " + rule_sentence(margin)
    )
    modes = modes_sentence(rows)
    lines.append(
        summary_sentence(rows)
        + (f" {modes}" if modes else "")
        + (" Figure~\\ref{fig:published} sets them side by side." if figure and not rows.empty else "")
    )
    for source in sources:
        matched = rows[rows["source"] == source.key]
        if not matched.empty:
            lines.append(comparison_table(matched, source))
    if figure and not rows.empty:
        lines.append(
            "\n".join(
                [
                    r"\begin{figure}[t]",
                    r"\centering",
                    f"\\includegraphics[width=\\columnwidth]{{{figure}}}",
                    r"\caption{Published vs reproduced speed ratios to PyTorch per model and batch size (log scale): "
                    r"published (open markers, with the equivalence margin as a grey bar) and this study's with its "
                    r"paired 95\% CI (filled, bars; a cross where it has no paired CI and only the direction is "
                    r"compared). Above 1: faster than PyTorch.}",
                    r"\label{fig:published}",
                    r"\end{figure}",
                ]
            )
        )
    return "\n\n".join(lines) + "\n"
