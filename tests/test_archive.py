"""fwbench archive and fwbench restore on a study directory of their own (fwbench.workflow.archive, .restore): what
goes in and what stays out, a round trip, and every archive that must be refused whole, before anything is written.
The round trip of a real study, restored where no framework can be imported, is in tests/test_restored_study.py."""

from __future__ import annotations

import io
import json
import lzma
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from fwbench.cli import main
from fwbench.study.config import validate_config
from fwbench.study.grid import cells
from fwbench.workflow.archive import MANIFEST, ArchiveError, snakemake_record_path, write_archive
from fwbench.workflow.requirements import RESTORE_RECORD
from fwbench.workflow.restore import restore
from tests.conftest import STUDY_FILE, TINY_CONFIG, copy_workflow, write_study

CONFIG = {**TINY_CONFIG, "suites": ["inference"]}


def _study(root: Path) -> Path:
    """A checkout that ran the tiny study: every cell's result (stand-ins), tables, the shards, weights and GPU
    slots an archive leaves out, and Snakemake's record of one cell."""
    copy_workflow(root)
    write_study(root, CONFIG)
    results = root / "results"
    for cell in cells(validate_config(CONFIG)):
        path = root / cell.path("results")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cell": cell.label(), "status": "ok"}))
    for name, text in {
        "tables/inference.csv": "framework,img_s\ntorch,1.0\n",
        "tables/study_time.json": json.dumps({"started_at": 1.0, "wall_s": 665.7, "runs": 2, "jobs": 27}),
        "device.json": json.dumps({"platform": "cpu", "gpus": []}),
        "logs/device_check.log": "ok\n",
        "data/manifest.json": "{}",
        "data/train-00000-images.npy": "shard",
        "weights/small_cnn.npz": "weights",
        "weights/small_cnn.json": "{}",
        "slots/vm/0.lock": "",
        "state/training/x.ckpt": "state",
    }.items():
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_text(text)
    first = str(cells(validate_config(CONFIG))[0].path("results"))
    record = snakemake_record_path(root, first)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"rule": "inference_group", "params": ["'x'"], "record_format_version": 6}))
    return root


@pytest.fixture(scope="module")
def archived(tmp_path_factory) -> tuple[Path, Path]:
    """(the study's checkout, its archive), shared by the module's tests: none changes them."""
    tmp_path = tmp_path_factory.mktemp("archived")
    study = _study(tmp_path / "measured")
    out = tmp_path / "study.tar.xz"
    write_archive(study, out, [STUDY_FILE])
    return study, out


@pytest.fixture(scope="module")
def untouched(tmp_path_factory) -> Path:
    """A fresh checkout of the same study that refused restores share: each checks that nothing was written."""
    return _fresh(tmp_path_factory.mktemp("untouched"))


def _fresh(tmp_path: Path, name: str = "fresh") -> Path:
    root = tmp_path / name
    copy_workflow(root)
    write_study(root, CONFIG)
    return root


def _written(root: Path) -> list[str]:
    """What a refused restore must not have written: anything under results/ or .snakemake/."""
    return sorted(str(p.relative_to(root)) for d in ("results", ".snakemake") for p in (root / d).rglob("*"))


def test_the_archive_holds_the_results_and_leaves_out_what_the_workflow_writes_again(archived):
    study, out = archived
    with tarfile.open(out) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile(MANIFEST))
    assert names[0] == MANIFEST
    cell_names = {str(c.path("results")) for c in cells(validate_config(CONFIG))}
    assert cell_names <= set(names)
    assert {"results/tables/inference.csv", "results/device.json", "results/logs/device_check.log"} <= set(names)
    assert {"results/data/manifest.json", "results/weights/small_cnn.json"} <= set(names)
    for left_out in ("results/data/train-00000-images.npy", "results/weights/small_cnn.npz", "results/slots/vm/0.lock"):
        assert left_out not in names
    assert not any(name.startswith("results/state/") for name in names)
    assert set(manifest["left_out"]) == {
        "results/data/*.npy",
        "results/weights/*.npz",
        "results/slots/*",
        "results/state/*",
    }
    assert manifest["study"]["configfiles"] == [STUDY_FILE]
    assert manifest["study"]["config"]["models"] == ["small_cnn"]
    assert manifest["code"]["files"]["workflow/Snakefile"] and manifest["code"]["files"]["fwbench/cli.py"]
    first = sorted(cell_names)[0]
    assert {manifest["files"][n]["snakemake"] is not None for n in cell_names} == {True, False}
    assert manifest["files"]["results/tables/inference.csv"]["size"] == len("framework,img_s\ntorch,1.0\n")
    assert first in manifest["files"]


def test_a_study_with_a_cell_missing_is_not_archived(tmp_path):
    """(A study directory of its own: a cell is removed.)"""
    study = _study(tmp_path / "measured")
    missing = cells(validate_config(CONFIG))[-1].path("results")
    (study / missing).unlink()
    with pytest.raises(ArchiveError, match=rf"1 cell\(s\) of the study have no result .*{missing}"):
        write_archive(study, tmp_path / "out.tar.xz", [STUDY_FILE])
    assert not (tmp_path / "out.tar.xz").exists()


def test_restore_puts_every_file_back_newer_than_the_code_in_the_order_it_was_made(archived, tmp_path):
    study, out = archived
    fresh = _fresh(tmp_path)
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile(MANIFEST))
    record = restore(out, fresh)
    for name in manifest["files"]:
        assert (fresh / name).read_bytes() == (study / name).read_bytes(), name
    newest_code = max(p.stat().st_mtime for d in ("workflow", "config", "report") for p in (fresh / d).rglob("*"))
    restored = {name: (fresh / name).stat().st_mtime for name in manifest["files"]}
    assert min(restored.values()) > newest_code
    by_original = sorted(manifest["files"], key=lambda n: (manifest["files"][n]["mtime"], n))
    assert [restored[n] for n in by_original] == sorted(restored.values())
    first = next(n for n in manifest["files"] if manifest["files"][n]["snakemake"])
    assert json.loads(snakemake_record_path(fresh, first).read_text())["rule"] == "inference_group"
    saved = json.loads((fresh / "results" / RESTORE_RECORD).read_text())
    assert saved["archive"] == str(out) and record["files"] == len(manifest["files"])
    assert not (fresh / "results" / "weights" / "small_cnn.npz").exists()


def test_the_commands_print_the_size_and_what_to_run(archived, tmp_path, capsys):
    study, _ = archived
    out = tmp_path / "again.tar.xz"
    assert main(["archive", str(study), str(out), "--config", STUDY_FILE]) == 0
    printed = capsys.readouterr().out
    assert f"{out}: " in printed and " kB (" in printed and "4 cells" in printed
    assert "left out results/weights/*.npz: starting weights" in printed
    fresh = _fresh(tmp_path)
    assert main(["restore", str(out), "--into", str(fresh)]) == 0
    printed = capsys.readouterr().out
    assert "snakemake --cores all --resources gpu=1 --configfile study.yaml" in printed


def _rewrite(out: Path, tmp_path: Path, change) -> Path:
    """A copy of the archive with its members passed through `change(members) -> members` ((TarInfo, bytes) pairs)."""
    with tarfile.open(out) as tar:
        members = [(m, tar.extractfile(m).read() if m.isreg() else b"") for m in tar.getmembers()]
    bad = tmp_path / "bad.tar.xz"
    with tarfile.open(bad, "w:xz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in change(members):
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return bad


def _extra(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"x", linkname: str = ""):
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, len(data) if kind == tarfile.REGTYPE else 0, linkname
    return info, data


def _tampered_manifest(members, **changes):
    info, data = members[0]
    manifest = json.loads(data)
    for dotted, value in changes.items():
        *path, key = dotted.split(".")
        target = manifest
        for part in path:
            target = target[part]
        target[key] = value
    data = json.dumps(manifest).encode()
    info.size = len(data)
    return [(info, data), *members[1:]]


BAD_MEMBERS = {
    "absolute": (lambda m: [*m, _extra("/etc/cron.d/evil")], "'/etc/cron.d/evil' is an absolute path"),
    "dotdot": (lambda m: [*m, _extra("results/../../evil")], "'results/../../evil' is a path with '..'"),
    "symlink": (lambda m: [*m, _extra("results/link", tarfile.SYMTYPE, linkname="/etc")], r"is a link \(to /etc\)"),
    "hardlink": (lambda m: [*m, _extra("results/hard", tarfile.LNKTYPE, linkname="results/device.json")], "a link"),
    "device": (lambda m: [*m, _extra("results/dev", tarfile.CHRTYPE)], "'results/dev' is a device file or FIFO"),
    "fifo": (lambda m: [*m, _extra("results/fifo", tarfile.FIFOTYPE)], "'results/fifo' is a device file or FIFO"),
    "outside": (lambda m: [*m, _extra("workflow/Snakefile")], "'workflow/Snakefile' is outside results/"),
    "twice": (lambda m: [*m, m[-1]], "appears twice"),
    "unlisted": (lambda m: [*m, _extra("results/cells/extra.json")], "not in the archive's manifest"),
    "tampered": (
        lambda m: [*m[:-1], (m[-1][0], b"X" + m[-1][1][1:])],
        "does not match its manifest entry",
    ),
    "missing": (lambda m: m[:-1], r"1 file\(s\) of its manifest are missing"),
    "other commit": (
        lambda m: _tampered_manifest(m, **{"code.commit": "0" * 40, "code.files.workflow/Snakefile": "0" * 64}),
        "the archive was made at commit 000000000000 .* the code differs: workflow/Snakefile",
    ),
    "other code": (
        lambda m: _tampered_manifest(m, **{"code.files.workflow/Snakefile": "0" * 64}),
        "the code differs from the archive's.*workflow/Snakefile \\(changed\\)",
    ),
    "other study": (
        lambda m: _tampered_manifest(m, **{"study.config.precisions": ["bf16"]}),
        'the study differs from the archive\'s at precisions: \\["fp32"\\] here, \\["bf16"\\] there',
    ),
}


@pytest.mark.parametrize("case", list(BAD_MEMBERS))
def test_an_archive_that_would_write_outside_results_or_does_not_match_is_refused_whole(
    archived, untouched, tmp_path, case
):
    _, out = archived
    change, message = BAD_MEMBERS[case]
    bad = _rewrite(out, tmp_path, change)
    with pytest.raises(ArchiveError, match=message):
        restore(bad, untouched)
    assert _written(untouched) == []
    assert not (tmp_path / "evil").exists() and not Path("/etc/cron.d/evil").exists()


def test_an_archive_whose_commit_lags_its_identical_code_is_restored(archived, tmp_path):
    """A GPU machine's copy of a checkout can carry git metadata older than its files (the first GPU study's did):
    the files' digests decide, not the commit's name."""
    _, out = archived
    lagging = _rewrite(out, tmp_path, lambda m: _tampered_manifest(m, **{"code.commit": "0" * 40}))
    fresh = _fresh(tmp_path)
    record = restore(lagging, fresh)
    assert record["files"] > 0 and (fresh / "results" / "device.json").exists()


def test_the_restore_keeps_the_studys_time_where_it_was_measured(archived, tmp_path):
    """The paper's jobs after a restore write the time table again, on another machine and later: the record keeps
    the archived one's figures (benchmarks/readme_results.py reports them for a restored run)."""
    _, out = archived
    record = restore(out, _fresh(tmp_path))
    assert record["measured_time"]["wall_s"] == 665.7 and record["measured_time"]["runs"] == 2


@pytest.mark.parametrize("keep", [0.2, 0.6, 0.95])
def test_a_truncated_archive_is_refused_naming_where_it_ends(archived, untouched, tmp_path, keep):
    _, out = archived
    data = out.read_bytes()
    cut = tmp_path / "cut.tar.xz"
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ArchiveError, match=r"truncated or corrupt at member '[^']+'|not a readable archive"):
        restore(cut, untouched)
    assert _written(untouched) == []


def test_results_with_cells_of_their_own_are_never_mixed_with_an_archive(archived, tmp_path):
    _, out = archived
    fresh = _fresh(tmp_path)
    own = fresh / "results" / "cells" / "inference" / "own.json"
    own.parent.mkdir(parents=True)
    own.write_text("{}")
    with pytest.raises(ArchiveError, match=r"already holds 1 cell result\(s\).*never mixed"):
        restore(out, fresh)
    assert _written(fresh) == ["results/cells", "results/cells/inference", "results/cells/inference/own.json"]


def test_a_changed_study_file_is_refused_with_the_key_that_differs(archived, tmp_path):
    _, out = archived
    fresh = _fresh(tmp_path)  # its own: the study file changes
    study = yaml.safe_load((fresh / STUDY_FILE).read_text())
    study["inference"]["batch_sizes"] = [1, 2, 4]
    (fresh / STUDY_FILE).write_text(yaml.safe_dump(study))
    with pytest.raises(ArchiveError, match=r"study.yaml: the study differs .* at inference.batch_sizes: \[1, 2, 4\]"):
        restore(out, fresh)
    assert _written(fresh) == []


def test_a_file_that_is_not_an_archive_is_named(untouched, tmp_path):
    bogus = tmp_path / "notes.tar.xz"
    bogus.write_bytes(lzma.compress(b"not a tar"))
    with pytest.raises(ArchiveError, match="notes.tar.xz"):
        restore(bogus, untouched)
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tar:
        info, data = _extra("results/x")
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ArchiveError, match="its first member is 'results/x'"):
        restore(plain, untouched)
    assert _written(untouched) == []


def test_the_metadata_path_is_snakemakes_own(tmp_path):
    """Restored records must be where Snakemake's file persistence reads them, long names included."""
    from snakemake.persistence.file import FilePersistence

    persistence = FilePersistence.__new__(FilePersistence)
    persistence._max_len = None
    subject = tmp_path / ".snakemake" / "metadata"
    subject.mkdir(parents=True)
    for key in ("results/tables/inference.csv", "results/cells/" + "long/" * 60 + "bs1.json"):
        assert snakemake_record_path(tmp_path, key) == Path(persistence._record_path(str(subject), key))


def test_a_restored_copy_cannot_be_restored_over(archived, tmp_path):
    _, out = archived
    fresh = _fresh(tmp_path)
    restore(out, fresh)
    shutil.rmtree(fresh / "results" / "cells")
    with pytest.raises(ArchiveError, match="exists and the archive holds it too"):
        restore(out, fresh)
    os.remove(fresh / "results" / RESTORE_RECORD)


def test_an_archive_is_read_as_its_results_for_comparing_runs(archived, tmp_path):
    """`fwbench compare` takes archives (runs kept in docs/runs/) as results directories: extracted for reading,
    with the same checks as a restore but no code or study to match."""
    from fwbench.workflow.restore import extract_results

    study, out = archived
    results = extract_results(out, tmp_path / "a")
    assert results == tmp_path / "a" / "results"
    assert (results / "tables" / "inference.csv").read_text() == (study / "results/tables/inference.csv").read_text()
    with pytest.raises(ArchiveError, match="not an empty directory"):
        extract_results(out, tmp_path / "a")


# --- fwbench restore --report-only: results measured by other code, written up by this checkout's -----------------

REPORT_FILES = {"results/tables/inference.csv": "aggregate_inference", "results/tables/study_time.json": "study_time"}


@pytest.fixture(scope="module")
def written_up(tmp_path_factory) -> tuple[Path, Path]:
    """(the study's checkout, an archive of it whose report files name the rules that wrote them, as the measuring
    checkout's Snakemake recorded, and whose code differs from this checkout's in workflow/Snakefile)."""
    tmp_path = tmp_path_factory.mktemp("written_up")
    study = _study(tmp_path / "measured")
    for name, rule in REPORT_FILES.items():
        record = snakemake_record_path(study, name)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"rule": rule, "record_format_version": 6}))
    out = tmp_path / "study.tar.xz"
    write_archive(study, out, [STUDY_FILE])
    other = _rewrite(out, tmp_path, lambda m: _tampered_manifest(m, **{"code.files.workflow/Snakefile": "0" * 64}))
    return study, other


def test_a_report_only_restore_keeps_what_was_measured_and_leaves_the_report_to_this_code(written_up, tmp_path):
    study, out = written_up
    refused = _fresh(tmp_path, "refused")
    with pytest.raises(ArchiveError, match=r"workflow/Snakefile \(changed\) \(or restore it with --report-only"):
        restore(out, refused)
    assert _written(refused) == []

    fresh = _fresh(tmp_path)
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile(MANIFEST))
    record = restore(out, fresh, report_only=True)
    measured = [name for name in manifest["files"] if name not in REPORT_FILES]
    for name in measured:
        assert (fresh / name).read_bytes() == (study / name).read_bytes(), name
    assert not any((fresh / name).exists() for name in REPORT_FILES)
    # the measured files' Snakemake records keep their rule but not the other code's params, the study's time is kept
    first = next(
        n for n in manifest["files"] if (manifest["files"][n]["snakemake"] or {}).get("rule") == "inference_group"
    )
    kept = json.loads(snakemake_record_path(fresh, first).read_text())
    assert kept == {"rule": "inference_group", "record_format_version": 6}, kept
    assert record["measured_time"]["wall_s"] == 665.7 and record["files"] == len(measured)
    newest_code = max(p.stat().st_mtime for d in ("workflow", "config", "report") for p in (fresh / d).rglob("*"))
    assert min((fresh / name).stat().st_mtime for name in measured) > newest_code
    # the archive's own study, for the printed command; the code's difference recorded, with no advice to check out
    assert yaml.safe_load((fresh / "results" / "archived-study.yaml").read_text()) == manifest["study"]["config"]
    assert record["report_only"]["left_out"] == len(REPORT_FILES)
    [difference] = record["report_only"]["differences"]
    assert difference.startswith("the code differs from the archive's") and "workflow/Snakefile (changed)" in difference
    assert "check out" not in difference
    assert json.loads((fresh / "results" / RESTORE_RECORD).read_text())["report_only"]["left_out"] == 2


def test_a_report_only_restore_writes_each_measured_file_after_what_it_was_made_from():
    """Snakemake judges a report-only restore's files by time: an archive whose dataset record was rewritten after
    the weights were written from it (the first GPU study's, run in two commands) is put back in the data's order,
    logs last; a full restore keeps the archived order (its records' checksums judge it)."""
    from fwbench.workflow.restore import _archived_order, _made_from_order

    files = {
        "results/logs/cells/x.log": {"mtime": 1, "snakemake": None},
        "results/parity/torch.json": {"mtime": 2, "snakemake": {"rule": "parity_logits"}},
        "results/cells/inference/a.json": {"mtime": 3, "snakemake": {"rule": "inference_group"}},
        "results/weights/m.json": {"mtime": 4, "snakemake": {"rule": "init_weights"}},
        "results/data/manifest.json": {"mtime": 5, "snakemake": {"rule": "prepare_dataset"}},
    }
    assert _made_from_order(files, list(files)) == [
        "results/data/manifest.json",
        "results/weights/m.json",
        "results/cells/inference/a.json",
        "results/parity/torch.json",
        "results/logs/cells/x.log",
    ]
    assert _archived_order(files, list(files)) == list(files)


def test_a_report_only_restore_names_what_it_left_out_and_what_to_run(written_up, tmp_path, capsys):
    _, out = written_up
    fresh = _fresh(tmp_path)
    assert main(["restore", str(out), "--into", str(fresh), "--report-only"]) == 0
    printed = capsys.readouterr().out
    assert "snakemake --cores all --resources gpu=1 --configfile results/archived-study.yaml" in printed
    assert "2 files the report rules wrote are left out and written again by this checkout's code" in printed
    assert "  differs: the code differs from the archive's" in printed and "workflow/Snakefile (changed)" in printed


def test_a_report_only_restore_records_how_a_named_study_differs(written_up, tmp_path):
    _, out = written_up
    fresh = _fresh(tmp_path)
    study = yaml.safe_load((fresh / STUDY_FILE).read_text())
    study["inference"]["batch_sizes"] = [1, 2, 4]
    (fresh / STUDY_FILE).write_text(yaml.safe_dump(study))
    record = restore(out, fresh, [STUDY_FILE], report_only=True)
    assert any(
        "study.yaml: the study differs" in d and "inference.batch_sizes" in d
        for d in record["report_only"]["differences"]
    )
    assert not (fresh / "results" / "archived-study.yaml").exists()


def test_a_report_only_restore_that_cannot_tell_the_report_or_read_the_study_is_refused(archived, written_up, tmp_path):
    """An archive whose records name no report rule (here only a cell's), and one whose study this code rejects: each
    refused with its reason, nothing written (no scratch copy of the study left either)."""
    _, plain = archived
    fresh = _fresh(tmp_path)
    with pytest.raises(ArchiveError, match="no file of it names a report rule"):
        restore(plain, fresh, report_only=True)
    assert _written(fresh) == []
    _, out = written_up
    foreign = _rewrite(out, tmp_path, lambda m: _tampered_manifest(m, **{"study.config.precisions": "fp64"}))
    with pytest.raises(ArchiveError, match="the archive's study does not resolve here: .*precisions"):
        restore(foreign, fresh, report_only=True)
    assert _written(fresh) == [] and not list(fresh.glob(".fwbench-*"))


def _rule_names(text: str) -> set[str]:
    """The rules a rule file defines: `rule NAME:` and the comparison rules fwbench.study.grid.comparison_rules names
    (`comparison_rules(config, SUITE, RULE)`: RULE and RULE_primary)."""
    import re

    names = set(re.findall(r"^\s*rule (\w+):", text, flags=re.M))
    for rule in re.findall(r'comparison_rules\(\s*config,\s*"\w+",\s*"(\w+)"', text):
        names |= {rule, f"{rule}_primary"}
    return names


def test_every_rule_of_the_workflow_either_measures_or_writes_the_report():
    """A report-only restore leaves out what report rules wrote: a new rule must be placed in one of the sets
    (fwbench.workflow.rule_kinds) before an archive is written up around it; the sets do not overlap."""
    from fwbench.workflow.rule_kinds import MEASURING_RULES, REPORT_RULES, TARGET_RULES

    repo = Path(__file__).resolve().parents[1]
    found = set().union(
        *(
            _rule_names(p.read_text())
            for p in [repo / "workflow" / "Snakefile", *(repo / "workflow" / "rules").glob("*.smk")]
        )
    )
    known = MEASURING_RULES | REPORT_RULES | TARGET_RULES
    assert {"inference_group", "inference_group_primary", "paper", "training_cell"} <= found
    assert found - known == set() and not MEASURING_RULES & REPORT_RULES
    assert known - found == set(), "a rule the workflow no longer has"
    # negative control: a rule file with a rule in neither set is caught
    assert _rule_names("rule brand_new:\n    output: 'x'\n") - known == {"brand_new"}
