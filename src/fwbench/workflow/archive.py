"""A study's results as one file that travels: measured on a GPU node, written up on a laptop.

GPU nodes seldom have LaTeX, a browser or a network, so a study measured there must be able to finish its paper
elsewhere without measuring anything again. `fwbench archive STUDY_DIR OUT` writes one xz-compressed tar of what the
study measured and derived under STUDY_DIR/results (every cell JSON, the tables, figures, logs and job times, the
device record, the paper where it was built), and a manifest (its first member) with:

- the study: the files it was resolved from (their text), the `--config` overrides and the effective config;
- the code: the commit of the fwbench checkout and a digest of every file of the code that made the results (the
  workflow, the report and reference files under STUDY_DIR, the fwbench package), so that a restore can tell which
  file differs;
- the measuring machine: its software fingerprint (the device check's param), Python, CPU and device;
- every archived file with its size, SHA-256 and modification time, and Snakemake's metadata record of it (the rule,
  params, input and code it was made with): what Snakemake needs to treat the restored files as up to date.

Left out are the inputs the workflow writes again from the study's seed and checks by checksum (dataset shards,
starting weights, micro-benchmark operands), and the study's running state (training checkpoints, GPU slots).
`fwbench.workflow.restore` reads it back. See docs/elsewhere.md.
"""

from __future__ import annotations

import base64
import datetime as dt
import fnmatch
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import fwbench
from fwbench.io import atomic_stream, read_json
from fwbench.study import files as study_files
from fwbench.study.grid import cells
from fwbench.trackers.environment import cpu_model, git_state
from fwbench.workflow.requirements import RESTORE_RECORD, restore_record

FORMAT = "fwbench-archive/1"
MANIFEST = "fwbench-archive.json"
RESULTS = "results"
# What an archive leaves out, each with why: (pattern relative to the study directory, reason).
LEFT_OUT = (
    ("results/data/*.npy", "dataset shards: the workflow writes them again from the study's dataset"),
    ("results/weights/*.npz", "starting weights: written again from the seed, checked against weights/MODEL.json"),
    ("results/micro/operands.npz", "micro-benchmark operands: written again from the seed"),
    ("results/state/*", "training checkpoints: only an interrupted training cell resumes from them"),
    ("results/slots/*", "the running study's GPU slots"),
    ("results/held/*", "cells measured for jobs that had not run yet, and their claims (a finished study has none)"),
    (f"results/{RESTORE_RECORD}", "the record of an earlier restore (the manifest says where the results came from)"),
)
# The code that made the results, besides the fwbench package: relative to the study directory.
CODE_DIRS = ("workflow", "report", "reference")
SKIPPED_CODE = ("__pycache__", ".pyc")


class ArchiveError(ValueError):
    """An archive that cannot be written or restored; the message is the one line the user sees."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def left_out(relpath: str) -> str | None:
    """Why `relpath` (relative to the study directory) stays out of an archive, or None if it goes in."""
    for pattern, why in LEFT_OUT:
        if fnmatch.fnmatchcase(relpath, pattern):
            return why
    return None


def code_files(study_dir: Path) -> dict[str, Path]:
    """{name in the manifest: path} of the code that made the results: the workflow, report and reference files
    under the study directory, and the fwbench package's own files (named `fwbench/...`)."""
    found: dict[str, Path] = {}
    roots = [(study_dir / d, d) for d in CODE_DIRS] + [(Path(fwbench.__file__).resolve().parent, "fwbench")]
    for root, name in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_file() and not any(part in path.parts or path.name.endswith(part) for part in SKIPPED_CODE):
                found[f"{name}/{path.relative_to(root).as_posix()}"] = path
    return found


def code_identity(study_dir: Path) -> dict[str, Any]:
    """The commit of the fwbench checkout (None outside git) and each code file's SHA-256."""
    git = git_state()
    return {
        "commit": git.get("commit"),
        "dirty": git.get("dirty"),
        "files": {name: sha256_file(path) for name, path in code_files(study_dir).items()},
    }


def snakemake_record_path(study_dir: Path, key: str) -> Path:
    """Where Snakemake's file persistence keeps the metadata record of output `key` (a path relative to the working
    directory): .snakemake/metadata/ and the key's urlsafe base64, cut into directory names of at most NAME_MAX - 1
    characters, each but the last prefixed with "@" (snakemake.persistence.file.FilePersistence._record_path)."""
    subject = study_dir / ".snakemake" / "metadata"
    max_len = os.pathconf(subject if subject.exists() else study_dir, "PC_NAME_MAX") or 255
    encoded = base64.urlsafe_b64encode(key.encode()).decode()
    parts = [encoded[i : i + max_len - 1] for i in range(0, len(encoded), max_len - 1)]
    return subject.joinpath(*(["@" + p for p in parts[:-1]] + [parts[-1]]))


def snakemake_incomplete_path(study_dir: Path, key: str) -> Path:
    """Snakemake's marker of an output whose job started and did not finish, at the record's place under
    .snakemake/incomplete/."""
    record = snakemake_record_path(study_dir, key)
    return study_dir / ".snakemake" / "incomplete" / record.relative_to(study_dir / ".snakemake" / "metadata")


def study_files_to_archive(study_dir: Path, config: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(the files under results/ that go into the archive, relative to the study directory; {pattern: why} of those
    left out that were there). Every cell of the study must have its result: an archive without one would make the
    study measure it again where it is restored."""
    results = study_dir / RESULTS
    if not results.is_dir():
        raise ArchiveError(f"{results}: no results directory (STUDY_DIR is where snakemake ran the study)")
    missing = [str(c.path(RESULTS)) for c in cells(config) if not (study_dir / c.path(RESULTS)).exists()]
    if missing:
        raise ArchiveError(
            f"{len(missing)} cell(s) of the study have no result under {results} (e.g. {missing[0]}): finish the "
            "study (or archive it with the study file it ran) before archiving it"
        )
    chosen, skipped = [], {}
    for path in sorted(results.rglob("*")):
        relpath = path.relative_to(study_dir).as_posix()
        if path.is_symlink() or not path.is_file():
            continue
        why = left_out(relpath)
        if why:
            skipped[next(p for p, w in LEFT_OUT if w == why)] = why
        else:
            chosen.append(relpath)
    return chosen, skipped


def _metadata_record(study_dir: Path, relpath: str) -> dict[str, Any] | None:
    path = snakemake_record_path(study_dir, relpath)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _machine(study_dir: Path) -> dict[str, Any]:
    """What the results were measured on, from the study's device record (and this host's CPU)."""
    machine: dict[str, Any] = {"host": os.uname().nodename, "cpu_model": cpu_model()}
    try:
        device = read_json(study_dir / RESULTS / "device.json")
    except (OSError, ValueError):
        device = {}
    gpus = [g.get("name") for g in device.get("gpus") or []]
    machine["platform"] = device.get("platform")
    machine["gpus"] = gpus
    summary = ", ".join(filter(None, [machine["host"], f"{len(gpus)} x {gpus[0]}" if gpus else machine["cpu_model"]]))
    machine["summary"] = summary
    return machine


def manifest(
    study_dir: Path,
    study: study_files.Study,
    configfiles: Sequence[str],
    overrides: Mapping[str, Any],
    relpaths: Sequence[str],
    skipped: Mapping[str, str],
    software: Mapping[str, str],
) -> dict[str, Any]:
    from fwbench.installation import interpreter

    files = {}
    for relpath in relpaths:
        path = study_dir / relpath
        stat = path.stat()
        files[relpath] = {
            "size": stat.st_size,
            "sha256": sha256_file(path),
            "mtime": stat.st_mtime,
            "snakemake": _metadata_record(study_dir, relpath),
        }
    earlier = restore_record(study_dir / RESULTS)
    return {
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "fwbench": fwbench.__version__,
        "study": {
            "configfiles": list(configfiles),
            "layers": [layer.label for layer in study.layers],
            "overrides": dict(overrides),
            "config": study.config,
        },
        "code": code_identity(study_dir),
        "software": dict(earlier["manifest"]["software"]) if earlier else dict(software),
        "interpreter": interpreter(),
        "machine": earlier["manifest"]["machine"] if earlier else _machine(study_dir),
        "restored_from": earlier.get("archive") if earlier else None,
        "left_out": dict(skipped),
        "files": files,
    }


def resolve_in(study_dir: Path, configfiles: Sequence[str], overrides: Mapping[str, Any]) -> study_files.Study:
    """The study as `snakemake` resolves it in `study_dir`: study files and their `extends:` are relative to the
    directory Snakemake runs in."""
    here = Path.cwd()
    try:
        os.chdir(study_dir)
        return study_files.resolve(list(configfiles), overrides)
    finally:
        os.chdir(here)


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, path: Path | None = None) -> None:
    """One regular file, owned by nobody in particular (uid/gid 0, no names), with its own mode and mtime."""
    info = tarfile.TarInfo(name)
    if path is not None:
        stat = path.stat()
        info.size, info.mtime, info.mode = stat.st_size, int(stat.st_mtime), stat.st_mode & 0o644 | 0o600
        with open(path, "rb") as handle:
            tar.addfile(info, handle)
    else:
        assert data is not None
        info.size, info.mtime, info.mode = len(data), int(dt.datetime.now().timestamp()), 0o644
        tar.addfile(info, io.BytesIO(data))


def write_archive(
    study_dir: str | os.PathLike,
    out: str | os.PathLike,
    configfiles: Iterable[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Archive the study that `snakemake [--configfile F ...] [--config K=V ...]` ran in `study_dir` into `out`
    (atomically); returns the manifest. `configfiles` are relative to the study directory, as for Snakemake."""
    from fwbench.running.devices import software_fingerprint

    study_dir = Path(study_dir).resolve()
    overrides = dict(overrides or {})
    configfiles = list(configfiles or [study_files.DEFAULT_STUDY])
    study = resolve_in(study_dir, configfiles, overrides)
    relpaths, skipped = study_files_to_archive(study_dir, study.config)
    record = manifest(study_dir, study, configfiles, overrides, relpaths, skipped, software_fingerprint())
    data = json.dumps(record, indent=1, sort_keys=True, allow_nan=False).encode()

    def write(handle) -> None:
        with tarfile.open(fileobj=handle, mode="w:xz", format=tarfile.PAX_FORMAT) as tar:
            _add(tar, MANIFEST, data=data)
            for relpath in relpaths:
                _add(tar, relpath, path=study_dir / relpath)

    atomic_stream(out, write)
    return record
