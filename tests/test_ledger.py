"""The fairness ledger: each control held, did not hold (naming where) or was not measured (saying why), read from
the cells' own records and the study's parity table."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from fwbench.analysis import ledger as lg
from fwbench.models.study_parity import PARITY_COLUMNS

AUTOTUNE_ON_CPU = {"setting": "on", "in_effect": None, "note": "not applicable on the CPU"}
# The default study's pairing: compiled PyTorch beside JAX's and TensorFlow's XLA programs.
MODES = {"torch": "compile", "jax": "jit", "tensorflow": "xla"}


def _result(framework, model="resnet50", batch=1, suite="inference", mode=None, **metrics):
    mode = mode or MODES[framework]
    settings = {"dtype": "float32", "tf32_in_effect": False, "mode": mode, "autotune": dict(AUTOTUNE_ON_CPU)}
    if framework == "tensorflow":
        settings |= {"intra_op_threads": 2, "inter_op_threads": 2}
    order = {"torch": [1, 3, 2], "jax": [2, 1, 3], "tensorflow": [3, 2, 1]}[framework]
    compile_s = None if mode == "eager" else 1.0
    base_metrics = {
        "flags": {"noisy": False, "ci_not_reached": False, "recompiled": False, "other_gpu_processes": False},
        "compile_s": compile_s,
        "trials": [{"order": o, "compile_s": compile_s, "first_call_s": 0.1} for o in order],
        "input_sha256": "abc",
        "loader_order_sha256": "def",
        "missing": {"isolation": "no NVML device: the cell runs on the CPU"},
        "isolation": None,
    }
    return {
        "cell": {
            "suite": suite,
            "framework": framework,
            "mode": mode,
            "model": model,
            "precision": "fp32",
            "batch_size": batch,
        },
        "status": "ok",
        "deviations": [],
        "failure": None,
        "inputs": {"dataset_manifest_sha256": "m", "weights_sha256": f"w-{model}"},
        "metrics": base_metrics | metrics,
        "provenance": {
            "framework": {
                "device": {"name": "cpu", "platform": "cpu"},
                "settings": settings,
                "threads": {"effective": 2, "clamped": False},
            },
            "cpu_model": "Test CPU",
            "placement": {"host": "box", "node": "box", "scheduler": None},
        },
    }


def _parity(errors=None, missing=None):
    rows = []
    for framework in ("jax", "tensorflow"):
        error = (errors or {}).get(framework, 1e-6)
        why = (missing or {}).get(framework)
        rows.append(
            {
                "model": "resnet50",
                "framework": framework,
                "image_size": 32,
                "images": 8,
                "relative_error": None if why else error,
                "max_abs_error": None if why else error,
                "top1_agreement": None if why else 1.0,
                "tolerance": 1e-4,
                "holds": not why and error <= 1e-4,
                "same_weights": True,
                "same_inputs": True,
                "missing": why,
            }
        )
    return pd.DataFrame(rows, columns=PARITY_COLUMNS)


CELLS = [_result(f) for f in ("torch", "jax", "tensorflow")]
INFERENCE = pd.DataFrame({"settings_differ": [False, False, False]})


def _statuses(results, parity=None):
    rows = lg.ledger(results, _parity() if parity is None else parity, INFERENCE)
    return {row.control: (row.status, row.measured, row.where) for row in rows.itertuples()}


def test_a_fair_study_holds_every_control_it_can_measure():
    statuses = _statuses(CELLS)
    assert statuses.pop("Device to itself")[0] == lg.NOT_MEASURED  # a CPU has no NVML process list
    assert {s for s, _, _ in statuses.values()} == {lg.HELD}, statuses
    assert "JAX/Flax 1.0e-06 (resnet50)" in statuses["Same weights in every framework"][1]
    assert "input batches equal in 1 of 1 groups" in statuses["Same input bytes and order"][1]
    assert statuses["Same node for each pair"][1] == "every cell ran on 1 node (box)"
    assert statuses["Ratios pair compiled with compiled"][1] == "inference: 2 of 2 ratios pair compiled with compiled"
    assert statuses["Autotuning alike"][1].startswith("on in 3 of 3 cells; not applicable: every cell ran on a CPU")
    assert len(statuses) + 1 == 16, "thirteen controls, the node control and the two mode controls"


def test_differing_inputs_are_named():
    cells = copy.deepcopy(CELLS)
    cells[2]["metrics"]["input_sha256"] = "other"
    status, _, where = _statuses(cells)["Same input bytes and order"]
    assert status == lg.NOT_HELD and "inference resnet50 fp32 bs1" in where


def test_a_missing_digest_is_not_measured_not_held():
    cells = copy.deepcopy(CELLS)
    del cells[0]["metrics"]["input_sha256"]
    status, _, where = _statuses(cells)["Same input bytes and order"]
    assert status == lg.NOT_MEASURED and "no digest recorded in inference torch compile resnet50" in where


def test_parity_beyond_the_bound_or_missing_does_not_hold():
    status, _, where = _statuses(CELLS, _parity(errors={"jax": 3e-3}))["Same weights in every framework"]
    assert status == lg.NOT_HELD and "resnet50 in JAX/Flax: 3.0e-03" in where
    status, _, where = _statuses(CELLS, _parity(missing={"tensorflow": "tensorflow: ValueError: x"}))[
        "Same weights in every framework"
    ]
    assert status == lg.NOT_HELD and "ValueError" in where


@pytest.mark.parametrize(
    ("control", "change", "expected"),
    [
        ("Same threads", lambda r: r["provenance"]["framework"]["threads"].update(effective=1), "thread counts differ"),
        (
            "Same numerical precision",
            lambda r: r["provenance"]["framework"]["settings"].update(tf32_in_effect=True),
            "fp32 cells differ",
        ),
        (
            "Not noisy (IQR at most 10% of the median)",
            lambda r: r["metrics"]["flags"].update(noisy=True),
            "inference jax jit resnet50 fp32 bs1",
        ),
        (
            "No recompilation or graph break while timed",
            lambda r: r["metrics"]["flags"].update(recompiled=True),
            "recompiled in inference jax jit",
        ),
        (
            "Autotuning alike",
            lambda r: r["provenance"]["framework"]["settings"]["autotune"].update(setting="off"),
            "settings differ: off in inference jax jit resnet50 fp32 bs1; on in",
        ),
        ("No workarounds", lambda r: r.update(deviations=[{"name": "xla_autotune_off"}]), "xla_autotune_off"),
        (
            "Same device and settings",
            lambda r: r["provenance"]["framework"]["device"].update(name="cuda:0"),
            "different devices",
        ),
    ],
)
def test_each_broken_control_names_where(control, change, expected):
    cells = copy.deepcopy(CELLS)
    change(cells[1])  # the JAX cell
    status, _, where = _statuses(cells)[control]
    assert status == lg.NOT_HELD and expected in where


def test_failures_and_single_trials():
    cells = copy.deepcopy(CELLS)
    cells[1].update(status="failed", failure={"kind": "timeout"})
    for r in cells:
        r["metrics"]["trials"] = r["metrics"]["trials"][:1]
    statuses = _statuses(cells)
    assert statuses["Every cell measured"][0] == lg.NOT_HELD and "1 timeout" in statuses["Every cell measured"][2]
    assert statuses["Interleaved, rotating trial order"][0] == lg.NOT_MEASURED


def test_the_table_escapes_and_bolds_what_did_not_hold():
    rows = lg.ledger(CELLS, _parity(errors={"jax": 1.0}), INFERENCE)
    table = lg.ledger_table(rows)
    assert r"\textbf{did not hold}" in table and "10\\% of the median" in table
    section = lg.ledger_section(rows)
    assert section.count(r"\label{tab:ledger}") == 1 and "did not: same weights in every framework;" in section


def test_the_lead_sentence_escapes_the_controls_it_names():
    """A control's name holds "%" (the noise control): unescaped, LaTeX dropped the rest of the sentence."""
    rows = lg.ledger(CELLS, _parity(), INFERENCE)
    noisy = rows["control"].str.startswith("Not noisy")
    rows.loc[noisy, "status"] = lg.NOT_HELD
    rows.loc[rows["control"] == "CI target reached", "status"] = lg.NOT_MEASURED
    sentence = lg.ledger_sentence(rows)
    assert "did not: not noisy (IQR at most 10\\% of the median);" in sentence, sentence
    assert "could not be measured here: CI target reached and" in sentence, sentence
