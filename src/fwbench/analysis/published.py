"""Published vs reproduced: each published figure beside the matching cell of this study.

A published row matches a cell when suite, model, batch size and precision agree (reference/sources.yaml says what
each source ran); a row without a match is not shown. Another framework's ratio to PyTorch is compared, never the
absolute numbers across devices: a CPU study at 32 px and an H100 paper at 224 px measure different things in
img/s, but both can say which framework was faster and by how much. So each row carries the published ratio, this
study's ratio with its paired CI, and a verdict: the published ratio lies within this CI, or only the resolved
direction agrees, or it is opposite, or this study did not resolve the ratio. Absolute numbers are shown labelled
as not comparable unless device and resolution are the same.

Execution modes (fwbench.modes): a source may state the mode each framework ran in (`modes` in sources.yaml); where it
does not, each framework's figures are taken as its primary mode (PyTorch eager: torch.compile is opt-in; JAX jit),
and said so. A published ratio is matched with this study's cells in those modes (eager PyTorch cells for an eager
published baseline, where the study has them), and each row records which modes were matched on both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from fwbench.analysis.aggregate import refused
from fwbench.analysis.aggregate import speedups as speedups_of
from fwbench.analysis.cells import load_cells
from fwbench.analysis.latex import escape, join_words, label, literal, mode_label, number, short_label
from fwbench.analysis.partners import check_placement, ratio_variant, with_modes
from fwbench.modes import MODES, primary

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
# Verdicts, in the order the text counts them; the first two count as agreement.
WITHIN = "within CI"
SAME = "same direction"
OPPOSITE = "opposite direction"
UNRESOLVED = "not resolved here"
NO_PAIRED_CI = "no paired CI here"
FAILED = "failed here"
AGREES = (WITHIN, SAME)
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
    "verdict",
    "agrees",
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


def verdict(published: float, ratio: float | None, lo: float | None, hi: float | None, scope: str | None) -> str:
    """How this study's ratio (with its paired CI) stands to the published one: the CI contains it, or the CI
    resolves a difference in the same or the opposite direction, or it resolves nothing and excludes it. A ratio
    without a paired interval (one trial, or trials not interleaved, or a training run) is judged by its direction
    alone and says so."""
    if ratio is None or not math.isfinite(ratio):
        return FAILED
    published_faster = published > 1
    if scope != "paired_rounds" or lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        same = (ratio > 1) == published_faster
        return f"{SAME if same else OPPOSITE} ({NO_PAIRED_CI})"
    if lo <= published <= hi:
        return WITHIN
    if lo > 1 or hi < 1:
        return SAME if (lo > 1) == published_faster else OPPOSITE
    return UNRESOLVED


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
            yield result | {"verdict": FAILED, "reason": reason}
            continue
        p = pair.iloc[0]
        yield result | {
            "ratio": float(p["ratio"]),
            "ci_low": float(p["ci_low"]),
            "ci_high": float(p["ci_high"]),
            "ci_scope": p["ci_scope"],
            "verdict": verdict(row.published_ratio, float(p["ratio"]), p["ci_low"], p["ci_high"], p["ci_scope"]),
        }


def _unpaired(row, ours: dict[str, pd.DataFrame], result: dict) -> dict:
    """The ratio of two matched cells the speedups table has no row for: their throughputs divided, unless a cell
    ran on another device model than its partner (refused, as `speedups` refuses it)."""
    placement = check_placement([ours[BASELINE].iloc[0], ours[row.framework].iloc[0]])
    if placement.models_differ:
        return {"verdict": FAILED, "reason": f"ratio refused, {placement.models_detail}"}
    if result["ours_torch"] is None or result["ours_other"] is None:
        return {"verdict": FAILED, "reason": "no ratio for this pair"}
    ratio = result["ours_other"] / result["ours_torch"]
    judged = verdict(row.published_ratio, ratio, None, None, None)
    return {"ratio": ratio, "ci_scope": UNPAIRED_SCOPE, "verdict": judged}


def _published_part(row) -> dict:
    return {
        "published_torch": row.published_torch,
        "published_other": row.published_other,
        "published_ratio": row.published_ratio,
    }


def _value(cells: pd.DataFrame, column: str) -> float | None:
    value = cells.iloc[0].get(column) if len(cells) else None
    return float(value) if value is not None and pd.notna(value) else None


# Where a training cell ran (fwbench.analysis.partners.check_placement reads them), kept per cell where the epochs'
# table has them (tables written before it did have none).
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
            yield result | {"verdict": FAILED, "reason": reason}
            continue
        ratio = result["ours_torch"] / result["ours_other"]  # times: PyTorch's over the other's = speed ratio
        yield result | {
            "ratio": ratio,
            "ci_scope": "one run",
            "verdict": verdict(row.published_ratio, ratio, None, None, None),
        }


def compare(
    sources: list[Source],
    *,
    inference: pd.DataFrame,
    speedups: pd.DataFrame,
    training: pd.DataFrame | None,
    image_size: int,
    cell_paths: list | None = None,
) -> pd.DataFrame:
    """Every published ratio that has a matching pair of cells here, beside this study's (COLUMNS). `cell_paths`:
    the inference cells, for a paired interval where the published modes are not the ones the ratio table pairs;
    without them such a ratio is the cells' throughputs divided, judged by its direction alone."""
    rows = []
    paired = _PairedFromCells(cell_paths)
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
                {
                    "source": source.key,
                    "suite": source.suite,
                    "unit": source.unit,
                    **match,
                    "agrees": match["verdict"] in AGREES or match["verdict"].startswith(SAME),
                    "absolute_comparable": comparable,
                    "absolute_note": note,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _ours(value: float | None, digits: int = 3) -> str:
    return number(value, digits) if value is not None and pd.notna(value) else "---"


def _ratio_with_ci(row) -> str:
    if pd.isna(row.ratio):
        return "---"
    if pd.isna(row.ci_low):
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


def comparison_table(rows: pd.DataFrame, source: Source) -> str:
    """One source's matched rows as a LaTeX table (a full-width float, footnotesize); the caption names the modes
    matched, and a row whose cells here ran in another mode than the source's is marked."""
    others = sorted(set(rows["framework"]))
    comparable = bool(rows["absolute_comparable"].iloc[0])
    mark = "" if comparable else "$^\\ast$"
    other_mode = ~_flag(rows, "modes_match", True)
    lines = [
        r"\begin{table*}[t]",
        r"\centering",
        f"\\caption{{Published vs reproduced: {escape(source.source)} on the {escape(source.device)} "
        f"({source.image_size}~px, {source.precision}), beside this study's matching cells. Ratios: "
        f"{join_words([short_label(f) for f in others])} speed relative to PyTorch (above 1: faster than PyTorch); "
        f"this study's with its 95\\% CI.{modes_caption(rows, source)} "
        + (
            f"$^\\ast$: absolute {escape(source.unit)} from different machines, "
            f"{escape(rows['absolute_note'].iloc[0])}; only ratios and directions are compared.}}"
            if not comparable
            else "}"
        ),
        f"\\label{{tab:published-{source.key}}}",
        r"\footnotesize",
        r"\begin{tabular}{llr rr rr r l >{\raggedright\arraybackslash}p{2.4cm}}",  # a verdict may wrap
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
            f"{number(row.published_ratio)} & {_ratio_with_ci(row)} & {escape(row.verdict)} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def verdict_counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many matched rows fall under each verdict (the 'no paired CI' ones under their direction)."""
    counts = dict.fromkeys((WITHIN, SAME, OPPOSITE, UNRESOLVED, FAILED), 0)
    for value in rows["verdict"]:
        base = value.split(" (")[0]
        counts[base] = counts.get(base, 0) + 1
    return counts


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


def summary_sentence(rows: pd.DataFrame) -> str:
    """What the comparison found, counted from the rows (fwbPublishedSentence)."""
    if rows.empty:
        return "No published figure matches a cell of this study (same suite, model, batch size and precision)."
    counts = verdict_counts(rows)
    parts = [
        _count(counts[WITHIN], "lies", "lie") + " within this study's 95\\% CI",
        _count(counts[SAME], "differs", "differ")
        + " from it but agree"
        + ("s" if counts[SAME] == 1 else "")
        + " in the resolved direction",
        _count(counts[OPPOSITE], "points", "point") + " the opposite way",
        _count(counts[UNRESOLVED], "lies", "lie") + " outside it where it resolves no difference from 1",
    ]
    if counts[FAILED]:
        parts.append(_count(counts[FAILED], "has", "have") + " a failed cell here")
    total = len(rows)
    return (
        f"Of the {_count(total, 'published ratio', 'published ratios')} that match a pair of cells of this study, "
        + join_words(parts)
        + "."
    )


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


def section(rows: pd.DataFrame, sources: list[Source], figure: str | None) -> str:
    """The paper's published-vs-reproduced section: what each source measured, the summary, one table per source
    with matches, and the figure."""
    lines = [r"\section{Published vs reproduced}", r"\label{sec:published}"]
    described = [_describe(source, rows[rows["source"] == source.key]) for source in sources]
    lines.append(
        "Published figures are compared with this study's matching cells: the same suite, model, batch size and "
        "precision, and no row where none matches. The sources, as copied into the repository with how they were "
        "measured (\\texttt{reference/}). " + " ".join(described) + " "
        "A ratio is compared, never an absolute number across machines; a published ratio counts as reproduced "
        "when it lies within this study's paired 95\\% CI, and as agreeing in direction when this study resolves "
        "a difference on the same side of 1."
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
                    r"published (open markers) and this study's with its 95\% CI (filled, bars). Above 1: faster than "
                    r"PyTorch.}",
                    r"\label{fig:published}",
                    r"\end{figure}",
                ]
            )
        )
    return "\n\n".join(lines) + "\n"
