"""benchmarks/design_targets.py: the measurement design's targets as the README quotes them, from constructed runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import benchmark_script
from tests.test_compare import _run, _speedup


@pytest.fixture(scope="module")
def targets():
    return benchmark_script("design_targets")


def _with_time(run: Path, wall_s: float, timed_share: float) -> Path:
    (run / "tables" / "study_time.json").write_text(json.dumps({"wall_s": wall_s, "timed_share": timed_share}))
    return run


def test_one_runs_figures(tmp_path, targets):
    # a resolved ratio (0.5), one shown within 5% of parity (1.0, se 0.005), one neither (0.8, se 0.2)
    speedups = [_speedup(0.5), _speedup(1.0, batch=32, se=0.005), _speedup(0.8, framework="tensorflow", se=0.2)]
    run = _with_time(_run(tmp_path, "a", speedups), 600.0, 0.25)
    figures = targets.run_figures(run)
    assert figures["ratios"] == 3 and figures["wall_min"] == 10.0 and figures["timed_share"] == 0.25
    assert figures["resolved_share"] == pytest.approx(1 / 3)
    assert figures["resolved_or_parity_share"] == pytest.approx(2 / 3)
    assert 1.0 < figures["median_half_width_pct"] < 3.0 and figures["max_half_width_pct"] > 50


def test_two_runs_flips_and_overlaps_in_markdown(tmp_path, targets, capsys):
    a = _with_time(_run(tmp_path, "a", [_speedup(0.5), _speedup(1.2, batch=32)]), 600.0, 0.25)
    b = _with_time(_run(tmp_path, "b", [_speedup(0.5), _speedup(0.8, batch=32)]), 660.0, 0.30)
    pair = targets.pair_figures(a, b)
    assert pair["compared"] == 2 and pair["flipped"] == 1 and pair["overlap_share"] == 0.5
    assert targets.main([str(a), str(b), "--markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "| ratios resolved in opposite directions in the two runs (0) | — | 1 |" in out
    assert "| study wall time (<= 15 min) | 10 min 0 s | 11 min 0 s |" in out
    assert any(line.startswith("| small_cnn bs32 jax/torch | 1.20 [") and line.endswith("| flipped |") for line in out)
