"""A study survives being killed and names a corrupt cell: stale locks of a dead run, canonical params, bad cell files,
and end to end a SIGKILLed study resumed with the README's command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from fwbench.analysis.common.cells import CellFileError, cells_by_path, load_cells
from fwbench.io import atomic_write_json
from fwbench.results import load_result
from fwbench.study.params import canonical
from fwbench.workflow import state as workflow_state
from tests import background
from tests.conftest import STUDY_ARGS, TINY_CONFIG, copy_workflow, write_study
from tests.test_analysis import _result

# --- canonical params -------------------------------------------------------------------------------------------


def test_canonical_params_do_not_depend_on_key_order_or_spelling():
    a = {"inference": {"min_seconds": 0.0, "batch_sizes": [1, 2]}, "seed": 3, "splits": ("train", "val")}
    b = {"seed": 3.0, "splits": ["train", "val"], "inference": {"batch_sizes": [1.0, 2], "min_seconds": 0}}
    assert repr(canonical(a)) == repr(canonical(b))
    assert list(canonical(b)) == ["inference", "seed", "splits"]
    # Lists keep their order (frameworks order the outputs), non-integral floats and bools stay what they are.
    assert canonical({"frameworks": ["torch", "jax"], "lr": 0.001, "on": True, "n": None}) == {
        "frameworks": ["torch", "jax"],
        "lr": 0.001,
        "n": None,
        "on": True,
    }
    assert canonical(True) is True and canonical(float("inf")) == float("inf")
    assert repr(canonical({"x": 1.5})) != repr(canonical({"x": 1}))


# --- stale locks -------------------------------------------------------------------------------------------------

HOST, BOOT = "node1", "boot-a"


def _judge(record, alive=None):
    """stale_owner with a fake process table: {pid: start_time} of the processes that exist."""
    table = alive or {}
    return workflow_state.stale_owner(record, host=HOST, current_boot_id=BOOT, start_time_of=table.get)


def test_stale_owner_decides_only_for_a_dead_run_of_this_host():
    record = {"pid": 4242, "start_time": 1000, "boot_id": BOOT, "host": HOST}
    assert "no longer running" in _judge(record, alive={})
    assert "another process" in _judge(record, alive={4242: 2000})  # pid reused
    assert _judge(record, alive={4242: 1000}) is None  # the run is alive
    assert "booted" in _judge({**record, "boot_id": "boot-b"}, alive={4242: 1000})
    assert _judge({**record, "host": "node2"}, alive={}) is None  # another host's run: cannot tell
    assert _judge(None) is None and _judge({}) is None and _judge("garbage") is None
    assert _judge({**record, "start_time": None}) is None
    assert _judge({**record, "pid": "4242"}) is None


def _locks(directory: Path) -> Path:
    locks = directory / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("results/a.json\n")
    (locks / "0.output.lock").write_text("results/b.json\n")
    return locks


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_clear_stale_locks_removes_only_the_locks_of_a_dead_owner(tmp_path):
    mine = workflow_state.owner_record()
    assert mine["pid"] == os.getpid() and isinstance(mine["start_time"], int) and mine["host"] == socket.gethostname()

    locks = _locks(tmp_path / "no-record")
    assert workflow_state.clear_stale_locks(tmp_path / "no-record") is None, "locks without a record are kept"
    assert len(list(locks.iterdir())) == 2

    live = tmp_path / "live"
    locks = _locks(live)
    atomic_write_json(live / workflow_state.OWNER_FILE, mine)
    assert workflow_state.clear_stale_locks(live) is None, "the locks of a live run are kept"
    assert len(list(locks.iterdir())) == 2 and (live / workflow_state.OWNER_FILE).exists()

    other = tmp_path / "other-host"
    locks = _locks(other)
    atomic_write_json(other / workflow_state.OWNER_FILE, {**mine, "pid": _dead_pid(), "host": "elsewhere"})
    assert workflow_state.clear_stale_locks(other) is None
    assert len(list(locks.iterdir())) == 2

    dead = tmp_path / "dead"
    locks = _locks(dead)
    pid = _dead_pid()
    atomic_write_json(dead / workflow_state.OWNER_FILE, {**mine, "pid": pid})
    message = workflow_state.clear_stale_locks(dead)
    assert message.startswith("fwbench: removed 2 stale Snakemake lock(s)") and f"pid {pid}" in message
    assert list(locks.iterdir()) == [] and list(dead.iterdir()) == [locks], "the record goes with the locks"


def test_owner_record_is_written_and_removed_by_its_own_run(tmp_path):
    workflow_state.write_owner(tmp_path)
    record = json.loads((tmp_path / workflow_state.OWNER_FILE).read_text())
    assert record == workflow_state.owner_record()
    atomic_write_json(tmp_path / workflow_state.OWNER_FILE, {**record, "pid": record["pid"] + 1})
    workflow_state.remove_owner(tmp_path)
    assert (tmp_path / workflow_state.OWNER_FILE).exists(), "another run's record is not ours to remove"
    workflow_state.write_owner(tmp_path)
    workflow_state.remove_owner(tmp_path)
    assert not (tmp_path / workflow_state.OWNER_FILE).exists()


def test_list_changes_params_lists_only_changed_outputs():
    from snakemake.persistence import NO_PARAMS_CHANGE, ParamsChange

    workflow_state.fix_params_change_listing()
    unchanged = NO_PARAMS_CHANGE | ParamsChange(files={"results/cell.json"})
    assert not unchanged and list(unchanged) == []
    changed = ParamsChange(only_old={"1"}, only_new={"2"}, files={"results/cell.json"})
    assert list(NO_PARAMS_CHANGE | changed) == ["results/cell.json"]


# --- corrupt or foreign cell files -------------------------------------------------------------------------------


def _cell_file(root: Path, framework: str = "jax", batch: int = 1) -> Path:
    mode = {"torch": "eager", "jax": "jit"}[framework]
    path = root / "results" / "cells" / "inference" / framework / mode / "small_cnn" / "fp32" / f"bs{batch}.json"
    atomic_write_json(path, _result(framework, batch, 100.0))
    return path


def test_load_cells_names_a_corrupt_or_foreign_file_and_the_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good, other = _cell_file(tmp_path, "torch"), _cell_file(tmp_path, "jax")
    assert [r["cell"]["framework"] for r in load_cells([good, other])] == ["torch", "jax"]
    assert [p for p, _ in cells_by_path([good, other])] == [good, other]

    relative = "results/cells/inference/jax/jit/small_cnn/fp32/bs1.json"
    other.write_bytes(good.read_bytes()[:100])  # truncated
    with pytest.raises(CellFileError) as caught:
        load_cells([good, Path(relative)])
    message = str(caught.value)
    assert message.startswith(f"{relative} is not a valid cell result (not valid JSON: ") and "\n" not in message
    assert message.endswith(
        f"): regenerate it with: .venv/bin/snakemake --cores all --resources gpu=1 --forcerun {relative}"
    )
    assert caught.value.terminal_message == f"fwbench: {caught.value}"
    with pytest.raises(CellFileError, match=f"^{relative} is not a valid cell result"):
        load_cells([other])  # absolute paths are shown relative to the workflow's directory

    other.write_text(json.dumps({"status": "ok"}))  # not a cell result
    with pytest.raises(CellFileError, match="cell result invalid at <top level>"):
        load_cells([other])
    shutil.copy(good, other)  # another cell's result
    with pytest.raises(CellFileError, match="it holds the result of cell inference/torch/eager/small_cnn/fp32/bs1"):
        load_cells([other])

    broken = _cell_file(tmp_path, "torch", 2)
    broken.write_bytes(b"\xff\xfe")
    with pytest.raises(CellFileError) as caught:
        load_cells([good, other, broken])
    message = str(caught.value)
    assert message.startswith("2 files are not valid cell results: ") and message.endswith(
        f"--forcerun {relative} results/cells/inference/torch/eager/small_cnn/fp32/bs2.json"
    )


def test_a_script_ends_with_the_one_line_not_a_traceback(tmp_path):
    from fwbench.workflow.logs import redirect_to

    log = tmp_path / "rule.log"
    with pytest.raises(SystemExit) as caught, redirect_to(log):
        raise CellFileError([("results/x.json", "not valid JSON")])
    assert str(caught.value.code).startswith("fwbench: results/x.json is not a valid cell result (not valid JSON)")
    assert "Traceback" in log.read_text()


# --- end to end: a SIGKILLed study resumes with the same command ----------------------------------------------------


def _descendants(root: int) -> set[int]:
    """Every process below `root`, by the ppid links in /proc (the measuring children run in sessions of their own,
    so the process group alone does not reach them)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pids, sig) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _kill_like_a_node_failure(proc: subprocess.Popen) -> None:
    """SIGKILL Snakemake's process group and every descendant: stop them all first, so none starts a process or
    notices its parent's death while the tree is being collected."""
    tree = {proc.pid}
    while True:
        _signal(tree, signal.SIGSTOP)
        grown = tree | _descendants(proc.pid)
        if grown == tree:
            break
        tree = grown
    os.killpg(proc.pid, signal.SIGKILL)
    _signal(tree, signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.05)


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()[0]


def _command(venv_bin) -> list[str]:
    # the README's command, with the test's study file
    return [str(venv_bin / "snakemake"), "--cores", "all", "--resources", "gpu=1", *STUDY_ARGS]


def _run(root, venv_bin, *extra, timeout=900, env=None) -> subprocess.CompletedProcess:
    env = env or {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [*_command(venv_bin), *extra], cwd=root, capture_output=True, text=True, timeout=timeout, env=env
    )


def _cell_times(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in sorted((root / "results" / "cells").rglob("*.json"))}


@background.study("killed_study")
def _killed_study(root, venv_bin, env):
    """A study (inference + training) SIGKILLed while a training cell is between epoch checkpoints, with at least
    one other cell finished, then rerun with the same command; returns what the tests check."""
    copy_workflow(root)
    config = {
        **TINY_CONFIG,
        "suites": ["inference", "training"],
        "dataset": {**TINY_CONFIG["dataset"], "train_size": 128},
        "inference": {**TINY_CONFIG["inference"], "batch_sizes": [1]},
        # 32 steps per epoch and 5 epochs: a training cell spends ~1 s or more between its first checkpoint and its
        # result (JAX is the fast one here), long enough to be caught there by polling every 20 ms.
        "training": {"batch_sizes": [4], "epochs": 5, "lr": 0.001},
    }
    write_study(root, config)
    log = (root / "first-run.log").open("w")
    proc = subprocess.Popen(
        _command(venv_bin), cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    state = root / "results" / "state" / "training"
    cells = root / "results" / "cells"
    interrupted = None
    deadline = time.monotonic() + 900
    try:
        while interrupted is None:
            assert proc.poll() is None, (
                "the study ended before a training cell could be interrupted: "
                + (root / "first-run.log").read_text()[-3000:]
            )
            assert time.monotonic() < deadline, "no training cell checkpointed in time"
            for progress in state.glob("*/*/*/*/*/progress.json"):  # framework/mode/model/precision/bs
                cell = cells / "training" / progress.parent.relative_to(state).with_suffix(".json")
                finished = [p for p in cells.rglob("*.json") if p != cell]
                if not cell.exists() and finished:
                    _kill_like_a_node_failure(proc)
                    interrupted = cell
                    break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            _kill_like_a_node_failure(proc)
        log.close()
    if interrupted.exists():  # it finished in the instant before the kill: rerun the test rather than pass it
        pytest.fail(f"{interrupted} was written before the kill landed; the window between checkpoints is too short")
    progress = json.loads(
        (state / interrupted.relative_to(cells / "training").with_suffix("") / "progress.json").read_text()
    )
    before = _cell_times(root)
    rerun = _run(root, venv_bin, env=env)
    return {
        "root": root,
        "interrupted": interrupted,
        "epochs_done": len(progress["epochs"]),
        "before": before,
        "rerun": rerun,
    }


@pytest.fixture(scope="module")
def killed_study(background_studies):
    return background_studies.result(_killed_study)


@pytest.mark.slow
def test_a_killed_study_resumes_with_the_same_command(killed_study):
    root, rerun = killed_study["root"], killed_study["rerun"]
    output = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, output[-5000:]
    assert "fwbench: removed 2 stale Snakemake lock(s)" in output and "no longer running" in output
    assert not (root / ".snakemake" / workflow_state.OWNER_FILE).exists()

    after = _cell_times(root)
    assert all(load_result(p)["status"] == "ok" for p in after), "every cell is a valid, successful result"
    assert len(after) == 2 + 2 and killed_study["interrupted"] in after
    before = killed_study["before"]
    assert before and {p: after[p] for p in before} == before, "cells finished before the kill were not rerun"

    metrics = load_result(killed_study["interrupted"])["metrics"]
    assert metrics["resumed_from_epoch"] == killed_study["epochs_done"] >= 1
    assert metrics["flags"]["resumed"] and len(metrics["epochs"]) == 5
    assert [e["resumed"] for e in metrics["epochs"]].index(True) == killed_study["epochs_done"]
    assert (root / "results" / "report" / "paper.pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.slow
def test_a_corrupt_cell_stops_the_study_naming_the_file_and_the_command(killed_study, venv_bin):
    root = killed_study["root"]
    assert killed_study["rerun"].returncode == 0
    relative = "results/cells/inference/jax/jit/small_cnn/fp32/bs1.json"
    cell = root / relative
    cell.write_bytes(cell.read_bytes()[:200])  # a truncated file, newer than everything aggregated from it
    failed = _run(root, venv_bin)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    lines = [line for line in output.splitlines() if line.startswith("fwbench: ")]
    assert len(lines) == 1, output[-5000:]
    assert lines[0].startswith(f"fwbench: {relative} is not a valid cell result (not valid JSON: ")
    regenerate = f"regenerate it with: .venv/bin/snakemake --cores all --resources gpu=1 --forcerun {relative}"
    assert lines[0].endswith(regenerate)
    assert "Traceback" not in output, "one line, not a traceback"
    locks = root / ".snakemake" / "locks"
    assert not locks.exists() or not any(locks.iterdir()), "a failed run releases its locks"

    # The command it names reruns that cell's comparison group and everything downstream of it, and nothing else.
    plan = _run(root, venv_bin, "-n", "--forcerun", relative)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    stats = (plan.stdout + plan.stderr).split("Job stats:", 1)[1].split("\n\n", 1)[0]
    planned = dict(line.split() for line in stats.splitlines()[2:] if line.split() and line.split()[0] != "total")
    assert planned.get("inference_group") == "1" and "training_cell" not in planned and "prepare_dataset" not in planned
    assert planned.get("paper") == "1"
