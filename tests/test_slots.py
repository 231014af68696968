"""GPU slots: with --resources gpu=N, concurrent cells get distinct GPUs and disjoint cores, a killed child frees
its slot, and every result records where it ran. Fake GPUs (a device record) and fake measuring children."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from fwbench.running import slots
from fwbench.running.devices import DeviceCheckError
from fwbench.running.runner import run_cell
from fwbench.study.grid import Cell

THREE_GPUS = {
    "platform": "cuda",
    "gpus": [
        {"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-fake-{i}", "compute_capability": "9.0"}
        for i in range(3)
    ],
    "environment": {},
    "frameworks": {},
}
CPU_RECORD = {"platform": "cpu", "gpus": [], "environment": {}, "frameworks": {}}
SETTINGS = {"timeout_s": 30}

# A measuring child that reports the GPU it was given and then fails, so that its output lands in the result.
PRINT_GPU = (
    sys.executable,
    "-c",
    "import os, sys, time; time.sleep(1.0); "
    "print('visible=' + os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>') + ' affinity=' "
    "+ ','.join(map(str, sorted(os.sched_getaffinity(0))))); sys.exit(3)",
)
KILL_SELF = (sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
HANG = (sys.executable, "-c", "import time; time.sleep(60)")


def _run(tmp_path, name, worker_cmd, record, count, settings=SETTINGS):
    return run_cell(
        Cell("inference", "torch", "small_cnn", "fp32", 1, 16),
        settings,
        data_dir=tmp_path / "data",
        weights_path=tmp_path / "w.npz",
        num_classes=4,
        threads=1,
        out_path=tmp_path / f"{name}.json",
        worker_cmd=worker_cmd,
        device_record=record,
        slot_dir=tmp_path / "slots",
        gpu_slots=count,
    )


@pytest.fixture
def six_cpus(monkeypatch):
    monkeypatch.setattr(slots, "available_cpus", lambda: [0, 1, 2, 3, 4, 5])


def test_concurrent_children_get_distinct_gpus_and_record_them(tmp_path, six_cpus):
    results = {}
    threads = [
        threading.Thread(target=lambda n=n: results.update({n: _run(tmp_path, f"c{n}", PRINT_GPU, THREE_GPUS, 3)}))
        for n in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    visible = sorted(r["stderr_tail"].split("visible=")[1].split()[0] for r in results.values())
    assert visible == ["GPU-fake-0", "GPU-fake-1", "GPU-fake-2"], "three concurrent cells, three GPUs"
    placements = sorted((r["provenance"]["placement"] for r in results.values()), key=lambda p: p["slot"])
    assert [p["gpu_index"] for p in placements] == [0, 1, 2]
    assert [p["gpu_uuid"] for p in placements] == ["GPU-fake-0", "GPU-fake-1", "GPU-fake-2"]
    assert [p["cpus"] for p in placements] == [[0, 1], [2, 3], [4, 5]], "each cell its own share of the cores"
    assert all(p["slots"] == 3 for p in placements)


def test_a_fourth_cell_waits_for_a_free_slot(tmp_path, six_cpus):
    held = [slots.acquire(THREE_GPUS, 3, tmp_path) for _ in range(3)]
    assert sorted(s.index for s in held) == [0, 1, 2]
    with pytest.raises(slots.SlotUnavailable, match="all 3 slots"):
        slots.acquire(THREE_GPUS, 3, tmp_path, wait_s=0.2)
    held[1].release()
    assert slots.acquire(THREE_GPUS, 3, tmp_path, wait_s=0.2).index == 1
    for slot in held:
        slot.release()


@pytest.mark.parametrize("worker,reason", [(KILL_SELF, "killed by SIGKILL"), (HANG, "timeout")])
def test_a_killed_child_frees_its_slot(tmp_path, six_cpus, worker, reason):
    result = _run(tmp_path, "killed", worker, THREE_GPUS, 1, {"timeout_s": 1.5})
    assert result["status"] == "failed" and reason in result["reason"]
    assert result["provenance"]["placement"]["gpu_index"] == 0
    slot = slots.acquire(THREE_GPUS, 1, tmp_path / "slots", wait_s=0)  # free at once
    slot.release()


def test_the_slot_stays_taken_while_the_child_lives(tmp_path, six_cpus):
    """The lock is shared with the child: a runner killed mid-cell leaves its GPU taken until the child ends."""
    slot = slots.acquire(THREE_GPUS, 1, tmp_path)
    import subprocess

    child = subprocess.Popen([*HANG], pass_fds=(slot.fd,))
    try:
        slot.release()  # as if the runner were gone
        with pytest.raises(slots.SlotUnavailable):
            slots.acquire(THREE_GPUS, 1, tmp_path, wait_s=0.2)
    finally:
        child.kill()
        child.wait()
    slots.acquire(THREE_GPUS, 1, tmp_path, wait_s=1.0).release()


def test_one_slot_changes_nothing_and_the_cpu_is_a_plain_lock(six_cpus):
    cpus, gpu, env = slots.plan(THREE_GPUS, 0, 1)
    assert cpus == [0, 1, 2, 3, 4, 5] and gpu["index"] == 0 and env == {}, "gpu=1: the child's environment as before"
    cpus, gpu, env = slots.plan(CPU_RECORD, 1, 2)
    assert cpus == [3, 4, 5] and gpu is None and "CUDA_VISIBLE_DEVICES" not in env
    forced = {**CPU_RECORD, "environment": {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}}
    assert slots.plan(forced, 0, 1)[2] == {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}


def test_without_uuids_a_slot_names_the_parents_visible_gpu(monkeypatch, six_cpus):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6,7")
    record = {**THREE_GPUS, "gpus": [{**g, "uuid": None} for g in THREE_GPUS["gpus"]]}
    assert slots.plan(record, 2, 3)[2]["CUDA_VISIBLE_DEVICES"] == "7"


def test_more_slots_than_gpus_or_cpus_is_refused(tmp_path, monkeypatch):
    with pytest.raises(DeviceCheckError, match="gpu=4"):
        slots.acquire(THREE_GPUS, 4, tmp_path)
    monkeypatch.setattr(slots, "available_cpus", lambda: [0, 1])
    with pytest.raises(slots.SlotUnavailable, match="3 slots but only 2 CPUs"):
        slots.acquire(CPU_RECORD, 3, tmp_path)


def test_wait_is_short_when_a_slot_frees(tmp_path, six_cpus):
    slot = slots.acquire(THREE_GPUS, 1, tmp_path)
    threading.Timer(0.3, slot.release).start()
    t0 = time.monotonic()
    slots.acquire(THREE_GPUS, 1, tmp_path, wait_s=5).release()
    assert time.monotonic() - t0 < 2


SLURM_JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURMD_NODENAME": "gpu07",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURM_CPUS_ON_NODE": "6",
    "SLURM_JOB_GPUS": "3",
    "SLURM_RESTART_COUNT": "1",
}


def test_inside_a_slurm_job_the_allocation_is_the_slot(tmp_path, monkeypatch, six_cpus):
    """SLURM gave the job its GPU and cores: no lock is taken (two jobs on one node both start at once), the child
    keeps the job's CUDA_VISIBLE_DEVICES, and the result records the job id, node and requeue count."""
    for name, value in {**SLURM_JOB, "CUDA_VISIBLE_DEVICES": "0"}.items():
        monkeypatch.setenv(name, value)
    first = slots.acquire(THREE_GPUS, 1, tmp_path / "slots")
    second = slots.acquire(THREE_GPUS, 1, tmp_path / "slots", wait_s=0.1)  # would wait and fail on a held lock
    assert first.fd == -1 and second.fd == -1 and not (tmp_path / "slots").exists()
    assert first.cpus == [0, 1, 2, 3, 4, 5] and first.env == {}
    placement = first.placement()
    assert placement["node"] == "gpu07" and placement["gpu_uuid"] is None
    assert placement["scheduler"] == {
        "name": "slurm",
        "job_id": "4242",
        "node": "gpu07",
        "partition": "gpu",
        "cpus_on_node": "6",
        "gpus": "3",
        "restart_count": 1,
    }
    result = _run(tmp_path, "slurm", PRINT_GPU, THREE_GPUS, 1)
    assert "visible=0 " in result["stderr_tail"], result["stderr_tail"]
    assert result["provenance"]["placement"]["scheduler"]["job_id"] == "4242"
    assert result["failure"]["kind"] == "exception"


def test_outside_a_scheduler_the_node_is_the_host(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert slots.scheduler_allocation() is None
    slot = slots.acquire(CPU_RECORD, 1, tmp_path / "slots")
    try:
        placement = slot.placement()
        assert placement["scheduler"] is None and placement["node"] == placement["host"]
    finally:
        slot.release()
