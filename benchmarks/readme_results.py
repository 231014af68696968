"""The README's result of a study, generated from the study's own tables rather than typed.

    .venv/bin/python benchmarks/readme_results.py results/                     # print the markdown
    .venv/bin/python benchmarks/readme_results.py results/ --write README.md   # replace it in the README

Reads RESULTS/tables/inference.csv (one row per cell: throughput, mode, status, CPU model, device, git commit),
speedups.csv (each framework's throughput over PyTorch's with its paired 95% CI and its verdict adjusted within the
framework pair), mode_gains.csv (compiled over eager within PyTorch), training.csv (per epoch; optional) and
study_time.json (when the study started and its wall time; the LaTeX build is added from
report/build/latex_time.tex when the paper was built). Cell results named by the tidy table's `path` column are
read, where they exist, only to say whether the commit was dirty.

Prints two markdown blocks: the summary, and a table of throughput ratios against PyTorch per model and batch size
with their 95% intervals, led by one line naming the date, commit, machine and study wall time. The summary is the
paper's abstract in Markdown (report/templates/summary.md.j2, fwbench.analysis.paper.abstract.summary: the same
findings in the same words, from the same tables, op_profile.csv included where the study has one), then the date,
commit and wall time.
With --write FILE, the summary replaces the text between `<!-- summary:begin -->` and `<!-- summary:end -->` (if
the file has those markers) and the table the text between `<!-- results:begin -->` and `<!-- results:end -->`
(which the file must have).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.paper.abstract import summary as findings

BASELINE = "torch"
NAMES = {"torch": "PyTorch", "jax": "JAX", "tensorflow": "TensorFlow"}
ORDER = list(NAMES)
MARKERS = {
    "summary": ("<!-- summary:begin -->", "<!-- summary:end -->"),
    "results": ("<!-- results:begin -->", "<!-- results:end -->"),
}


def _name(framework: str) -> str:
    return NAMES.get(framework, framework)


def _mode(mode: str) -> str:
    return "compiled" if mode == "compile" else str(mode)


def _frameworks(values) -> list[str]:
    distinct = {str(v) for v in values}
    return sorted(distinct, key=lambda f: (ORDER.index(f) if f in ORDER else len(ORDER), f))


def _true(value: Any) -> bool:
    """A boolean column read back from CSV ("True"/"False", bools, or empty)."""
    return str(value) == "True"


def _text(value: Any) -> str | None:
    """A string cell of a CSV, None where it is empty (NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def rate(value: float) -> str:
    """img/s as the README prints it: 11,509; 191; 39.1; 4.52."""
    if value is None or not math.isfinite(value):
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def resolved(row: pd.Series) -> bool:
    """The ratio's adjusted verdict (`resolved_adjusted`: the paired test of ratio 1, adjusted within its family by
    the study's analysis.multiplicity); a table from before that column has only its own (`resolved`)."""
    adjusted = row.get("resolved_adjusted")
    return _true(adjusted) if _text(adjusted) is not None else _true(row.get("resolved"))


def interval(row: pd.Series) -> str:
    """A ratio with its own 95% CI, bold where resolved after the adjustment (`resolved`)."""
    text = f"{row['ratio']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
    return f"**{text}**" if resolved(row) else text


ADJUSTMENTS = {
    "holm": "after Holm's adjustment within each framework pair",
    "bh": "after the Benjamini–Hochberg adjustment within each framework pair",
    "none": "by its own 95% CI, without adjustment for multiple comparisons",
}


def adjustment(ratios: pd.DataFrame) -> str:
    """How the verdicts of a speedups table were made, in words (its `multiplicity` column; a table from before it
    has each ratio's own verdict only)."""
    values = ratios["multiplicity"].map(_text).dropna() if "multiplicity" in ratios else pd.Series(dtype=object)
    method = str(values.iloc[0]) if "resolved_adjusted" in ratios and len(values) else "none"
    return ADJUSTMENTS.get(method, f"after the {method} adjustment within each framework pair")


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


# --- what the study ran on, when, and at which commit ------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _dirty(frame: pd.DataFrame, results: Path) -> bool:
    """Whether any cell result the tidy table names recorded a dirty working tree (cells not found count as clean)."""
    for path in frame["path"].dropna().unique() if "path" in frame else []:
        for candidate in (Path(path), results.parent / path, results / path):
            result = _read_json(candidate) if candidate.is_file() else None
            if result is not None:
                if ((result.get("provenance") or {}).get("git") or {}).get("dirty"):
                    return True
                break
    return False


def commit(frame: pd.DataFrame, results: Path) -> str:
    commits = sorted({str(c)[:7] for c in frame.get("git_commit", pd.Series(dtype=object)).dropna()})
    if not commits:
        return "an unknown commit"
    named = ", ".join(f"`{c}`" for c in commits)
    text = f"commit {named}" if len(commits) == 1 else f"commits {named}"
    return text + (" (with uncommitted changes)" if _dirty(frame, results) else "")


def machine(frame: pd.DataFrame) -> str:
    """The device the cells computed on: the GPU's name, or the CPU's model where they ran on a CPU; the threads per
    cell, and the number of nodes where there were several."""

    def one(column: str) -> str | None:
        values = sorted({str(v) for v in frame.get(column, pd.Series(dtype=object)).dropna()})
        return " / ".join(values) if values else None

    platform, cpu = one("platform"), one("cpu_model") or "an unrecorded CPU"
    threads = frame["threads"].dropna().astype(int).unique() if "threads" in frame else []
    threads_text = f", {'/'.join(map(str, sorted(threads)))} threads per cell" if len(threads) else ""
    if platform in ("cuda", "gpu"):
        text = f"{one('device')} (host CPU {cpu}{threads_text})"
    else:
        text = f"{cpu} (CPU only{threads_text})"
    nodes = frame["node"].dropna().unique() if "node" in frame else []
    return text + (f", on {len(nodes)} nodes" if len(nodes) > 1 else "")


def _latex_wall(results: Path) -> float | None:
    """The study's wall time to the PDF, which the paper rule measures after its first LaTeX pass."""
    path = results / "report" / "build" / "latex_time.tex"
    match = re.search(r"\\fwbStudyWallToPdfSeconds\}\{([0-9.]+)\}", path.read_text()) if path.is_file() else None
    return float(match.group(1)) if match else None


def _archived_time(archive: str | None) -> dict[str, Any]:
    """The time table an archive holds, read through the restore's own checks (fwbench.workflow.restore), for a
    restore recorded before restores kept it (the first GPU study's); {} where the archive is gone or refused."""
    import tempfile

    from fwbench.workflow.restore import extract_results

    with tempfile.TemporaryDirectory() as scratch:
        try:
            results = extract_results(str(archive), Path(scratch) / "run")
        except (OSError, ValueError):
            return {}
        return _read_json(results / "tables" / "study_time.json") or {}


def _wall_where_measured(results: Path) -> str | None:
    """For results restored from an archive (results/restored-from.json), the wall time where they were measured,
    from the time table they were archived with (`measured_time`), since the paper built after the restore ran on
    another machine, later; None for results measured here."""
    record = _read_json(results / "restored-from.json")
    if not record:
        return None
    measured = record.get("measured_time") or _archived_time(record.get("archive"))
    if measured.get("wall_s") is None:
        return "not recorded where it was measured (restored from an archive)"
    runs = measured.get("runs")
    over = f", over {runs} runs of the workflow" if isinstance(runs, int) and runs > 1 else ""
    return (
        f"{_minutes(float(measured['wall_s']))} from the first job to the last table on the machine that measured "
        f"it{over} (its paper written elsewhere, from its archive)"
    )


def when_and_how_long(results: Path, frame: pd.DataFrame) -> tuple[str, str]:
    """(date, wall time) of the study: the date its first job started (UTC) and its wall time from the first job to
    the PDF (or to the last table where the paper was not built), from study_time.json."""
    summary = _read_json(results / "tables" / "study_time.json") or {}
    started = summary.get("started_at")
    if started is None:  # no time record: the day the tidy table was written
        started = (results / "tables" / "inference.csv").stat().st_mtime
    date = datetime.fromtimestamp(float(started), tz=UTC).strftime("%Y-%m-%d")
    measured_elsewhere = _wall_where_measured(results)
    if measured_elsewhere is not None:  # restored from an archive: its time is the machine's that measured it
        return date, measured_elsewhere
    to_pdf = _latex_wall(results)
    if to_pdf is not None:
        wall = f"{_minutes(to_pdf)} from the first job to the PDF"
    elif summary.get("wall_s") is not None:
        wall = f"{_minutes(float(summary['wall_s']))} from the first job to the last table (no PDF built)"
    else:
        wall = "wall time not recorded"
    runs = summary.get("runs")
    if isinstance(runs, int) and runs > 1:
        wall += f", over {runs} runs of the workflow"
    return date, wall


# --- the tables ----------------------------------------------------------------------------------------------------


def _read(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def _baseline_rate(frame: pd.DataFrame, model: str, precision: str, batch: int, mode: str | None) -> float | None:
    rows = frame[
        (frame["suite"] == "inference")
        & (frame["framework"] == BASELINE)
        & (frame["model"] == model)
        & (frame["precision"] == precision)
        & (frame["batch_size"] == batch)
        & (frame["status"] == "ok")
    ]
    if mode is not None and "mode" in rows:
        rows = rows[rows["mode"] == mode]
    return float(rows["throughput_img_s"].iloc[0]) if len(rows) else None


def _failed(frame: pd.DataFrame, framework: str, model: str, precision: str, batch: int) -> bool:
    rows = frame[
        (frame["framework"] == framework)
        & (frame["model"] == model)
        & (frame["precision"] == precision)
        & (frame["batch_size"] == batch)
    ]
    return len(rows) > 0 and not (rows["status"] == "ok").any()


def ratio_cell(row: pd.Series | None, failed: bool) -> str:
    if row is None:
        return "failed" if failed else "—"
    if _text(row.get("refused")):
        return "refused (different devices)"
    text = interval(row)
    if _true(row.get("mixed_modes")):
        text += f" vs {row.get('denominator_mode', 'eager')}"
    if _text(row.get("stand_in")) and not _true(row.get("mixed_modes")):
        text += " (stand-in)"
    if _true(row.get("deviation_differs")):
        text += " (workarounds differ)"
    if _true(row.get("node_differs")):
        text += " (different nodes)"
    return text


def _comparisons(frame: pd.DataFrame) -> list[tuple[str, str, int]]:
    inference = frame[frame["suite"] == "inference"]
    keys = inference[["model", "precision", "batch_size"]].drop_duplicates()
    return sorted((str(m), str(p), int(b)) for m, p, b in keys.itertuples(index=False))


def table(frame: pd.DataFrame, ratios: pd.DataFrame, gains: pd.DataFrame | None) -> list[str]:
    """The ratio table: one row per comparison (model, precision, batch size) the study has."""
    others = [f for f in _frameworks(frame["framework"]) if f not in (BASELINE, "numpy")]
    gains = gains if gains is not None and len(gains) else None
    several_precisions = frame["precision"].nunique() > 1
    header = ["model", *(["precision"] if several_precisions else []), "batch", "PyTorch img/s"]
    header += [f"{_name(f)} / PyTorch [95% CI]" for f in others]
    if gains is not None:
        header.append("PyTorch compiled / eager [95% CI]")
    lines = ["| " + " | ".join(header) + " |"]
    align = ["---", *(["---"] if several_precisions else []), "---:", "---:"] + ["---"] * (len(header) - 3)
    lines.append("| " + " | ".join(align[: len(header)]) + " |")
    for model, precision, batch in _comparisons(frame):
        mine = ratios[(ratios["model"] == model) & (ratios["precision"] == precision) & (ratios["batch_size"] == batch)]
        den_modes = [m for m in mine.get("denominator_mode", pd.Series(dtype=object)).dropna().unique()]
        # the baseline's throughput in the mode its ratios pair (compiled where it has a cell in it), else any
        den_mode = str(den_modes[0]) if len(den_modes) == 1 else None
        baseline = _baseline_rate(frame, model, precision, batch, den_mode)
        if baseline is None:
            baseline = _baseline_rate(frame, model, precision, batch, None)
        mode_text = f" ({_mode(den_mode)})" if den_mode else ""
        cells = [model, *([precision] if several_precisions else []), str(batch), rate(baseline) + mode_text]
        if baseline is None:
            cells[-1] = "failed" if _failed(frame, BASELINE, model, precision, batch) else "—"
        for framework in others:
            row = mine[mine["numerator"] == framework] if "numerator" in mine else mine
            cells.append(
                ratio_cell(row.iloc[0] if len(row) else None, _failed(frame, framework, model, precision, batch))
            )
        if gains is not None:
            gain = gains[
                (gains["model"] == model)
                & (gains["precision"] == precision)
                & (gains["batch_size"] == batch)
                & (gains["framework"] == BASELINE)
            ]
            cells.append(ratio_cell(gain.iloc[0], False) if len(gain) else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _kept(ratios: pd.DataFrame) -> pd.DataFrame:
    """The ratios with an estimate (refused ones have none)."""
    refused = ratios["refused"].map(_text).notna() if "refused" in ratios else pd.Series(False, index=ratios.index)
    return ratios[~refused & ratios["ratio"].notna()]


def counts(ratios: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per framework: its ratios' count, range, how many are resolved each way (the adjusted verdicts,
    `resolved`), and how many more only their own interval resolves."""
    out = {}
    kept = _kept(ratios)
    for framework in _frameworks(kept["numerator"]) if "numerator" in kept else []:
        mine = kept[kept["numerator"] == framework]
        adjusted = mine.apply(resolved, axis=1).astype(bool) if len(mine) else pd.Series(dtype=bool)
        chosen = mine[adjusted]
        out[framework] = {
            "n": len(mine),
            "low": float(mine["ratio"].min()),
            "high": float(mine["ratio"].max()),
            "faster": int((chosen["ratio"] > 1).sum()),
            "slower": int((chosen["ratio"] < 1).sum()),
            "own_only": int((mine["resolved"].map(_true) & ~adjusted).sum()),
        }
    return out


def _scope(frame: pd.DataFrame) -> str:
    precisions = ", ".join(sorted(frame["precision"].dropna().astype(str).unique()))
    sizes = sorted(frame["image_size"].dropna().astype(int).unique()) if "image_size" in frame else []
    return precisions + (f" at {'/'.join(map(str, sizes))} px" if sizes else "")


def _training_line(training: pd.DataFrame | None) -> str | None:
    """One sentence per trained model: each variant's steady img/s and top-1 in the last epoch."""
    if training is None or training.empty:
        return None
    ok = training[training["status"] == "ok"]
    parts = []
    for (model, batch), group in ok.groupby(["model", "batch_size"]):
        variants = []
        modes = group.groupby("framework")["mode"].nunique() if "mode" in group else pd.Series(dtype=int)
        for framework in _frameworks(group["framework"]):
            for mode, cell in group[group["framework"] == framework].groupby("mode", sort=False):
                last = cell.sort_values("epoch").iloc[-1]
                name = _name(framework) + (f" {_mode(mode)}" if modes[framework] > 1 else "")
                variants.append(f"{name} {rate(float(last['img_s']))} img/s, top-1 {100 * float(last['top1']):.0f}%")
        epochs = int(group["epoch"].max()) + 1
        parts.append(f"{model} (batch {batch}, {epochs} epoch{'s' if epochs != 1 else ''}): " + "; ".join(variants))
    failed = training[training["status"] != "ok"]
    text = "Training, last epoch: " + ". ".join(parts) + "." if parts else "Training: no cell succeeded."
    if len(failed):
        text += f" {len(failed)} training cell{'s' if len(failed) != 1 else ''} failed."
    return text


def _failures(failed: pd.DataFrame, inference: pd.DataFrame) -> str:
    if not len(failed):
        return "no inference cell failed"
    return f"{len(failed)} of {len(inference)} inference cells failed (`results/tables/inference.csv` says why)"


def blocks(results: str | Path) -> dict[str, str]:
    """{"summary": paragraph, "results": provenance line, table and notes} of the study in `results`."""
    results = Path(results)
    tables = results / "tables"
    for name in ("inference.csv", "speedups.csv"):
        if not (tables / name).is_file():
            raise SystemExit(f"readme_results: {tables / name} not found: run a study with the inference suite first")
    frame = pd.read_csv(tables / "inference.csv")
    ratios = pd.read_csv(tables / "speedups.csv")
    gains = _read(tables / "mode_gains.csv")
    training = _read(tables / "training.csv")
    date, wall = when_and_how_long(results, frame)
    where = machine(frame)
    at = commit(frame, results)
    inference = frame[frame["suite"] == "inference"]
    failed = inference[inference["status"] != "ok"]
    by_framework = counts(ratios)
    resolved_count = sum(c["faster"] + c["slower"] for c in by_framework.values())
    own_only = sum(c["own_only"] for c in by_framework.values())
    total = sum(c["n"] for c in by_framework.values())
    how = adjustment(ratios)
    own_text = (
        f"{own_only} more exclude{'s' if own_only == 1 else ''} 1 by {'its' if own_only == 1 else 'their'} own CI only"
    )
    summary = findings(
        ratios,
        frame,
        _read(tables / "op_profile.csv"),
        _frameworks(inference["framework"]),
        {"date": date, "commit": at, "wall": wall},
    )

    pairs = sorted({int(p) for p in ratios.get("pairs", pd.Series(dtype=float)).dropna() if p > 0})
    rounds = (
        f"{'/'.join(map(str, pairs))} launches of warm workers (interleaved blocks within each)"
        if pairs
        else "launches of warm workers (interleaved blocks within each)"
    )
    mixed = ratios["mixed_modes"].map(_true).any() if "mixed_modes" in ratios else False
    methods = ratios.get("method", pd.Series(dtype=object)).dropna().astype(str)
    interval = (
        "its paired 95% CI, its launch variance moderated across the table's ratios (docs/measurement.md)"
        if methods.str.contains("moderated").any()
        else "its own paired 95% CI"
    )
    lines = [
        f"Measured {date} at {at} on {where}; {_scope(inference)}; study wall time {wall}. "
        "Generated by `benchmarks/readme_results.py` from the study's `results/tables/`.",
        "",
        *table(frame, ratios, gains),
        "",
        f"Each ratio is a framework's throughput over PyTorch's at the same model and batch size: the geometric mean "
        f"over {rounds} with {interval}. **Bold**: resolved {how}. "
        + (
            '"vs eager": the study has no compiled PyTorch cell for that model, so a compiled program stands against '
            "eager PyTorch. "
            if mixed
            else ""
        )
        + f"{resolved_count} of {total} ratios resolved{f' ({own_text})' if own_only else ''}; "
        + f"{_failures(failed, inference)}.",
    ]
    training_line = _training_line(training)
    if training_line:
        lines += ["", training_line]
    return {"summary": summary, "results": "\n".join(lines)}


def replace(text: str, name: str, body: str, required: bool = True, markers: tuple[str, str] | None = None) -> str:
    """`text` with the block `name` (between its markers: MARKERS, or `markers`) replaced by `body`."""
    begin, end = markers or MARKERS[name]
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), flags=re.S)
    if not pattern.search(text):
        if required:
            raise SystemExit(f"readme_results: {begin} ... {end} not found")
        return text
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default="results", help="a study's results folder (default: results)")
    parser.add_argument("--write", metavar="FILE", help="replace the marked blocks in FILE (e.g. README.md)")
    args = parser.parse_args(argv)
    made = blocks(args.results)
    if args.write:
        path = Path(args.write)
        text = replace(path.read_text(), "results", made["results"])
        text = replace(text, "summary", made["summary"], required=False)
        path.write_text(text)
    print(made["summary"] + "\n\n" + made["results"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
