"""Each workflow job's wall time, from the two places it is recorded.

Jobs that measure nothing carry Snakemake's `benchmark:` directive (a TSV per job, its `s` column the job's wall
time; the file is written as the job ends, so its modification time is the job's end). The measuring jobs (inference
groups, training cells, the peak-FLOP probe) do not: Snakemake's benchmark thread reads /proc/PID/smaps of every
process of the job every 0.5 s for the first 15 s and every 30 s after, 29 ms per read of a 1 GB process on this
study's 2-core machine, i.e. ~6% of a core beside the timed window. They write the same facts themselves
(`timed_job`): the script process's creation time (so the interpreter's start counts) and its end.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fwbench.io import atomic_write_json, read_json

JOB_RECORD_KIND = "fwbench job time"


@contextmanager
def timed_job(path: str | os.PathLike, rule: str, wildcards: Mapping[str, str]) -> Iterator[None]:
    """Write `path` ({rule, wildcards, started_at, finished_at, wall_s}, epoch seconds) when the body returns."""
    import psutil

    started = psutil.Process().create_time()
    yield
    finished = time.time()
    atomic_write_json(
        path,
        {
            "kind": JOB_RECORD_KIND,
            "rule": rule,
            "wildcards": dict(wildcards),
            "started_at": started,
            "finished_at": finished,
            "wall_s": finished - started,
            "source": "the job script's process creation time (psutil) to the end of its work",
        },
    )


@dataclass(frozen=True)
class JobTime:
    rule: str
    name: str  # the record's path below the benchmarks folder, without suffix: names the job
    wall_s: float
    started_at: float
    finished_at: float
    cpu_s: float | None
    source: str  # "snakemake benchmark" or "job record"


def _from_tsv(path: Path, rule: str, name: str) -> JobTime:
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows or "s" not in rows[0]:
        raise ValueError(f"{path}: not a Snakemake benchmark file (no 's' column)")
    wall = float(rows[-1]["s"])
    end = path.stat().st_mtime  # written as the job ends
    cpu = rows[-1].get("cpu_time")
    return JobTime(rule, name, wall, end - wall, end, float(cpu) if cpu not in (None, "", "NA") else None, "snakemake")


def _from_json(path: Path, rule: str, name: str) -> JobTime:
    record = read_json(path)
    if not isinstance(record, dict) or record.get("kind") != JOB_RECORD_KIND:
        raise ValueError(f"{path}: not an fwbench job-time record")
    return JobTime(
        rule, name, float(record["wall_s"]), float(record["started_at"]), float(record["finished_at"]), None, "record"
    )


def read_jobs(benchmarks_dir: str | os.PathLike) -> list[JobTime]:
    """Every job's time under `benchmarks_dir` ({rule}/... .tsv from Snakemake, .json from timed_job). A file that
    is neither is an error naming it."""
    root = Path(benchmarks_dir)
    jobs = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        relative = path.relative_to(root)
        rule, name = relative.parts[0], str(relative.with_suffix(""))
        if path.suffix == ".tsv":
            jobs.append(_from_tsv(path, rule, name))
        elif path.suffix == ".json":
            jobs.append(_from_json(path, rule, name))
        else:
            raise ValueError(f"{path}: unexpected file among job times (expected .tsv or .json)")
    return jobs
