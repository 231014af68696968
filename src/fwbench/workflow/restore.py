"""Restoring an archive (fwbench.workflow.archive) into another checkout, so that the usual `snakemake` command builds
the tables, figures and paper there without running a measuring job.

An archive comes from someone else's machine, so nothing in it is trusted before all of it has been read:

1. **Read and check, write nothing.** Every member must be the manifest or a regular file under results/ (no
   absolute path, no `..`, no link, no device file, no second copy of a name), listed in the manifest with its size
   and SHA-256, and every listed file must be there; a truncated or corrupt archive fails its decompression here. The
   archive must come from the code of this checkout (the same commit, and the same files where either side had
   uncommitted changes) and the study must resolve here to the archive's effective config; and results/ must not
   hold cells already, nor any file the archive holds: an archive is never mixed with results measured elsewhere.
   The first of these that fails is the one line the user sees, and nothing has been written.
2. **Write.** The members are read a second time into a staging directory beside results/ and checked against the
   digests again, then moved into place. Their modification times keep their order and are set after every code
   and study file of the checkout (a fresh clone's files are newer than anything measured before it), so Snakemake
   sees no input or script newer than the results; Snakemake's metadata records of the archived files are written
   where it reads them, so params and code changes are still judged as they would be on the measuring machine.
3. **Record.** results/restored-from.json says where the results came from; the workflow then keeps the measuring
   machine's software for its device check, and refuses to measure cells the archive lacks
   (fwbench.workflow.requirements).

**Report only.** Results are often written up long after they were measured, by code that has moved on (a GPU
study's paper rebuilt once its wording is improved): the code check above would refuse them. `report_only` restores
what was measured (the files of fwbench.workflow.rule_kinds' measuring rules, and the logs and job times) and leaves
out what the report rules wrote, so that this checkout's code writes the tables, figures and paper again from them.
The code and study differences are recorded and printed, not refused. Snakemake's records of the measured files are
written without what the other code ran (OTHER_CODES_RECORD: its rules' code and params, which this code changes by
design and which would make Snakemake measure again), and each measuring rule's files are written after those of
the rules it reads (`_made_from_order`), since Snakemake then judges them by modification time. Unless study files
are named, the archive's own effective study is written beside the results (ARCHIVED_STUDY) and the printed command
reads it, so the grid is the one that was measured; a study that asks for a cell the archive lacks is still refused
by the workflow.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import lzma
import os
import shutil
import tarfile
import tempfile
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from fwbench.io import atomic_write_json, atomic_write_text
from fwbench.study.config import ConfigError
from fwbench.workflow.archive import (
    CODE_DIRS,
    FORMAT,
    MANIFEST,
    RESULTS,
    ArchiveError,
    code_identity,
    resolve_in,
    sha256_file,
    snakemake_incomplete_path,
    snakemake_record_path,
)
from fwbench.workflow.requirements import RESTORE_RECORD
from fwbench.workflow.rule_kinds import is_report_rule, measuring_stage

# What reading a truncated or corrupt compressed tar raises, by its compression.
READ_ERRORS = (tarfile.TarError, EOFError, OSError, ValueError, lzma.LZMAError, zlib.error)
# An archive's members may hold no more than this in all: a default study's archive holds about 30 MB.
MAX_TOTAL_BYTES = 8 << 30
STUDY_FILES = ("config",)
# What a report-only restore drops from Snakemake's record of a measured file: what the other code ran (its rule's
# code, params, input list and software), which this checkout's code changes by design and which would make Snakemake
# measure again. The rest stays: the rule, the job's times, and the checksums of its inputs where Snakemake kept them.
OTHER_CODES_RECORD = frozenset({"code", "params", "input", "software_stack_hash", "conda_env", "container_img_url"})
# Where a report-only restore writes the archive's effective study, relative to the checkout.
ARCHIVED_STUDY = f"{RESULTS}/archived-study.yaml"


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member may not be restored (its name or its kind), or None."""
    name = member.name
    path = PurePosixPath(name)
    if name.startswith("/") or path.is_absolute():
        return "an absolute path"
    if ".." in path.parts:
        return "a path with '..'"
    if "\\" in name or any(part in ("", ".") for part in name.split("/")):
        return "a path that is not plain"
    if member.issym() or member.islnk():
        return f"a link (to {member.linkname})"
    if member.isdev():
        return "a device file or FIFO"
    if not (member.isreg() or member.isdir()):
        return "neither a regular file nor a directory"
    if name != MANIFEST and path.parts[0] != RESULTS:
        return f"outside {RESULTS}/"
    return None


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Every member in archive order, each checked (`_member_problem`) before anything else is done with it."""
    seen: set[str] = set()
    total = 0
    for member in tar:
        problem = _member_problem(member)
        if problem:
            raise ArchiveError(f"member {member.name!r} is {problem}: nothing restored")
        if member.name in seen:
            raise ArchiveError(f"member {member.name!r} appears twice: nothing restored")
        seen.add(member.name)
        total += member.size
        if total > MAX_TOTAL_BYTES:
            raise ArchiveError(f"the archive holds more than {MAX_TOTAL_BYTES >> 30} GB: nothing restored")
        yield member


def _hash(tar: tarfile.TarFile, member: tarfile.TarInfo, copy_to: Path | None = None) -> str:
    """The member's SHA-256, read block by block (and written to `copy_to` as it is read)."""
    digest = hashlib.sha256()
    source = tar.extractfile(member)
    assert source is not None
    with open(copy_to or os.devnull, "wb") as out:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def _open(archive: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, mode="r:*")
    except FileNotFoundError:
        raise ArchiveError(f"{archive}: no such file") from None
    except READ_ERRORS as error:
        raise ArchiveError(f"{archive}: not a readable archive ({type(error).__name__}: {error})") from None


def read_checked(archive: Path) -> dict[str, Any]:
    """The archive's manifest, once every member has been read and checked against it (step 1's first half)."""
    manifest: dict[str, Any] | None = None
    found: dict[str, str] = {}
    current = "its first member"
    tar = _open(archive)
    try:
        with tar:
            for index, member in enumerate(_members(tar)):
                current = repr(member.name)
                if index == 0:
                    if member.name != MANIFEST:
                        raise ArchiveError(f"{archive}: its first member is {member.name!r}, not {MANIFEST}")
                    manifest = _manifest(archive, tar, member)
                    continue
                if member.isdir():
                    continue
                listed = manifest["files"].get(member.name)
                if listed is None:
                    raise ArchiveError(f"member {member.name!r} is not in the archive's manifest: nothing restored")
                if member.size != listed["size"] or _hash(tar, member) != listed["sha256"]:
                    raise ArchiveError(f"member {member.name!r} does not match its manifest entry: nothing restored")
                found[member.name] = listed["sha256"]
    except ArchiveError:
        raise
    except READ_ERRORS as error:
        raise ArchiveError(
            f"{archive}: truncated or corrupt at member {current} ({type(error).__name__}: {error}): nothing restored"
        ) from None
    if manifest is None:
        raise ArchiveError(f"{archive}: an empty archive")
    absent = sorted(set(manifest["files"]) - set(found))
    if absent:
        raise ArchiveError(f"{archive}: {len(absent)} file(s) of its manifest are missing, e.g. {absent[0]}")
    return manifest


def _manifest(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo) -> dict[str, Any]:
    source = tar.extractfile(member)
    assert source is not None
    try:
        manifest = json.loads(source.read())
    except ValueError as error:
        raise ArchiveError(f"{archive}: its manifest is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"{archive}: not an fwbench archive of format {FORMAT}")
    if not isinstance(manifest.get("files"), dict):
        raise ArchiveError(f"{archive}: its manifest lists no files")
    for name in manifest["files"]:
        problem = _member_problem(tarfile.TarInfo(name))
        if problem:
            raise ArchiveError(f"{archive}: its manifest names {name!r}, {problem}: nothing restored")
    return manifest


def code_difference(archived: Mapping[str, Any], here: Mapping[str, Any], advice: bool = True) -> str | None:
    """What differs between the code that made the results and this checkout's, or None. The files' digests decide:
    a copy of a working tree whose git metadata lags its files (a GPU machine's copy of a checkout, say) records an
    older commit over the same code, and is restored; a commit is named only to say where differing code is."""
    ours, theirs = here["files"], archived.get("files") or {}
    for name in sorted(set(ours) | set(theirs)):
        if ours.get(name) != theirs.get(name):
            where = "only here" if name not in theirs else "only in the archive" if name not in ours else "changed"
            commits = archived.get("commit"), here.get("commit")
            if all(commits) and commits[0] != commits[1]:
                return (
                    f"the archive was made at commit {commits[0][:12]} and this checkout is at {commits[1][:12]}, and "
                    f"the code differs: {name} ({where})"
                    + (f"; check out {commits[0][:12]} to restore it" if advice else "")
                )
            commit = f" (both at commit {here['commit'][:12]})" if here.get("commit") else ""
            return f"the code differs from the archive's{commit}: {name} ({where})"
    return None


def _first_difference(a: Any, b: Any, key: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(set(a) | set(b), key=str):
            found = _first_difference(a.get(name), b.get(name), f"{key}.{name}" if key else str(name))
            if found:
                return found
        return None
    return None if a == b else (key or "(the whole config)", a, b)


def study_difference(archived: Mapping[str, Any], here: Mapping[str, Any]) -> str | None:
    """The first key whose value differs between the archive's effective config and this study's, or None."""
    found = _first_difference(json.loads(json.dumps(here)), archived)
    if found is None:
        return None
    key, ours, theirs = found
    return f"the study differs from the archive's at {key}: {json.dumps(ours)} here, {json.dumps(theirs)} there"


def _conflict(study_dir: Path, names: Sequence[str]) -> str | None:
    """Why results/ cannot take the archive: cells already there, or a file the archive would replace."""
    cells = study_dir / RESULTS / "cells"
    present = sorted(cells.rglob("*.json")) if cells.is_dir() else []
    if present:
        example = present[0].relative_to(study_dir)
        return (
            f"{study_dir / RESULTS} already holds {len(present)} cell result(s), e.g. {example}: an archive is never "
            "mixed with results already present; restore into a checkout whose results/ has no cells (move it aside)"
        )
    for name in names:
        if (study_dir / name).exists():
            return f"{study_dir / name} exists and the archive holds it too: move {study_dir / RESULTS} aside first"
    if (study_dir / RESULTS / RESTORE_RECORD).exists():
        return f"{study_dir / RESULTS / RESTORE_RECORD} exists: this results/ was restored already"
    return None


def check_target(
    manifest: Mapping[str, Any],
    study_dir: Path,
    configfiles: Sequence[str] | None,
    overrides: Mapping[str, Any] | None,
    report_only: bool = False,
) -> list[str]:
    """Step 1's second half: code, study and results/ of the checkout against the archive. A difference of code or
    study refuses the archive, or, `report_only`, is returned (the list of them) for the record."""
    differences = []
    difference = code_difference(manifest["code"], code_identity(study_dir), advice=not report_only)
    if difference and not report_only:
        raise ArchiveError(f"{difference} (or restore it with --report-only to write its report with this code)")
    differences += [difference] if difference else []
    study = manifest["study"]
    if report_only and not configfiles:
        files, here = [ARCHIVED_STUDY], _archived_study_check(study_dir, study["config"])
    else:
        files = list(configfiles) if configfiles else list(study["configfiles"])
        given = dict(overrides) if overrides is not None else dict(study.get("overrides") or {})
        try:
            here = resolve_in(study_dir, files, given)
        except ConfigError as error:
            raise ArchiveError(f"the study {' + '.join(files)} does not resolve here: {error}") from None
    difference = study_difference(study["config"], here.config)
    if difference and not report_only:
        raise ArchiveError(f"{' + '.join(files)}: {difference}")
    differences += [f"{' + '.join(files)}: {difference}"] if difference else []
    conflict = _conflict(study_dir, list(manifest["files"]))
    if conflict:
        raise ArchiveError(conflict)
    return differences


def _archived_study_check(study_dir: Path, config: Mapping[str, Any]) -> Any:
    """The archive's effective study resolved by this checkout's code, from a copy of it in a temporary folder
    outside the checkout (nothing is written there before every check has passed)."""
    with tempfile.TemporaryDirectory(prefix="fwbench-study-") as scratch:
        study_file = Path(scratch, "study.yaml")
        study_file.write_text(yaml.safe_dump(dict(config), sort_keys=False))
        try:
            return resolve_in(study_dir, [str(study_file)], {})
        except ConfigError as error:
            raise ArchiveError(f"the archive's study does not resolve here: {error}") from None


def _newest_code_mtime(study_dir: Path) -> float:
    """The newest modification time of the checkout's code and study files: restored results must be newer."""
    newest = 0.0
    for name in (*CODE_DIRS, *STUDY_FILES):
        root = study_dir / name
        if root.is_dir():
            newest = max([newest, *(p.stat().st_mtime for p in root.rglob("*") if p.is_file())])
    return newest


def restore(
    archive: str | os.PathLike,
    study_dir: str | os.PathLike = ".",
    configfiles: Sequence[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    report_only: bool = False,
) -> dict[str, Any]:
    """Check the archive against `study_dir` and restore it there (steps 1-3), or, `report_only`, only what was
    measured (the module's docstring); returns the restore record."""
    archive, study_dir = Path(archive).resolve(), Path(study_dir).resolve()
    manifest = read_checked(archive)
    differences = check_target(manifest, study_dir, configfiles, overrides, report_only)
    files = manifest["files"]
    left_out = sorted(n for n in files if report_only and is_report_rule((files[n].get("snakemake") or {}).get("rule")))
    if report_only and not left_out:
        raise ArchiveError(
            f"{archive}: no file of it names a report rule in its Snakemake record, so a report-only restore cannot "
            "tell what this checkout writes again"
        )
    rewritten = set(left_out)
    kept = [name for name in files if name not in rewritten]
    staging = study_dir / f".fwbench-restore-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        _stage(archive, manifest, staging)
        measured_time = _measured_time(staging)
        order = _made_from_order(files, kept) if report_only else _archived_order(files, kept)
        _move_into_place(manifest, staging, study_dir, order, whole_records=not report_only)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if report_only and not configfiles:
        archived_study = yaml.safe_dump(dict(manifest["study"]["config"]), sort_keys=False)
        atomic_write_text(study_dir / ARCHIVED_STUDY, archived_study)
    record = {
        "archive": str(archive),
        "archive_sha256": sha256_file(archive),
        "restored_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "manifest": {key: value for key, value in manifest.items() if key != "files"},
        "files": len(kept),
        "measured_time": measured_time,
        "report_only": {"left_out": len(left_out), "differences": differences} if report_only else None,
    }
    atomic_write_json(study_dir / RESULTS / RESTORE_RECORD, record)
    return record


def _archived_order(files: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """`names` in the order they were made where they were measured (their archived modification times)."""
    return sorted(names, key=lambda name: (files[name]["mtime"], name))


def _made_from_order(files: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """`names` with each measuring rule's files after those of the rules it reads (rule_kinds.MEASURING_STAGES),
    otherwise in the archived order. A report-only restore's files are judged by modification time alone, and an
    archive's times need not follow the data's flow (a study run in two commands rewrote its dataset record after
    the weights were written from it), which would make Snakemake measure again."""

    def stage(name: str) -> int:
        return measuring_stage((files[name].get("snakemake") or {}).get("rule"))

    return sorted(names, key=lambda name: (stage(name), files[name]["mtime"], name))


def _measured_time(root: Path) -> dict[str, Any] | None:
    """The study's time where it was measured, from the time table it was archived with (read from the staged
    archive, before the paper's jobs here write that table again: a GPU host's study written up on a laptop, the
    write-up's time is not the study's)."""
    path = root / RESULTS / "tables" / "study_time.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    keys = ("started_at", "wall_s", "runs", "jobs", "processes", "timed_share", "latex_measured")
    return {key: summary.get(key) for key in keys} if isinstance(summary, dict) else None


def _stage(archive: Path, manifest: Mapping[str, Any], staging: Path) -> None:
    """Every file of a checked archive read again into `staging`, each checked against its digest again."""
    with _open(archive) as tar:
        for member in _members(tar):
            if member.name == MANIFEST or member.isdir():
                continue
            target = staging / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if _hash(tar, member, copy_to=target) != manifest["files"][member.name]["sha256"]:
                raise ArchiveError(f"member {member.name!r} changed while it was restored: nothing restored")


def extract_results(archive: str | os.PathLike, into: str | os.PathLike) -> Path:
    """An archive's results for reading only (`fwbench compare` of runs kept as archives): checked as a restore checks
    them (step 1's first half) and written under `into`, an empty directory; no code or study check, since nothing
    is built from them. Returns the results directory."""
    archive, into = Path(archive).resolve(), Path(into)
    manifest = read_checked(archive)
    into.mkdir(parents=True, exist_ok=True)
    if any(into.iterdir()):
        raise ArchiveError(f"{into}: not an empty directory to extract {archive.name} into")
    _stage(archive, manifest, into)
    return into / RESULTS


def _move_into_place(
    manifest: Mapping[str, Any], staging: Path, study_dir: Path, names: Sequence[str], whole_records: bool = True
) -> None:
    """Step 2's second half: each of `names` to its place, with modification times after the checkout's newest code
    file in their order, and Snakemake's record of it (without what the other code ran, unless `whole_records`)."""
    files = manifest["files"]
    order = list(names)
    start = max(time.time(), _newest_code_mtime(study_dir)) + 1.0
    for rank, name in enumerate(order):
        target = study_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, target)
        stamp = start + rank * 1e-3
        os.utime(target, (stamp, stamp))
        snakemake_incomplete_path(study_dir, name).unlink(missing_ok=True)
        record = files[name].get("snakemake")
        if record is not None and not whole_records:
            record = {key: value for key, value in record.items() if key not in OTHER_CODES_RECORD}
        if record is not None:
            atomic_write_text(snakemake_record_path(study_dir, name), json.dumps(record))
