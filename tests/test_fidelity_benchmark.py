"""benchmarks/fidelity.py's verdict on the harness against a user's own loop: each ratio's interval over rounds
against the 3% target (docs/harness-performance.md quotes it)."""

from __future__ import annotations

import math

import pytest

from tests.conftest import benchmark_script


@pytest.fixture(scope="module")
def fidelity():
    return benchmark_script("fidelity")


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([0.98, 1.01, 0.99, 1.0, 1.02, 0.97], "within 3%"),  # the interval inside 0.97-1.03
        ([0.90, 0.92, 0.88, 0.91], "biased"),  # the interval below 1
        ([1.06, 1.08, 1.05, 1.07], "biased"),  # above
        ([0.8, 1.2, 0.9, 1.1], "cannot tell"),  # 1 inside, and so is more than 3% on either side
        ([0.96, 0.99, 0.97, 0.98, 0.99, 1.0], "biased"),  # below 1, and not shown within 3%
        ([0.985, 0.99, 0.988, 0.992, 0.987], "within 3%"),  # below 1 too, but by less than the target
    ],
)
def test_each_interval_says_what_it_shows(fidelity, ratios, verdict):
    mean, low, high, said = fidelity.interval(ratios)
    assert said == verdict, (mean, low, high)
    assert low < mean < high and mean == pytest.approx(math.exp(sum(map(math.log, ratios)) / len(ratios)))


def test_one_round_tells_nothing(fidelity):
    mean, low, high, said = fidelity.interval([0.9])
    assert mean == pytest.approx(0.9) and math.isnan(low) and math.isnan(high) and said == "cannot tell"


def test_pairs_put_the_cells_own_step_beside_the_bare_loop_when_given(fidelity, monkeypatch):
    """The in-process pairs: every variant gets one ratio per pair, the harness's own step (a cell's backend) only
    when given; a step twice as slow as the bare loop's reads about 0.5, so the ratio is of rates, not of times."""
    import time

    monkeypatch.setattr(fidelity, "PAIR_SECONDS", 0.05)

    def step(seconds):
        return lambda: time.sleep(seconds)

    without = fidelity.paired(step(0.001), lambda out: None, 1, pairs=2)
    assert set(without) == {"burst", "burst + sampler 250 ms", "burst + sampler 10 ms"}
    assert all(len(ratios) == 2 for ratios in without.values())
    given = fidelity.paired(step(0.001), lambda out: None, 1, pairs=3, harness_step=(step(0.002), lambda out: None))
    assert set(given) == {*without, "harness's step"} and len(given["harness's step"]) == 3
    assert all(0.3 < ratio < 0.75 for ratio in given["harness's step"]), given["harness's step"]


def test_a_record_names_its_machine(fidelity):
    """--out keeps the CPU as cells record it (its ISA level tells apart the VM kinds that share a model name), the
    commit and the date beside the rates."""
    recorded = fidelity.machine()
    assert recorded["cpu"]["isa_level"] and recorded["cpu"]["model_name"]
    assert "commit" in recorded["git"] and len(recorded["date"]) == 10


def test_the_users_loop_runs_in_the_cells_own_worker_after_its_result(fidelity, monkeypatch, tmp_path):
    """The in-worker reference: the runner starts fidelity.py as the cell's worker, which runs the cell as a study's
    worker does and only then, in the same process, the bare loop of the cell's framework beside the backend the cell
    was measured with (kept from get_backend); their rates are what the round reads beside the cell's."""
    import argparse
    import json
    import sys

    import fwbench.backends
    from fwbench.running import worker

    calls, cell_backend = [], object()

    def get_backend(*args, **kwargs):
        return cell_backend

    monkeypatch.setattr(fwbench.backends, "get_backend", get_backend)

    def cell(spec, part):  # as the worker does: its backend from fwbench.backends, looked up when the cell starts
        calls.append(("cell", spec, part, fwbench.backends.get_backend("jax", threads=2)))

    def loops(kind, name, *rest, cell_backend=None):
        calls.append(("loops", kind, name, cell_backend))
        return {"bare": [800.0, 812.5], "cell's program": [805.0, 810.0]}

    monkeypatch.setattr(worker, "main", cell)
    monkeypatch.setattr(fidelity, "reference", loops)
    args = argparse.Namespace(batch_size=8, image_size=32, threads=2)
    command = fidelity.in_worker_command("jax", "mobilenet_v3_small", tmp_path, args)
    assert command[:3] == (sys.executable, fidelity.__file__, fidelity.IN_WORKER)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"threads": 2}))
    fidelity.in_worker(command[3], str(spec), "part.json")
    assert calls == [
        ("cell", str(spec), "part.json", cell_backend),
        ("loops", "in-worker jax", "mobilenet_v3_small", cell_backend),
    ]
    assert json.loads((tmp_path / "in-worker jax.json").read_text())["bare"] == [800.0, 812.5]
    assert fwbench.backends.get_backend is get_backend  # the lookup is given back once the cell is done


def test_in_worker_pairs_take_turns_and_time_each_side(fidelity, monkeypatch):
    """The in-worker pairs: one rate per side and pair, the sides taking turns at going first; a cell's step twice
    as slow as the bare loop reads about half its rate."""
    import time

    monkeypatch.setattr(fidelity, "PAIR_SECONDS", 0.05)
    order = []

    def step(side, seconds):
        return (lambda: order.append(side) or time.sleep(seconds)), (lambda out: None)

    rates = fidelity.alternated(step("bare", 0.001), step("cell", 0.002), 1, pairs=3)
    assert [len(v) for v in rates.values()] == [3, 3]
    runs = [order[0]] + [b for a, b in zip(order, order[1:], strict=False) if a != b]
    assert runs == ["bare", "cell", "bare", "cell"], runs  # bare cell | cell bare | bare cell: each side twice in a row
    assert all(0.3 < c / b < 0.75 for b, c in zip(rates["bare"], rates["cell's program"], strict=True)), rates


def test_the_in_worker_pins_its_threads_before_numpy_loads_as_a_studys_worker_does(tmp_path):
    """A study's worker pins its threads before anything imports NumPy (OpenBLAS reads its thread settings when it
    loads); fidelity.py's worker wraps fwbench.backends, which imports NumPy, so it must pin first too. In a fresh
    interpreter: NumPy is not loaded when the threads are pinned, and the cell's worker finds them pinned."""
    import json
    import subprocess
    import sys

    from tests.conftest import REPO

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"threads": 1}))
    script = (
        "import json, os, sys\n"
        "import fwbench.running.threads as threads\n"
        "pinned, pin = [], threads.pin_threads\n"
        "threads.pin_threads = lambda *a, **k: pinned.append('numpy' in sys.modules) or pin(*a, **k)\n"
        "from fwbench.running import worker\n"
        "seen = {}\n"
        "class CellStarted(Exception): pass\n"
        "def main(spec, part):  # the cell's worker starts: what it finds, then no cell\n"
        "    seen.update(threads=os.environ['OMP_NUM_THREADS'], numpy='numpy' in sys.modules)\n"
        "    raise CellStarted\n"
        "worker.main = main\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "import fidelity\n"
        "try:\n"
        "    fidelity.in_worker(json.dumps({'framework': 'jax'}), sys.argv[1], 'part.json')\n"
        "except CellStarted:\n"
        "    print(json.dumps({'numpy_when_pinned': pinned, **seen}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(spec)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["numpy_when_pinned"][:1] == [False], seen  # pinned before NumPy loaded
    assert seen["threads"] == "1" and seen["numpy"], seen  # the cell's worker started pinned, NumPy loaded by then
