"""Published vs reproduced: each published ratio matched with this study's cells, beside this study's ratio and its
verdict (`compare`, the rows of published.csv, COLUMNS).

A published row matches a cell when suite, model, batch size and precision agree (reference/sources.yaml says what
each source ran); a row without a match is not shown. Another framework's ratio to PyTorch is compared, never the
absolute numbers across devices: a CPU study at 32 px and an H100 paper at 224 px measure different things in
img/s, but both can say which framework was faster and by how much. Absolute numbers are shown labelled as not
comparable unless device and resolution are the same (`absolute_comparability`). An inference ratio is this study's
paired ratio (speedups.csv); a training ratio is the two cells' training times divided, one run each.

Precision: a source that did not pin TF32 ran each framework's own float32 arithmetic (precision `default`,
reference/sources.yaml), which on a GPU since Ampere is TF32 in some operations. Its rows match this study's
`default` cells, like for like; where the study has none, its fp32 cells stand in: like for like on a CPU (no TF32
there), not on a GPU, which the row says (`matched_precision`). Where the study has both, the true-FP32 ratio of the
same pair is set beside it, so that the paper can say how much of a difference is arithmetic.

Execution modes (fwbench.study.modes): a published ratio is matched with this study's cells in the modes the source
ran (stated, or each framework's primary one: `Source.mode_of`); eager PyTorch cells for an eager published baseline,
where the study has them, and each row records which modes were matched on both sides.
"""

from __future__ import annotations

import math

import pandas as pd

from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.common.latex import label
from fwbench.analysis.common.partners import check_placement, ratio_variant, with_modes
from fwbench.analysis.inference.ratios import speedups as speedups_of
from fwbench.analysis.inference.summary import refused
from fwbench.analysis.published.judgement import (
    DEFAULT_MARGIN,
    FAILED,
    ONE_RUN,
    UNPAIRED_SCOPE,
    Judgement,
    across_classes,
    finite,
    judge,
)
from fwbench.analysis.published.sources import BASELINE, Source, published_ratios, read_published

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
    "our_precision",
    "arithmetic_match",
    "arithmetic_note",
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
    "ratio_true_fp32",
    "ci_low_true_fp32",
    "ci_high_true_fp32",
    "ratio_vs_compiled",
    "ci_low_vs_compiled",
    "ci_high_vs_compiled",
    "published_device_kind",
    "ours_device_kind",
    "ours_device",
    "absolute_comparable",
    "absolute_note",
    "reason",
]


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


# Each framework's own float32 arithmetic is true FP32 on a CPU, TF32 in some of a GPU's operations.
DEFAULT_ON_CPU = "on a CPU each framework's default float32 arithmetic is true FP32"
DEFAULT_ON_GPU = "ours in true FP32, theirs in each framework's default arithmetic (TF32 in some operations)"


def matched_precision(source: Source, precisions: set[str], ours_kind: str) -> tuple[str, bool, str] | None:
    """(this study's precision to match the source's rows with, whether it is the same arithmetic, a note where it is
    a stand-in), or None where the study has neither the source's precision nor a stand-in for it."""
    if source.precision in precisions:
        return source.precision, True, ""
    if source.precision == "default" and "fp32" in precisions:
        return ("fp32", True, DEFAULT_ON_CPU) if ours_kind == "cpu" else ("fp32", False, DEFAULT_ON_GPU)
    return None


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


def _our_cells(table: pd.DataFrame, row, source: Source, precision: str) -> dict[str, pd.DataFrame] | None:
    """This study's cells (rows of `table`) matching a published row: {PyTorch: ..., the row's framework: ...} at
    the row's model and batch size and `precision` (matched_precision), each in the mode the source ran (stated, or
    its framework's primary one) where the study has it, or None when either framework has no cell (not shown)."""
    cells = with_modes(
        table[
            (table["model"] == row.model) & (table["batch_size"] == row.batch_size) & (table["precision"] == precision)
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


def _speedup_pair(speedups: pd.DataFrame, row, precision: str, modes: dict) -> pd.DataFrame:
    """This study's ratio rows (speedups.csv) of the matched cells: same comparison and framework, and, where the
    table records modes, the matched cells' modes on both sides (a table from before modes has one per pair)."""
    if speedups.empty or "numerator" not in speedups:
        return speedups.iloc[0:0]
    pair = speedups[
        (speedups["model"] == row.model)
        & (speedups["batch_size"] == row.batch_size)
        & (speedups["precision"] == precision)
        & (speedups["numerator"] == row.framework)
    ]
    if {"numerator_mode", "denominator_mode"} <= set(pair.columns):
        other, torch = pair["numerator_mode"], pair["denominator_mode"]
        pair = pair[(other == modes["ours_other_mode"]) & (torch == modes["ours_torch_mode"])]
    return pair


class _PairedFromCells:
    """Ratios in the published modes from the cells themselves, where the study's ratio table pairs other modes
    (compiled PyTorch, while the published baseline ran eagerly): the cells of one comparison ran interleaved in one
    group whatever their modes, so `speedups` gives the same paired interval for any pairing. The cells are read,
    and one ratio table per pairing of modes computed, on first use only."""

    def __init__(self, cell_paths: list | None):
        self.cell_paths, self.results, self.tables = cell_paths, None, {}

    def pair(self, row, precision: str, modes: dict) -> pd.DataFrame:
        if not self.cell_paths:
            return pd.DataFrame()
        if self.results is None:
            self.results = load_cells(self.cell_paths)
        wanted = {BASELINE: modes["ours_torch_mode"], row.framework: modes["ours_other_mode"]}
        key = tuple(sorted(wanted.items()))
        if key not in self.tables:
            self.tables[key] = speedups_of(self.results, numerator=row.framework, ratio_modes=wanted)
        return _speedup_pair(self.tables[key], row, precision, modes)


def _interval(pair: pd.DataFrame, suffix: str = "") -> dict:
    """A ratio row's ratio and paired 95% CI (speedups.csv), under column names ending in `suffix`."""
    p = pair.iloc[0]
    return {
        f"ratio{suffix}": float(p["ratio"]),
        f"ci_low{suffix}": float(p["ci_low"]),
        f"ci_high{suffix}": float(p["ci_high"]),
    }


def _inference_matches(
    source: Source,
    ratios: pd.DataFrame,
    frame: pd.DataFrame,
    speedups: pd.DataFrame,
    cells: _PairedFromCells,
    matched: tuple[str, bool, str],
):
    precision, like, note = matched
    for row in ratios.itertuples():
        ours = _our_cells(frame, row, source, precision)
        if ours is None:
            continue  # no cell of this study matches: not shown
        modes = _modes_part(source, row.framework, ours)
        pair = _speedup_pair(speedups, row, precision, modes)
        if pair.empty:
            pair = cells.pair(row, precision, modes)
        result = {"model": row.model, "batch_size": row.batch_size, "precision": source.precision}
        result |= {"our_precision": precision, "arithmetic_match": like, "arithmetic_note": note}
        if precision == "default":  # the same pair in true FP32, where the study has it: what arithmetic changes
            true_fp32 = _speedup_pair(speedups, row, "fp32", modes)
            if not true_fp32.empty and not refused(true_fp32).any():
                result |= _interval(true_fp32, "_true_fp32")
        result |= {"framework": row.framework, **_published_part(row), **modes}
        result |= _against_compiled(frame, speedups, cells, row, precision, modes)
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
        yield (
            result
            | _interval(pair)
            | {
                "ci_scope": p["ci_scope"],
                # a table from before the log-scale standard error has none: its ratio is judged by direction alone
                "se_log": float(p["se_log"]) if finite(p.get("se_log")) else math.nan,
                "df": float(p["df"]) if finite(p.get("df")) else math.nan,
            }
        )


def _against_compiled(
    frame: pd.DataFrame, speedups: pd.DataFrame, cells: _PairedFromCells, row, precision: str, modes: dict
) -> dict:
    """The same pair against compiled PyTorch, where the row sets the other framework against eager PyTorch (as a
    published baseline ran) and the study has a compiled PyTorch cell of it: compiled against compiled, beside the
    published pairing ({} otherwise)."""
    if modes["ours_torch_mode"] == "compile":
        return {}
    compiled = frame[
        (frame["framework"] == BASELINE)
        & (frame["model"] == row.model)
        & (frame["batch_size"] == row.batch_size)
        & (frame["precision"] == precision)
        & (with_modes(frame)["mode"] == "compile")
    ]
    if compiled.empty or (compiled["status"] != "ok").any():
        return {}
    wanted = {**modes, "ours_torch_mode": "compile"}
    pair = _speedup_pair(speedups, row, precision, wanted)
    if pair.empty:
        pair = cells.pair(row, precision, wanted)
    if pair.empty or refused(pair).any() or not finite(pair.iloc[0].get("ci_low")):
        return {}
    return _interval(pair, "_vs_compiled")


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


def _training_matches(source: Source, ratios: pd.DataFrame, epochs: pd.DataFrame, ours_kind: str):
    times = training_times(epochs)
    matched = matched_precision(source, set(times["precision"]), ours_kind)
    if matched is None:
        return
    precision, like, note = matched
    for row in ratios.itertuples():
        ours = _our_cells(times, row, source, precision)
        if ours is None:
            continue
        result = {
            "model": row.model,
            "batch_size": row.batch_size,
            "precision": source.precision,
            "our_precision": precision,
            "arithmetic_match": like,
            "arithmetic_note": note,
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
    ours_kind, ours_device = _study_device(inference)
    for source in sources:
        ratios = published_ratios(source, read_published(source))
        matched = matched_precision(source, set(inference.get("precision", pd.Series(dtype=str))), ours_kind)
        if source.suite == "inference" and matched is not None:
            matches = list(_inference_matches(source, ratios, inference, speedups, paired, matched))
        elif source.suite == "training" and training is not None and not training.empty:
            matches = list(_training_matches(source, ratios, training, ours_kind))
        else:
            matches = []
        comparable, note = absolute_comparability(source, inference, image_size)
        for match in matches:
            rows.append(
                {"source": source.key, "suite": source.suite, "unit": source.unit}
                | match
                | _judged(match, source.device_kind, ours_kind, margin)
                | {"ours_device": ours_device, "absolute_comparable": comparable, "absolute_note": note}
            )
    return pd.DataFrame(rows, columns=COLUMNS)
