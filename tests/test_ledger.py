"""The fairness ledger: each control held, did not hold (naming where) or was not measured (saying why), read from
the cells' own records and the study's parity table."""

from __future__ import annotations

import copy
import re

import pandas as pd
import pytest

from fwbench.analysis.fairness import ledger as lg
from fwbench.analysis.fairness.input_checks import blas_core_row
from fwbench.analysis.fairness.outcome_checks import noise_row
from fwbench.analysis.fairness.placement_checks import order_row
from fwbench.analysis.fairness.rows import HELD, NOT_HELD, NOT_MEASURED
from fwbench.analysis.paper.abstract import words
from fwbench.analysis.paper.ledger_section import ledger_section
from fwbench.analysis.paper.structure_check import MAX_SENTENCE_WORDS, sentences
from fwbench.running import order as trial_order
from fwbench.scenarios.parity import PARITY_COLUMNS

AUTOTUNE_ON_CPU = {"setting": "on", "in_effect": None, "note": "not applicable on the CPU"}
# The default study's pairing: compiled PyTorch beside JAX's and TensorFlow's XLA programs.
MODES = {"torch": "compile", "jax": "jit", "tensorflow": "xla"}


# Each framework's position in six rounds of a Williams design for three (ABC, BCA, CAB, CBA, ACB, BAC): every
# framework in every position twice and right after each other framework twice.
WILLIAMS_3 = {"torch": [1, 3, 2, 3, 1, 2], "jax": [2, 1, 3, 2, 3, 1], "tensorflow": [3, 2, 1, 1, 2, 3]}
# The rotation fwbench ran before the design (3 rounds: ABC, BCA, CAB): positions balanced, carry-over not.
ROTATION_3 = {"torch": [1, 3, 2], "jax": [2, 1, 3], "tensorflow": [3, 2, 1]}


def _result(framework, model="resnet50", batch=1, suite="inference", mode=None, order=None, **metrics):
    """A successful cell; `order`: its trials' positions, round by round (default: three rounds of ROTATION_3)."""
    mode = mode or MODES[framework]
    settings = {"dtype": "float32", "tf32_in_effect": False, "mode": mode, "autotune": dict(AUTOTUNE_ON_CPU)}
    if framework == "tensorflow":
        settings |= {"intra_op_threads": 2, "inter_op_threads": 2}
    order = ROTATION_3[framework] if order is None else order
    compile_s = None if mode == "eager" else 1.0
    versions = {  # the tested set's, as each framework's cells record them (beside CUDA's, which is no package)
        "torch": {"torch": "2.14.1+cu130", "torchvision": "0.29.1", "cuda": "13.0"},
        "jax": {"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "cuda": None},
        "tensorflow": {"tensorflow": "2.21.0", "keras": "3.15.1", "cuda": None},
    }.get(framework, {})
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
                "versions": versions,
            },
            "cpu_model": "Test CPU",
            "placement": {"host": "box", "node": "box", "scheduler": None},
        },
    }


def _parity(errors=None, missing=None, blind=()):
    rows = []
    for framework in ("jax", "tensorflow"):
        error = (errors or {}).get(framework, 1e-6)
        why = (missing or {}).get(framework)
        can_fail = not why and framework not in blind
        rows.append(
            {
                "model": "resnet50",
                "framework": framework,
                "precision": "fp32",
                "arithmetic": "fp32",
                "image_size": 32,
                "images": 8,
                "input_dependence": None if why else (0.0 if framework in blind else 0.4),
                "permuted_error": None if why else (error if framework in blind else 0.5),
                "can_fail": can_fail,
                "relative_error": None if why else error,
                "max_abs_error": None if why else error,
                "top1_agreement": None if why else 1.0,
                "tolerance": 1e-4,
                "holds": can_fail and error <= 1e-4,
                "same_weights": True,
                "same_inputs": True,
                "missing": why,
            }
        )
    return pd.DataFrame(rows, columns=PARITY_COLUMNS)


CELLS = [_result(f, order=WILLIAMS_3[f]) for f in ("torch", "jax", "tensorflow")]
INFERENCE = pd.DataFrame({"settings_differ": [False, False, False]})


def _statuses(results, parity=None):
    rows = lg.ledger(results, _parity() if parity is None else parity, INFERENCE)
    return {row.control: (row.status, row.measured, row.where) for row in rows.itertuples()}


def test_a_fair_study_holds_every_control_it_can_measure():
    statuses = _statuses(CELLS)
    assert statuses.pop("Device to itself")[0] == NOT_MEASURED  # a CPU has no NVML process list
    assert {s for s, _, _ in statuses.values()} == {HELD}, statuses
    assert "JAX/Flax 1.0e-06 (resnet50)" in statuses["Same weights in every framework"][1]
    assert "input batches equal in 1 of 1 groups" in statuses["Same input bytes and order"][1]
    assert statuses["Same node for each pair"][1] == "every cell ran on 1 node (box)"
    assert statuses["Ratios pair compiled with compiled"][1] == "inference: 2 of 2 ratios pair compiled with compiled"
    assert statuses["Autotuning alike"][1].startswith("on in 3 of 3 cells; not applicable: every cell ran on a CPU")
    assert statuses["Framework versions as tested"][1] == "7 of 7 framework packages at their tested version"
    assert len(statuses) + 1 == 17, "thirteen controls, the versions, the node control and the two mode controls"


def test_differing_inputs_are_named():
    cells = copy.deepcopy(CELLS)
    cells[2]["metrics"]["input_sha256"] = "other"
    status, _, where = _statuses(cells)["Same input bytes and order"]
    assert status == NOT_HELD and "inference resnet50 fp32 bs1" in where


def test_a_missing_digest_is_not_measured_not_held():
    cells = copy.deepcopy(CELLS)
    del cells[0]["metrics"]["input_sha256"]
    status, _, where = _statuses(cells)["Same input bytes and order"]
    assert status == NOT_MEASURED and "no digest recorded in inference torch compile resnet50" in where


def test_parity_beyond_the_bound_or_missing_does_not_hold():
    status, _, where = _statuses(CELLS, _parity(errors={"jax": 3e-3}))["Same weights in every framework"]
    assert status == NOT_HELD and "resnet50 in JAX/Flax: 3.00e-03 in fp32 (bound 1.00e-04)" in where
    status, _, where = _statuses(CELLS, _parity(missing={"tensorflow": "tensorflow: ValueError: x"}))[
        "Same weights in every framework"
    ]
    assert status == NOT_HELD and "ValueError" in where


def test_the_weights_row_names_the_bound_pytorchs_own_rounding_sets():
    """Where PyTorch's float64 logits gave its own float32 error, a float32 bound may be wider than the fixed one:
    the row says so and names the widest, and a failure names the bound it missed by three digits."""
    parity = _parity(errors={"jax": 1.2e-4, "tensorflow": 1.5e-4})
    parity["reference_error"] = 4.5e-5
    parity["tolerance"] = 1.35e-4
    parity["holds"] = parity["relative_error"] <= parity["tolerance"]
    status, measured, where = _statuses(CELLS, parity)["Same weights in every framework"]
    assert status == NOT_HELD and "resnet50 in TensorFlow/Keras: 1.50e-04 in fp32 (bound 1.35e-04)" in where
    assert "JAX" not in where, "1.2e-4 is within three times PyTorch's own 4.5e-5"
    assert "at least 3 times PyTorch's own float32 error against its float64 logits, up to 1.4e-04" in measured
    # a TF32 row's wider bound is not the float32 one's
    tf32 = pd.concat([parity, parity.iloc[:1].assign(arithmetic="tf32", precision="tf32", tolerance=5e-2)])
    _, measured, _ = _statuses(CELLS, tf32.reset_index(drop=True))["Same weights in every framework"]
    assert "float64 logits, up to 1.4e-04 (resnet50)" in measured and "tf32 5e-02" in measured
    # without the float64 reference the evidence is the fixed bound's alone
    _, measured, _ = _statuses(CELLS, _parity())["Same weights in every framework"]
    assert "PyTorch's own float32 error" not in measured and "(bound fp32 1e-04)" in measured


def test_compile_apart_is_decided_by_each_cells_records():
    """Negative controls of the compile row: a launch without a first call recorded apart, a compiled cell without a
    compile time, and a compiled cell whose timed steps hold one as slow as its compile do not hold; an eager cell's
    or a compiled cell's ordinary slow step does."""
    control = "Compile time apart from steady state"
    steps = [5.0] * 50
    cells = copy.deepcopy(CELLS)
    for cell in cells:
        cell["samples_ms"] = steps + [40.0]  # a scheduling stall of 40 ms: not a compile
    assert _statuses(cells)[control][0] == HELD
    unrecorded = copy.deepcopy(cells)
    unrecorded[1]["metrics"]["trials"][0]["first_call_s"] = None
    status, _, where = _statuses(unrecorded)[control]
    assert status == NOT_HELD and "inference jax jit resnet50 fp32 bs1 (no first call recorded apart)" in where
    uncompiled = copy.deepcopy(cells)
    for trial in uncompiled[2]["metrics"]["trials"]:
        trial["compile_s"] = None
    assert "no compile recorded apart" in _statuses(uncompiled)[control][2]
    leaked = copy.deepcopy(cells)
    leaked[0]["samples_ms"] = steps + [900.0]  # compile_s 1.0 s: a recompilation timed as a step
    status, _, where = _statuses(leaked)[control]
    assert status == NOT_HELD and "a timed step of 900 ms (180x the median) as slow as a compile" in where
    eager = copy.deepcopy(leaked)
    eager[0] = _result("torch", mode="eager", order=WILLIAMS_3["torch"]) | {"samples_ms": steps + [900.0]}
    assert _statuses(eager)[control][0] == HELD, "an eager cell compiles nothing: its slow step is noise"


def test_logits_that_do_not_depend_on_the_image_do_not_hold():
    """The parity check could not fail for a model whose logits are the same for every image: the ledger says so."""
    status, measured, where = _statuses(CELLS, _parity(blind=("jax",)))["Same weights in every framework"]
    assert status == NOT_HELD and "resnet50 in JAX/Flax: logits do not depend on the image" in where
    assert "the check cannot fail" in where and "TensorFlow" not in where
    status, measured, _ = _statuses(CELLS)["Same weights in every framework"]
    assert status == HELD and "logits vary with the image by at least 4.0e-01" in measured


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
            "Not noisy (each trial's IQR at most 10% of its median)",
            lambda r: r["metrics"].update(flags={**r["metrics"]["flags"], "noisy": True}, noisy_trials=2),
            "inference jax jit resnet50 fp32 bs1 (2 of 6 trials)",
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
            "Framework versions as tested",
            lambda r: r["provenance"]["framework"]["versions"].update(jax="0.11.2", jaxlib="0.11.2"),
            "not the tested versions (the setup table gives them)",
        ),
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
    assert status == NOT_HELD and expected in where


def test_failures_and_single_trials():
    cells = copy.deepcopy(CELLS)
    cells[1].update(status="failed", failure={"kind": "timeout"})
    for r in cells:
        r["metrics"]["trials"] = r["metrics"]["trials"][:1]
    statuses = _statuses(cells)
    assert statuses["Every cell measured"][0] == NOT_HELD and "1 timeout" in statuses["Every cell measured"][2]
    assert statuses["Interleaved, balanced trial order"][0] == NOT_MEASURED


def test_the_table_escapes_and_bolds_what_did_not_hold():
    rows = lg.ledger(CELLS, _parity(errors={"jax": 1.0}), INFERENCE)
    table = lg.ledger_table(rows)
    assert r"\textbf{did not hold}" in table and "10\\% of its median" in table
    section = ledger_section(rows)
    assert section.count(r"\label{tab:ledger}") == 1 and "One did not: same weights in every framework." in section
    assert section.index("One did not") < section.index(r"\begin{table*}"), "the prose, then the table"


def test_the_lead_sentence_escapes_the_controls_it_names():
    """A control's name holds "%" (the noise control): unescaped, LaTeX dropped the rest of the sentence."""
    rows = lg.ledger(CELLS, _parity(), INFERENCE)
    noisy = rows["control"].str.startswith("Not noisy")
    rows.loc[noisy, "status"] = NOT_HELD
    rows.loc[rows["control"] == "CI target reached", "status"] = NOT_MEASURED
    counts = lg.ledger_counts(rows)
    assert counts.not_held == ("not noisy (each trial's IQR at most 10% of its median)",)
    assert counts.missing == ("CI target reached", "device to itself"), "in the table's order, abbreviations kept"
    section = ledger_section(rows)
    assert "One did not: not noisy (each trial's IQR at most 10\\% of its median)." in section, section
    assert "Two could not be measured here: CI target reached and device to itself." in section, section


# --- the section's prose on every kind of study ---------------------------------------------------------------


def _prose(text: str) -> str:
    """The section without its table."""
    return re.sub(r"\\begin\{table\*\}.*?\\end\{table\*\}", " ", text, flags=re.S)


def _study(kind: str) -> pd.DataFrame:
    """The ledger of a study of `kind`."""
    cells = copy.deepcopy(CELLS)
    if kind == "one framework":
        return lg.ledger(cells[:1], _parity().iloc[:0], INFERENCE.iloc[:1])
    if kind == "failed cell":
        cells[1].update(status="failed", failure={"kind": "timeout"})
    if kind == "nothing resolved":  # one trial each: no ratio can be resolved
        for r in cells:
            r["metrics"]["trials"] = r["metrics"]["trials"][:1]
    if kind == "gpu":
        for r in cells:
            r["provenance"]["framework"]["device"] = {"name": "NVIDIA H200", "platform": "cuda"}
            r["metrics"]["missing"] = {}
            r["metrics"]["isolation"] = {"other_processes": 0}
    if kind == "many failed":
        for r in cells:
            r["metrics"]["flags"]["noisy"] = True
            r["metrics"]["input_sha256"] = r["cell"]["framework"]
        cells[1].update(status="failed", failure={"kind": "timeout"})
    rows = lg.ledger(cells, _parity(errors={"jax": 1.0} if kind == "many failed" else None), INFERENCE)
    return rows.iloc[:0] if kind == "no rows" else rows


@pytest.mark.parametrize("kind", ["one framework", "failed cell", "nothing resolved", "gpu", "many failed", "no rows"])
def test_the_section_renders_short_sentences_for_every_kind_of_study(kind):
    rows = _study(kind)
    counts = lg.ledger_counts(rows)
    assert counts.total == len(rows) and counts.held + len(counts.not_held) + len(counts.missing) == len(rows)
    text = ledger_section(rows)
    assert text.startswith("\\section{Fairness ledger}") and r"\label{tab:ledger}" in text
    prose = _prose(text)
    assert max(words(sentence) for sentence in sentences(prose)) <= MAX_SENTENCE_WORDS
    if kind == "no rows":
        assert "The ledger has no control to report" in prose
    else:
        assert "fairness controls (Table~\\ref{tab:ledger})," in prose and " held." in prose
    if kind == "failed cell":
        assert "every cell measured" in counts.not_held and "every cell measured" in prose
    if kind == "many failed":
        assert len(counts.not_held) > 2 and prose.count(r"\item") == len(counts.not_held), "a list, one item each"
    else:
        assert len(counts.not_held) > 2 or r"\item" not in prose.split("could not be measured")[0]


def test_the_sentence_check_catches_a_long_list_said_in_one_sentence():
    """The negative control: the controls that did not hold said in one sentence, as the section said them before
    it listed three or more, run over the limit; listed one an item, no sentence does."""
    counts = lg.ledger_counts(_study("many failed"))
    one_sentence = (
        f"Of the {counts.total} controls in Table~\\ref{{tab:ledger}}, {counts.held} held in this study; "
        f"{len(counts.not_held)} did not: {', '.join(counts.not_held)}; "
        f"{len(counts.missing)} could not be measured here: {', '.join(counts.missing)}."
    )
    assert words(one_sentence) > MAX_SENTENCE_WORDS
    assert max(words(s) for s in sentences(_prose(ledger_section(_study("many failed"))))) <= MAX_SENTENCE_WORDS


# --- trial order and noise ------------------------------------------------------------------------------------------

# The variants of the default study's comparison groups, and their names in a round's order.
VARIANTS = {
    2: [("torch", "compile"), ("jax", "jit")],
    3: [("torch", "eager"), ("jax", "jit"), ("tensorflow", "xla")],
    4: [("torch", "eager"), ("torch", "compile"), ("jax", "jit"), ("tensorflow", "xla")],
}


def _row(row: dict) -> tuple[str, str, str]:
    return row["status"], row["measured"], row["where"]


def _designed_group(n: int, rounds: int, seed: int | None = None, suite: str = "inference", batch: int = 1):
    """A group's cells as run_group writes them: trials in the rounds of fwbench.running.order's design for n variants,
    each trial with its round, its position and the round's order."""
    variants = VARIANTS[n]
    plan = trial_order.design([f"{f}/{m}" for f, m in variants], rounds, seed)
    cells = []
    for index, (framework, mode) in enumerate(variants):
        cell = _result(framework, mode=mode, suite=suite, batch=batch)
        cell["metrics"]["trials"] = [
            {
                "round": k + 1,
                "order": plan.rows[k].index(index) + 1,
                "round_order": plan.names(k),
                "compile_s": 1.0,
                "first_call_s": 0.1,
            }
            for k in range(rounds)
        ]
        cells.append(cell)
    return cells


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("seed", [None, 7])
def test_the_design_is_balanced_with_enough_rounds_and_the_ledger_says_so(n, seed):
    """n rounds for 2 and 4 variants, 2n for 3 (and twice that): each variant in each position, and right after
    each other variant, equally often; the ledger's order row holds. A permutation of the labels keeps it so."""
    needed = trial_order.rounds_needed(n)
    assert needed == {2: 2, 3: 6, 4: 4}[n]
    for rounds in (needed, 2 * needed):
        plan = trial_order.design([f"{f}/{m}" for f, m in VARIANTS[n]], rounds, seed)
        assert plan.complete
        balance = trial_order.balance([plan.names(k) for k in range(rounds)])
        assert balance.positions_balanced and balance.carry_balanced and balance.problems() == []
        assert {balance.carry[pair] for pair in balance.pairs()} == {rounds // n}
        assert {count for counts in balance.positions.values() for count in counts.values()} == {rounds // n}
        status, measured, where = _row(order_row(_designed_group(n, rounds, seed)))
        assert status == HELD and where == "", where
        assert measured == (
            f"inference: 1 group in {rounds} rounds; balanced (positions and carry-over) in 1 of 1 groups"
        )


def test_the_default_studys_three_rounds_leave_the_order_unbalanced_and_the_ledger_says_what():
    """The default study runs 3 rounds: for 2 variants one runs first twice, for 3 a Latin square balances the
    positions but each variant always follows the same one, for 4 one variant never runs first."""
    cells = _designed_group(2, 3) + _designed_group(3, 3, batch=8) + _designed_group(4, 3, batch=32)
    status, measured, where = _row(order_row(cells))
    assert status == NOT_HELD
    assert measured.endswith("balanced (positions and carry-over) in 0 of 3 groups"), measured
    assert (
        "3 rounds for 2 variants (a balanced order needs a multiple of 2): first position unequal: torch/compile in "
        "2 of 3 rounds, jax/jit in 1 in inference resnet50 fp32 bs1; carry-over unbalanced (torch/compile then "
        "jax/jit in 2 rounds, jax/jit then torch/compile in 1) in inference resnet50 fp32 bs1"
    ) in where, where
    assert (
        "3 rounds for 3 variants (a balanced order needs a multiple of 6): carry-over unbalanced (3 of 6 ordered "
        "pairs never adjacent) in inference resnet50 fp32 bs8"
    ) in where, where
    assert (
        "3 rounds for 4 variants (a balanced order needs a multiple of 4): tensorflow/xla never first in inference "
        "resnet50 fp32 bs32; carry-over unbalanced (3 of 12 ordered pairs never adjacent)"
    ) in where, where


def test_the_rotation_fwbench_ran_before_is_not_called_balanced():
    """Three rounds of a rotation for three frameworks (the cells record positions only, no round order): every
    position alike, which the old row called held, but jax always ran right after torch."""
    status, _, where = _row(order_row([_result(f) for f in ("torch", "jax", "tensorflow")]))
    assert status == NOT_HELD and "carry-over unbalanced (3 of 6 ordered pairs never adjacent)" in where


def test_a_cell_that_failed_and_left_unbalances_the_order_of_the_others():
    cells = _designed_group(3, 6)
    failed = cells.pop(2)  # tensorflow ran in rounds 1-2 (recorded in the others' round orders), then failed
    for cell in cells:
        for trial in cell["metrics"]["trials"][2:]:
            trial["round_order"] = [name for name in trial["round_order"] if name != "tensorflow/xla"]
            trial["order"] = trial["round_order"].index(_order_name(cell)) + 1
    status, _, where = _row(order_row([*cells, failed | {"status": "failed", "metrics": None}]))
    assert status == NOT_HELD and "6 rounds for 2 variants" in where, where


def _order_name(cell) -> str:
    return f"{cell['cell']['framework']}/{cell['cell']['mode']}"


def test_micro_groups_are_checked_and_one_trial_is_named():
    micro = _designed_group(4, 4, suite="micro")
    status, measured, where = _row(order_row(_designed_group(2, 2) + micro))
    assert status == HELD and "micro: 1 group in 4 rounds" in measured
    for cell in micro:
        cell["metrics"]["trials"] = cell["metrics"]["trials"][:1]
    status, measured, where = _row(order_row(_designed_group(2, 2) + micro))
    assert status == NOT_HELD and where == "one trial in 1 group (micro resnet50 fp32 bs1)", where
    assert measured.startswith("inference: 1 group in 2 rounds; micro: 1 group in 1 round;"), measured
    assert _row(order_row(micro))[0] == NOT_MEASURED


def test_the_noise_row_counts_cells_whose_trials_are_noisy():
    cells = copy.deepcopy(CELLS)
    for cell in cells:
        cell["metrics"]["noisy_trials"] = 0
    status, measured, where = _row(noise_row(cells))
    assert status == HELD and measured == "0 of 3 cells had a noisy trial (0 of 18 trials noisy)"
    cells[1]["metrics"].update(noisy_trials=1, flags={**cells[1]["metrics"]["flags"], "noisy": True})
    status, measured, where = _row(noise_row(cells))
    assert status == NOT_HELD and measured == "1 of 3 cells had a noisy trial (1 of 18 trials noisy)"
    assert where == "inference jax jit resnet50 fp32 bs1 (1 of 6 trials)"
    del cells[2]["metrics"]["noisy_trials"]  # a result from before per-trial flags: its pooled flag
    cells[2]["metrics"]["flags"]["noisy"] = True
    status, measured, where = _row(noise_row(cells))
    assert measured.endswith("; 1 cell recorded only the pooled samples' flag (before per-trial flags)"), measured
    assert "inference tensorflow xla resnet50 fp32 bs1 (pooled samples)" in where


# --- the NumPy baseline's BLAS kernels ---------------------------------------------------------------------------

HASWELL_BLAS = {"user_api": "blas", "internal_api": "openblas", "version": "0.3.31", "architecture": "Haswell"}


def _numpy_baseline(batch: int, env: dict, blas: dict | None = None, isa: str | None = None) -> dict:
    """A micro suite NumPy cell as the runner writes it: the host's environment, its `blas` and `hardware` records
    where given, and the libraries its own process loaded."""
    cell = _result("numpy", model="matmul", batch=batch, suite="micro", mode="eager", order=[1, 2, 1])
    cell["provenance"]["env"] = env
    if blas is not None:
        cell["provenance"]["blas"] = blas
    if isa is not None:
        cell["provenance"]["hardware"] = {"isa_level": isa}
    cell["provenance"]["framework"]["settings"]["process_blas"] = {"libraries": [HASWELL_BLAS], "missing": {}}
    return cell


FORCED_ENV = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576", "OMP_NUM_THREADS": "2"}
FORCED_BLAS = {"forced_core_type": "Haswell", "core_type_forced": True, "forced_vs_cpu": "below"}


def test_a_numpy_baseline_under_a_forced_core_type_is_flagged_with_the_value():
    cells = [_numpy_baseline(b, FORCED_ENV, FORCED_BLAS, isa="AVX-512 (BF16)") for b in (1, 64)]
    status, measured, where = _row(blas_core_row(CELLS + cells))
    assert status == NOT_HELD
    assert measured == (
        "OPENBLAS_CORETYPE=Haswell in 2 of 2 NumPy cells, OPENBLAS_L2_SIZE=1048576; OpenBLAS ran its Haswell "
        "kernels; set by the machine, recorded and not changed"
    )
    assert where == (
        "a forced BLAS core type slows current NumPy, so the speedups over NumPy may be overstated; the forced "
        "kernels are below this CPU's AVX-512 (BF16)"
    )
    rows = lg.ledger(CELLS + cells, _parity(), INFERENCE)
    assert rows["control"].tolist().index("NumPy baseline on its CPU's own BLAS kernels") == 4, "after the threads"
    table = lg.ledger_table(rows)
    assert r"OPENBLAS\_CORETYPE=Haswell in 2 of 2 NumPy cells" in table and r"\textbf{did not hold}" in table


def test_a_result_from_before_the_blas_record_is_read_from_its_environment():
    cells = [_numpy_baseline(1, {"OPENBLAS_CORETYPE": "Zen"}), _numpy_baseline(4, {})]
    status, measured, where = _row(blas_core_row(cells))
    assert status == NOT_HELD and measured.startswith("OPENBLAS_CORETYPE=Zen in 1 of 2 NumPy cells;")
    assert where.endswith("; forced in micro numpy eager matmul fp32 bs1"), where


def test_an_unforced_numpy_baseline_holds_and_no_numpy_means_no_row():
    cells = [_numpy_baseline(b, {"OMP_NUM_THREADS": "2"}) for b in (1, 64)]
    assert _row(blas_core_row(cells)) == (
        HELD,
        "OPENBLAS_CORETYPE unset in 2 of 2 NumPy cells; OpenBLAS ran its Haswell kernels",
        "",
    )
    del cells[1]["provenance"]["env"]
    status, _, where = _row(blas_core_row(cells))
    assert status == NOT_MEASURED and where == "no environment recorded in micro numpy eager matmul fp32 bs64"
    assert blas_core_row(CELLS) is None
    assert "NumPy baseline on its CPU's own BLAS kernels" not in set(lg.ledger(CELLS, _parity(), INFERENCE)["control"])


def _in_blocks(results, ran, steal=None, idle=None, load=None):
    """The cells measured by warm workers in one group: its blocks as they ran (`ran`, every launch in turn, two
    launches), per cell its steal-flagged bursts, its bursts flagged for other processes' load and its waiting
    worker's CPU share."""
    results = copy.deepcopy(results)
    variants = [f"{r['cell']['framework']}/{r['cell']['mode']}" for r in results]
    group = {"id": "g1", "rounds": 2, "order": {"variants": variants}, "blocks": {"ran": ran}}
    for result in results:
        framework = result["cell"]["framework"]
        result["provenance"]["group"] = group
        result["metrics"]["blocks"] = {
            "bursts": len(ran),
            "steal_flagged": (steal or {}).get(framework, 0),
            "steal_share_max": 0.2 if (steal or {}).get(framework) else 0.01,
            "idle_cpu_per_wall": (idle or {}).get(framework, 0.002),
            "load_flagged": (load or {}).get(framework, 0),
            "other_load_share": 0.3 if (load or {}).get(framework) else 0.01,
        }
    return results


def _williams_blocks(variants, launches=2):
    design = trial_order.design(variants, launches * trial_order.rounds_needed(len(variants)), seed=3)
    return [design.names(k) for k in range(len(design.rows))]


def test_warm_workers_in_balanced_blocks_without_steal_or_busy_waiting_hold():
    variants = [f"{f}/{MODES[f]}" for f in ("torch", "jax", "tensorflow")]
    statuses = _statuses(_in_blocks(CELLS, _williams_blocks(variants)))
    assert statuses["Balanced block order within each launch"][:2] == (
        HELD,
        "balanced in 2 of 2 launches of 1 groups",
    )
    assert statuses["No steal time in the bursts"][0] == HELD
    assert statuses["No other load on the machine in the bursts"][0] == HELD
    assert (
        statuses["Waiting workers idle"][0] == HELD and "at most 0.2% of a core" in statuses["Waiting workers idle"][1]
    )
    assert "Balanced block order within each launch" not in _statuses(CELLS), "no cell in blocks: the rows do not apply"


def test_unbalanced_blocks_steal_and_a_spinning_worker_are_named():
    variants = [f"{f}/{MODES[f]}" for f in ("torch", "jax", "tensorflow")]
    ran = _williams_blocks(variants)
    ran[3] = ran[2]  # launch 1 repeats a row: positions and carry-over no longer balanced
    cells = _in_blocks(CELLS, ran, steal={"jax": 3}, idle={"tensorflow": 0.4})
    statuses = _statuses(cells)
    status, measured, where = statuses["Balanced block order within each launch"]
    assert status == NOT_HELD and measured == "balanced in 1 of 2 launches of 1 groups"
    assert where.startswith("inference resnet50 fp32 bs1 launch 1 (")
    status, measured, where = statuses["No steal time in the bursts"]
    assert status == NOT_HELD and measured.startswith("3 of 36 bursts above 5% steal (worst 20.0%), in 1 of 3")
    assert where == "jax/jit resnet50 bs1 (3)"
    status, measured, where = statuses["Waiting workers idle"]
    assert status == NOT_HELD and "40.0% of a core" in measured and where == "tensorflow/xla resnet50 bs1"


def test_a_long_where_is_cut_after_a_whole_item_in_the_papers_table():
    rows = pd.DataFrame(
        [
            {
                "control": "Order",
                "status": NOT_HELD,
                "measured": "m",
                "where": "; ".join(f"group {i}" for i in range(80)),
            }
        ]
    )
    table = lg.ledger_table(rows)
    line = next(line for line in table.splitlines() if line.startswith("Order"))
    where = line.split(" & ")[3]
    assert where.endswith("; more in ledger.csv \\\\") and len(where) < lg.WHERE_CHARS + 40
    assert "group 1;" in where and "group 79" not in where


def test_bursts_beside_other_processes_are_named_and_older_cells_not_measured():
    variants = [f"{f}/{MODES[f]}" for f in ("torch", "jax", "tensorflow")]
    cells = _in_blocks(CELLS, _williams_blocks(variants), load={"torch": 4})
    status, measured, where = _statuses(cells)["No other load on the machine in the bursts"]
    assert status == NOT_HELD and where == f"torch/{MODES['torch']} resnet50 bs1 (4)"
    assert measured.startswith("4 of 36 bursts with other processes above 25% of the machine, in 1 of 3 cells")
    assert "at most 30.0%" in measured
    assert "run again" not in measured, "cells recorded before repeats say nothing of them"
    # the launches run again because they were disturbed (fwbench.running.launches), counted once per group
    for cell in cells:
        cell["provenance"]["group"].update(id="g1")
        cell["provenance"]["group"]["blocks"].update(repeated=[{"launch": 1}], repeat_bound=2)
    measured = _statuses(cells)["No other load on the machine in the bursts"][1]
    assert measured.endswith("; disturbed launches run again: 1 (at most 2 per job)")
    for cell in cells:
        del cell["metrics"]["blocks"]["other_load_share"]
    assert _statuses(cells)["No other load on the machine in the bursts"][0] == NOT_MEASURED


def test_a_framework_at_another_version_than_the_tested_one_is_named_with_its_version():
    cells = copy.deepcopy(CELLS)
    cells[0]["provenance"]["framework"]["versions"].update(torch="2.11.0+cu130", torchvision="0.26.0")
    status, measured, where = _statuses(cells)["Framework versions as tested"]
    assert status == NOT_HELD and measured == "torch 2.11.0+cu130, torchvision 0.26.0"
    assert where == "not the tested versions (the setup table gives them)"


def test_a_cell_whose_measured_launches_found_different_cache_states_is_named():
    """The negative control of the compile launch (fwbench.running.compile_launch): launch 1 cold, later launches
    warm, as a cell's first launch filling its launch cache left them; every launch warm holds."""
    control = "Compile cache alike in measured launches"
    assert control not in _statuses(CELLS), "cells that recorded no cache state: the row does not apply"
    cells = copy.deepcopy(CELLS)
    for cell in cells:
        for trial in cell["metrics"]["trials"]:
            trial["compilation_cache"] = {"state": "warm"}
    assert _statuses(cells)[control][0] == HELD
    cells[0]["metrics"]["trials"][0]["compilation_cache"] = {"state": "cold"}
    status, measured, where = _statuses(cells)[control]
    assert status == NOT_HELD and measured == "2 of 3 cells: one state in every measured launch (warm 2)"
    assert where == "inference torch compile resnet50 fp32 bs1 (launch 1 cold, launches 2-6 warm)"
