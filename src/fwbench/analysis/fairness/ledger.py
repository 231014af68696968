"""The fairness ledger: every control the study claims, with the value this study measured for it and whether it
held, read from the cells' own records (never from the configuration's intent).

A reader of a framework comparison needs to know which of its fairness claims were checked in this run, not in a
test suite somewhere else: so each row cites what the cells recorded (digests, settings, thread counts, compile
times, flags) or what the study's parity rule measured, and says "held", "did not hold" with where, or "not
measured" with why (a CPU has no NVML to list other processes, a cell from before fwbench recorded a digest).

Cells are (framework, execution mode) variants (fwbench.study.modes): PyTorch eager and PyTorch compiled are two cells
of one comparison, named apart in every row, and three controls are about the modes: that the ratios between frameworks
pair compiled with compiled (or say where they do not), that kernel autotuning was alike in every cell, and that no
compiled cell recompiled or broke its graph while timed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import (
    BASELINE,
    escape,
    join_words,
    label,
    ordered_frameworks,
)
from fwbench.analysis.common.partners import (
    PlacementCheck,
    cell_mode,
    check_placement,
    mixed_modes,
    node_of,
    ratio_variant,
    variant_names,
)
from fwbench.analysis.fairness.block_checks import block_order_row, idle_row, load_row, steal_row
from fwbench.analysis.inference.aggregate import graph_breaks, refused
from fwbench.analysis.inference.aggregate import mixed_modes as mixed_ratios
from fwbench.running import order as trial_order
from fwbench.study.modes import is_compiled
from fwbench.trackers.hardware import recorded_core_type

HELD = "held"
NOT_HELD = "did not hold"
NOT_MEASURED = "not measured"
COLUMNS = ["control", "status", "measured", "where"]
WHERE_LIMIT = 4  # cells named in a row before "and N more"
WHERE_CHARS = 240  # characters of a row's "where" the paper's table prints (ledger.csv keeps all)


def _cell_name(result: dict[str, Any]) -> str:
    """A cell as the ledger names it, its mode included (two modes of one framework are two cells)."""
    c = result["cell"]
    return f"{c['suite']} {c['framework']} {cell_mode(c)} {c['model']} {c['precision']} bs{c['batch_size']}"


def _variant(result: dict[str, Any]) -> tuple[str, str]:
    return result["cell"]["framework"], cell_mode(result["cell"])


def _named(names: list[str]) -> str:
    names = sorted(names)
    shown = ", ".join(names[:WHERE_LIMIT])
    return shown + (f" and {len(names) - WHERE_LIMIT} more" if len(names) > WHERE_LIMIT else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _row(control: str, status: str, measured: str, where: str = "") -> dict[str, str]:
    return {"control": control, "status": status, "measured": measured, "where": where}


def _ok(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r.get("status") == "ok"]


def _suite(results: list[dict[str, Any]], suite: str) -> list[dict[str, Any]]:
    return [r for r in results if r["cell"]["suite"] == suite]


def _group_key(result: dict[str, Any]) -> tuple:
    c = result["cell"]
    return (c["suite"], c["model"], c["precision"], c["batch_size"])


def weights_row(results: list[dict[str, Any]], parity: pd.DataFrame) -> dict[str, str]:
    """One weights file per model in every framework's cells, and the study's logits agreeing with PyTorch's."""
    control = "Same weights in every framework"
    files: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r["cell"]["suite"] in ("inference", "training") and r.get("inputs", {}).get("weights_sha256"):
            files[r["cell"]["model"]].add(r["inputs"]["weights_sha256"])
    split = sorted(m for m, digests in files.items() if len(digests) > 1)
    if parity.empty:
        return _row(control, NOT_MEASURED, "no framework's logits were compared with PyTorch's (no PyTorch cells)")
    measured_rows = parity.dropna(subset=["relative_error"])
    parts = []
    for framework in ordered_frameworks(parity["framework"]):
        mine = measured_rows[measured_rows["framework"] == framework]
        if len(mine):
            worst = mine.loc[mine["relative_error"].idxmax()]
            parts.append(f"{label(framework)} {worst['relative_error']:.1e} ({worst['model']})")
    first = parity.iloc[0]
    measured = (
        f"worst relative eval-logit error against PyTorch on {int(first['images'])} validation images at "
        f"{int(first['image_size'])} px: {join_words(parts) if parts else 'none measured'} "
        f"(bound {first['tolerance']:.0e}); one weights file per model in all cells"
        if not split
        else ""
    )
    failing = parity[~parity["holds"].astype(bool)]
    where = [
        f"{r.model} in {label(r.framework)}: "
        + (r.missing if isinstance(r.missing, str) else f"{r.relative_error:.1e}")
        for r in failing.itertuples()
    ]
    where += [f"{model}: {len(files[model])} different weights files among its cells" for model in split]
    if split:
        measured = "the cells of a model read different weights files"
    return _row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def inputs_row(results: list[dict[str, Any]], parity_inputs_equal: bool | None) -> dict[str, str]:
    """The same dataset (manifest digest), the same input batch bytes per comparison (inference), the same epoch
    orders (training): digests compared across the frameworks of every comparison group."""
    control = "Same input bytes and order"
    manifests = {r["inputs"].get("dataset_manifest_sha256") for r in results if r["cell"]["suite"] != "micro"}
    manifests.discard(None)
    fields = {"inference": "input_sha256", "training": "loader_order_sha256", "micro": None}
    unrecorded, differing, compared = [], [], Counter()
    groups: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in _ok(results):
        suite = r["cell"]["suite"]
        metrics = r["metrics"]
        value = metrics.get(fields[suite]) if fields[suite] else (metrics.get("operation") or {}).get("input_sha256")
        if value is None:
            unrecorded.append(_cell_name(r))
            continue
        groups[_group_key(r)][_variant(r)] = value
    for key, by_framework in groups.items():
        if len(by_framework) < 2:
            continue
        compared[key[0]] += 1
        if len(set(by_framework.values())) > 1:
            differing.append(f"{key[0]} {key[1]} {key[2]} bs{key[3]}")
    measured = [f"{len(manifests)} dataset manifest digest{'s' if len(manifests) != 1 else ''} across all cells"]
    what = {"inference": "input batches", "training": "epoch orders", "micro": "operand inputs"}
    measured += [
        f"{what[s]} equal in {n - sum(d.startswith(s) for d in differing)} of {n} groups"
        for s, n in sorted(compared.items())
    ]
    if parity_inputs_equal is not None:
        measured.append("parity inputs " + ("equal" if parity_inputs_equal else "differ"))
    where = []
    if len(manifests) > 1:
        where.append(f"{len(manifests)} different datasets")
    if differing:
        where.append("inputs differ in " + _named(differing))
    if parity_inputs_equal is False:
        where.append("the parity rule's inputs differ between frameworks")
    if where:
        status = NOT_HELD
    elif unrecorded:
        status = NOT_MEASURED
        where.append(f"no digest recorded in {_named(unrecorded)} (cells from before fwbench recorded it)")
    else:
        status = HELD
    return _row(control, status, "; ".join(measured), "; ".join(where))


def _settings(result: dict[str, Any]) -> dict[str, Any]:
    return result["provenance"]["framework"].get("settings", {})


def precision_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Per precision, each framework's dtype and whether TF32 was in effect: equal across frameworks."""
    control = "Same numerical precision"
    policy: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in _ok(results):
        settings = _settings(r)
        if r["cell"]["framework"] == "numpy":
            continue
        tf32 = "TF32 on" if settings.get("tf32_in_effect") else "TF32 off"
        policy[r["cell"]["precision"]][r["cell"]["framework"]].add(f"{settings.get('dtype')}, {tf32}")
    measured, where = [], []
    for precision, by_framework in sorted(policy.items()):
        values = {v for vs in by_framework.values() for v in vs}
        if len(values) == 1:
            measured.append(
                f"{precision}: {values.pop()} in {join_words([label(f) for f in ordered_frameworks(by_framework)])}"
            )
        else:
            detail = "; ".join(f"{label(f)} {' / '.join(sorted(v))}" for f, v in by_framework.items())
            measured.append(f"{precision}: {detail}")
            where.append(f"{precision} cells differ ({detail})")
    if not measured:
        return _row(control, NOT_MEASURED, "no successful cell")
    return _row(control, NOT_HELD if where else HELD, "; ".join(measured), "; ".join(where))


def threads_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The threads each framework computed with (the effective count after pinning, and TensorFlow's two pools):
    one value across all cells of a comparison."""
    control = "Same threads"
    per_framework: dict[str, set[str]] = defaultdict(set)
    clamped = []
    for r in _ok(results):
        fw = r["provenance"]["framework"]
        threads = fw.get("threads", {})
        settings = fw.get("settings", {})
        value = str(threads.get("effective"))
        if "inter_op_threads" in settings and r["cell"]["framework"] == "tensorflow":
            value += f" (intra {settings.get('intra_op_threads')}, inter {settings.get('inter_op_threads')})"
        per_framework[r["cell"]["framework"]].add(value)
        if threads.get("clamped"):
            clamped.append(_cell_name(r))
    if not per_framework:
        return _row(control, NOT_MEASURED, "no successful cell")
    measured = "; ".join(f"{label(f)} {', '.join(sorted(per_framework[f]))}" for f in ordered_frameworks(per_framework))
    counts = {v.split(" ")[0] for vs in per_framework.values() for v in vs}
    where = []
    if len(counts) > 1:
        where.append(f"thread counts differ: {measured}")
    if clamped:
        where.append("fewer threads than requested in " + _named(clamped))
    return _row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def _blas_kernels(result: dict[str, Any]) -> set[str]:
    """The kernels NumPy's BLAS ran in a cell: its own process's record (settings' `process_blas`), else the
    host's (provenance `blas`); empty where neither was recorded."""
    libraries = (_settings(result).get("process_blas") or {}).get("libraries") or []
    chosen = {
        str(pool["architecture"]) for pool in libraries if pool.get("user_api") == "blas" and pool.get("architecture")
    }
    host = (result["provenance"].get("blas") or {}).get("architecture")
    return chosen or ({str(host)} if host else set())


def _forced_against_cpu(cells: list[dict[str, Any]]) -> str:
    """How the forced core type compares with the CPU's instruction set, where the cells recorded both (", below
    this CPU's AVX-512 (BF16)"), else nothing."""
    for r in cells:
        versus = (r["provenance"].get("blas") or {}).get("forced_vs_cpu")
        isa = (r["provenance"].get("hardware") or {}).get("isa_level")
        if versus in ("below", "above") and isa:
            return f"; the forced kernels are {versus} this CPU's {isa}"
        if versus == "same" and isa:
            return f"; the forced kernels are at this CPU's level ({isa})"
    return ""


def _l2_size(cells: list[dict[str, Any]]) -> str:
    """The OPENBLAS_L2_SIZE the cells ran with (OpenBLAS told its cache size), as ", OPENBLAS_L2_SIZE=…"; nothing
    where unset."""
    sizes = {(r["provenance"].get("env") or {}).get("OPENBLAS_L2_SIZE") for r in cells} - {None}
    return "".join(f", OPENBLAS_L2_SIZE={size}" for size in sorted(sizes))


def blas_core_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """The micro suite's NumPy baseline on the BLAS kernels OpenBLAS picks for its CPU, not on a core type forced
    by OPENBLAS_CORETYPE: a forced core type slows current NumPy, and so inflates every speedup over it. The
    machines this study runs on set it (and OPENBLAS_L2_SIZE); the study records it and never changes it, so the
    row says what the baseline ran under. None (no row) in a study without NumPy cells."""
    control = "NumPy baseline on its CPU's own BLAS kernels"
    cells = [r for r in _ok(_suite(results, "micro")) if r["cell"]["framework"] == "numpy"]
    if not cells:
        return None
    forced: dict[str, list[dict[str, Any]]] = defaultdict(list)
    unrecorded = []
    for r in cells:
        value, recorded = recorded_core_type(r["provenance"])
        if not recorded:
            unrecorded.append(_cell_name(r))
        elif value:
            forced[value].append(r)
    kernels = sorted(set().union(*(_blas_kernels(r) for r in cells)))
    ran = f"; OpenBLAS ran its {' / '.join(kernels)} kernels" if kernels else ""
    if forced:
        under = [r for rs in forced.values() for r in rs]
        values = "; ".join(
            f"OPENBLAS_CORETYPE={v} in {len(rs)} of {len(cells)} NumPy cells" for v, rs in forced.items()
        )
        measured = f"{values}{_l2_size(under)}{ran}; set by the machine, recorded and not changed"
        where = "a forced BLAS core type slows current NumPy, so the speedups over NumPy may be overstated"
        where += _forced_against_cpu(under)
        if len(under) < len(cells):
            where += f"; forced in {_named([_cell_name(r) for r in under])}"
        return _row(control, NOT_HELD, measured, where)
    if len(unrecorded) == len(cells):
        return _row(control, NOT_MEASURED, "no NumPy cell recorded its environment")
    measured = f"OPENBLAS_CORETYPE unset in {len(cells) - len(unrecorded)} of {len(cells)} NumPy cells{ran}"
    if unrecorded:
        return _row(control, NOT_MEASURED, measured, f"no environment recorded in {_named(unrecorded)}")
    return _row(control, HELD, measured)


def _compile_seconds(result: dict[str, Any]) -> float:
    """A cell's compilation and first calls, every trial's, and a training cell's compile wall time."""
    metrics = result["metrics"]
    seconds = sum(
        float(t.get("compile_s") or 0.0) + float(t.get("first_call_s") or 0.0)
        for t in metrics.get("trials") or [metrics]
    )
    if result["cell"]["suite"] == "training":
        seconds += float(metrics.get("compile_wall_s") or 0.0)
    return seconds


def compile_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Compilation and first calls kept outside the timed loops: how much time that was per framework and mode (an
    eager mode's is its first calls alone; compiled PyTorch's is torch.compile's tracing and code generation)."""
    control = "Compile time apart from steady state"
    seconds: Counter = Counter()
    for r in _ok(results):
        seconds[_variant(r)] += _compile_seconds(r)
    if not seconds:
        return _row(control, NOT_MEASURED, "no successful cell")
    names = variant_names(seconds)
    parts = [f"{names[v]} {seconds[v]:.1f} s" + ("" if is_compiled(v[1]) else " (eager: first calls)") for v in names]
    return _row(control, HELD, "compile and first calls outside every timed loop: " + ", ".join(parts))


def _pairs(results: list[dict[str, Any]], host_baseline: bool) -> dict[str, PlacementCheck]:
    """Where the cells of each comparison ran ("inference resnet50 fp32 bs1" -> `check_placement` of its
    successful cells, one per framework), for every comparison of two or more frameworks: an inference or micro
    group, or the training cells of one model, precision and batch size. `host_baseline`: keep the micro suite's
    NumPy cells (they run on the host's CPU by design, so they count for the node but not the device model)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in _ok(results):
        if host_baseline or r["cell"]["framework"] != "numpy":
            groups[_group_key(r)].append(r)
    return {"{} {} {} bs{}".format(*key): check_placement(cells) for key, cells in groups.items() if len(cells) > 1}


def device_row(results: list[dict[str, Any]], inference: pd.DataFrame) -> dict[str, str]:
    """One device model for every framework of each comparison, and (on GPUs) the comparable settings equal within
    each comparison. A study may use several device models (on a cluster, one per node), so what must hold is that
    every framework ran on the same ones and the two cells of every ratio on one model (`check_placement`: the GPU
    model on a GPU, the CPU model on a CPU)."""
    control = "Same device and settings"
    devices: dict[str, set[str]] = defaultdict(set)
    for r in _ok(results):
        if r["cell"]["framework"] == "numpy":  # the micro suite's host baseline runs on the CPU by design
            continue
        device = r["provenance"]["framework"].get("device", {})
        devices[r["cell"]["framework"]].add(str(device.get("name") or device.get("platform")))
    if not devices:
        return _row(control, NOT_MEASURED, "no successful cell")
    distinct = {d for ds in devices.values() for d in ds}
    differing = []
    if "settings_differ" in inference:
        flagged = inference[inference["settings_differ"].astype(str) == "True"]
        differing = [f"{r.framework} {r.model} bs{r.batch_size}" for r in flagged.itertuples()]
    pairs = _pairs(results, host_baseline=False)
    split = [f"{name} ({check.model_values()})" for name, check in pairs.items() if check.models_differ]
    measured = f"{', '.join(sorted(distinct))} for {join_words([label(f) for f in ordered_frameworks(devices)])}"
    if pairs:
        measured += f"; one device model in {len(pairs) - len(split)} of {len(pairs)} comparison pairs"
    where = []
    if split:
        where.append("device models differ within " + _named(split))
    elif len({frozenset(d) for d in devices.values()}) > 1:  # the frameworks' devices differ outside any pair
        where.append(
            "frameworks ran on different devices: "
            + "; ".join(f"{label(f)} {', '.join(sorted(d))}" for f, d in devices.items())
        )
    if differing:
        where.append("GPU settings differ from the partner cell in " + _named(differing))
    return _row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def node_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The cells of each comparison on one node (on a cluster a SLURM job may land anywhere): a ratio across nodes
    of one device model is kept, but two boards of one model still differ (clocks, cooling, the node's CPU)."""
    control = "Same node for each pair"
    nodes = {node_of(r) for r in _ok(results)} - {None}
    if not nodes:
        return _row(control, NOT_MEASURED, "no cell recorded its node (cells from before fwbench recorded it)")
    if len(nodes) == 1:
        return _row(control, HELD, f"every cell ran on 1 node ({nodes.pop()})")
    pairs = _pairs(results, host_baseline=True)
    split = [f"{name} ({check.node_values()})" for name, check in pairs.items() if check.nodes_differ]
    measured = f"{len(nodes)} nodes; {len(pairs) - len(split)} of {len(pairs)} comparison pairs each on one node"
    return _row(control, NOT_HELD if split else HELD, measured, "nodes differ within " + _named(split) if split else "")


ORDER_SUITES = (
    "inference",
    "micro",
)  # the suites whose cells run in interleaved rounds (fwbench.running.runner.run_group)


def _order_name(result: dict[str, Any]) -> str:
    """A variant as the runner names it in a round's order ("torch/compile")."""
    framework, mode = _variant(result)
    return f"{framework}/{mode}"


def _round_orders(cells: list[dict[str, Any]]) -> list[list[str]]:
    """Each round of a group in the order it ran: the trials' recorded `round_order`, or, in results from before
    fwbench recorded it, the order the cells' trials record (their positions in each round; a cell that failed is
    then missing from the rounds it ran in)."""
    recorded: dict[int, list[str]] = {}
    positions: dict[int, dict[int, str]] = defaultdict(dict)
    for r in cells:
        for k, trial in enumerate(r["metrics"].get("trials") or []):
            round_ = trial.get("round") or k + 1
            if trial.get("round_order"):
                recorded.setdefault(round_, list(trial["round_order"]))
            if trial.get("order") is not None:
                positions[round_][trial["order"]] = _order_name(r)
    rounds = sorted(set(recorded) | set(positions))
    return [recorded.get(k) or [positions[k][p] for p in sorted(positions[k])] for k in rounds]


def order_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """The trial order of every comparison group (inference and micro) balanced, from the orders that ran: each
    variant first (and in every position) equally often, and right after each other variant equally often (no
    carry-over from the child before confounded with a ratio). A Williams design (fwbench.running.order) gives both with
    n rounds for n variants (2n for odd n); fewer rounds, or a cell that failed and left, leave them unbalanced,
    and the row says what."""
    control = "Interleaved, balanced trial order"
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    in_blocks = False
    for suite in ORDER_SUITES:
        for r in _ok(_suite(results, suite)):
            if (r["provenance"].get("group") or {}).get("blocks"):
                in_blocks = True  # its order is the blocks' (block_checks.block_order_row), not the launches'
                continue
            groups[_group_key(r)].append(r)
    if not groups and in_blocks:
        return None
    if not groups:
        return _row(control, NOT_MEASURED, "no inference or micro cells")
    single, rounds_of = [], defaultdict(Counter)
    unbalanced: dict[tuple[int, int], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for key, cells in groups.items():
        name = "{} {} {} bs{}".format(*key)
        orders = _round_orders(cells)
        rounds_of[key[0]][len(orders)] += 1
        if len(orders) < 2:
            single.append(name)
            continue
        variants = [_order_name(r) for r in cells]
        if len(variants) < 2:
            continue
        for problem in trial_order.balance(orders, variants).problems():
            unbalanced[(len(orders), len(variants))][problem].append(name)
    if len(single) == len(groups):
        return _row(control, NOT_MEASURED, "one trial per cell: nothing to interleave", "every comparison group")
    measured = []
    for suite, counts in rounds_of.items():
        if len(counts) == 1:
            ((rounds, n),) = counts.items()
            measured.append(f"{suite}: {_plural(n, 'group')} in {_plural(rounds, 'round')}")
        else:
            spread = ", ".join(f"{n} in {_plural(rounds, 'round')}" for rounds, n in sorted(counts.items()))
            measured.append(f"{suite}: {_plural(sum(counts.values()), 'group')} ({spread})")
    interleaved = len(groups) - len(single)
    flawed = {name for problems in unbalanced.values() for names in problems.values() for name in names}
    measured.append(f"balanced (positions and carry-over) in {interleaved - len(flawed)} of {interleaved} groups")
    where = []
    for (rounds, n), problems in sorted(unbalanced.items()):
        needed = trial_order.rounds_needed(n)
        where.append(
            f"{_plural(rounds, 'round')} for {n} variants (a balanced order needs a multiple of {needed}): "
            + "; ".join(f"{problem} in {_named(names)}" for problem, names in problems.items())
        )
    if single:
        where.append(f"one trial in {_plural(len(single), 'group')} ({_named(single)})")
    return _row(control, NOT_HELD if where else HELD, "; ".join(measured), "; ".join(where))


def noise_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No noisy trial: each trial judged on its own samples (IQR above 10% of its median, `metrics.noisy_trials`
    and each trial's `noisy`), so that differences between processes are not counted as noise; a cell is flagged
    (`flags.noisy`) when at least one of its trials is. Results from before the per-trial flag carry the pooled
    samples' flag, and the row says how many."""
    control = "Not noisy (each trial's IQR at most 10% of its median)"
    ok = [r for r in _ok(results) if r["cell"]["suite"] in ("inference", "micro")]
    if not ok:
        return _row(control, NOT_MEASURED, "no inference or micro cells")
    flagged, noisy, trials, pooled = [], 0, 0, 0
    for r in ok:
        metrics = r["metrics"]
        flag = bool((metrics.get("flags") or {}).get("noisy"))
        if metrics.get("noisy_trials") is None:
            pooled += 1
            if flag:
                flagged.append(f"{_cell_name(r)} (pooled samples)")
            continue
        count, here = len(metrics.get("trials") or []) or 1, int(metrics["noisy_trials"])
        trials, noisy = trials + count, noisy + here
        if flag or here:
            flagged.append(f"{_cell_name(r)} ({here} of {count} trials)")
    measured = f"{len(flagged)} of {len(ok)} cells had a noisy trial"
    if trials:
        measured += f" ({noisy} of {trials} trials noisy)"
    if pooled:
        measured += f"; {_plural(pooled, 'cell')} recorded only the pooled samples' flag (before per-trial flags)"
    return _row(control, NOT_HELD if flagged else HELD, measured, _named(flagged))


def flag_row(
    control: str, results: list[dict[str, Any]], flag: str, what: str, suites: tuple[str, ...] = ("inference", "micro")
) -> dict[str, str]:
    """A per-cell flag that must be off everywhere (noisy, CI not reached, recompiled), in the suites it exists in."""
    ok = [r for r in _ok(results) if r["cell"]["suite"] in suites]
    flagged = [_cell_name(r) for r in ok if (r["metrics"].get("flags") or {}).get(flag)]
    measured = f"{len(flagged)} of {len(ok)} cells {what}"
    return _row(control, NOT_HELD if flagged else HELD, measured, _named(flagged))


def recompile_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No compiled cell recompiled while timed (a retrace, a recompilation, or torch.compile falling back to a graph
    break inside the timed loop: `flags.recompiled`), in any suite, and no torch.compile graph break at all (a break
    runs part of the program eagerly, so the compiled cell is not wholly the compiled program it is named)."""
    control = "No recompilation or graph break while timed"
    ok = _ok(results)
    recompiled = [_cell_name(r) for r in ok if (r["metrics"].get("flags") or {}).get("recompiled")]
    breaks = {_cell_name(r): graph_breaks(r["metrics"]) for r in ok}
    broken = [f"{name} ({count})" for name, count in breaks.items() if count]
    counted = sum(count is not None for count in breaks.values())
    measured = f"{len(recompiled)} of {len(ok)} cells recompiled inside the timed loop"
    if counted:
        measured += f"; {len(broken)} of {counted} torch.compile cells had graph breaks"
    where = [
        f"recompiled in {_named(recompiled)}" if recompiled else "",
        f"graph breaks in {_named(broken)}" if broken else "",
    ]
    return _row(control, NOT_HELD if recompiled or broken else HELD, measured, "; ".join(filter(None, where)))


def _ratio_modes(results: list[dict[str, Any]], suite: str, config: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(comparison, mixed) of every ratio between frameworks of `suite` as the analysis pairs it
    (`partners.ratio_variant`: each framework's ratio mode, its first successful mode standing in), from the
    successful cells: a ratio per other framework and comparison where PyTorch and it have a cell."""
    groups: dict[tuple, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in _ok(_suite(results, suite)):
        framework, mode = _variant(r)
        groups[_group_key(r)][framework].append(mode)
    out = []
    for key, modes in groups.items():
        base = ratio_variant(BASELINE, modes.get(BASELINE, []), config)[0]
        for framework in (f for f in ordered_frameworks(modes) if f != BASELINE):
            mode = ratio_variant(framework, modes[framework], config)[0]
            if base is not None and mode is not None:
                out.append((f"{key[0]} {framework} {key[1]} {key[2]} bs{key[3]}", mixed_modes(mode, base)))
    return out


def _inference_pairing(speedups: pd.DataFrame) -> list[tuple[str, bool]]:
    """(comparison, mixed) of every computed inference ratio of the speedups table (`mixed_modes`)."""
    kept = speedups[~refused(speedups)]
    names = [f"inference {r.numerator} {r.model} {r.precision} bs{r.batch_size}" for r in kept.itertuples()]
    return list(zip(names, mixed_ratios(kept).tolist(), strict=True))


# How a mixed ratio is shown, per suite: the tables mark it ($^m$ or the column's named pairing), the conclusions
# name both modes in the sentence that gives it.
SHOWN = {"inference": "each marked in its table", "training": "each named as such in the conclusions"}


def pairing_row(
    results: list[dict[str, Any]], speedups: pd.DataFrame | None, config: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The ratios between frameworks pair compiled programs with compiled ones, or every one that sets an eager
    program against a compiled one (eager PyTorch standing in where no compiled PyTorch cell exists) is marked.
    Inference ratios are read from the speedups table (its `mixed_modes` column is what the tables mark); training
    ratios from the cells, paired as the conclusions pair them (they name the modes of a mixed one). Without the
    speedups table the inference pairing is derived from the cells, and whether its mixed ratios are marked is not
    measured here."""
    control = "Ratios pair compiled with compiled"
    config = config or {}
    read = speedups is not None and "mixed_modes" in speedups
    suites = {
        "inference": _inference_pairing(speedups) if read else _ratio_modes(results, "inference", config),
        "training": _ratio_modes(results, "training", config),
    }
    shown = SHOWN | ({} if read else {"inference": "whether marked is read from the speedups table, not given"})
    parts, where = [], []
    for suite, ratios in suites.items():
        mixed = [name for name, is_mixed in ratios if is_mixed]
        if ratios:
            parts.append(f"{suite}: {len(ratios) - len(mixed)} of {len(ratios)} ratios pair compiled with compiled")
        if mixed:
            parts[-1] += f", {len(mixed)} set a compiled program against an eager one ({shown[suite]})"
            where.append(f"{suite}: {_named(mixed)}")
    if not parts:
        return _row(control, NOT_MEASURED, "no ratio between frameworks (no comparison with PyTorch and another)")
    unread = not read and any(is_mixed for _, is_mixed in suites["inference"])
    return _row(control, NOT_MEASURED if unread else HELD, "; ".join(parts), "; ".join(where))


def autotune_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Kernel autotuning alike: every cell recorded the same `autotune` setting, and where it could be in effect (a
    GPU) it was in effect in every framework alike; on a CPU no framework autotunes kernels (in_effect None)."""
    control = "Autotuning alike"
    settings: dict[str, list[str]] = defaultdict(list)
    effect: dict[str, set[Any]] = defaultdict(set)
    unrecorded = []
    for r in _ok(results):
        record = _settings(r).get("autotune")
        if not isinstance(record, dict):
            if r["cell"]["framework"] != "numpy":  # the host baseline tunes nothing: its record is optional
                unrecorded.append(_cell_name(r))
            continue
        settings[str(record.get("setting"))].append(_cell_name(r))
        if record.get("in_effect") is not None:
            effect[r["cell"]["framework"]].add(bool(record["in_effect"]))
    if not settings:
        return _row(control, NOT_MEASURED, "no cell recorded its autotune setting (cells from before fwbench did)")
    count = sum(len(cells) for cells in settings.values())
    measured = "; ".join(f"{setting} in {len(cells)} of {count} cells" for setting, cells in sorted(settings.items()))
    if effect:
        measured += "; in effect: " + ", ".join(
            f"{label(f)} {'/'.join('yes' if e else 'no' for e in sorted(effect[f]))}"
            for f in ordered_frameworks(effect)
        )
    else:
        measured += "; not applicable: every cell ran on a CPU, where no framework autotunes kernels"
    where = []
    if len(settings) > 1:
        where.append("settings differ: " + "; ".join(f"{s} in {_named(c)}" for s, c in sorted(settings.items())))
    if len({frozenset(e) for e in effect.values()}) > 1:
        where.append("in effect in some frameworks only")
    if where:
        return _row(control, NOT_HELD, measured, "; ".join(where))
    if unrecorded:
        return _row(control, NOT_MEASURED, measured, f"no autotune record in {_named(unrecorded)}")
    return _row(control, HELD, measured)


def isolation_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No other process on the GPU when a cell started (NVML); on a CPU there is no such list to read."""
    control = "Device to itself"
    checked = [r for r in _ok(results) if r["metrics"].get("isolation")]
    if not checked:
        reasons = {(r["metrics"].get("missing") or {}).get("isolation") for r in _ok(results)} - {None}
        reason = sorted(reasons)[0] if reasons else "no cell recorded it"
        return _row(control, NOT_MEASURED, f"cells ran one at a time; other processes not listed: {reason}")
    flagged = [_cell_name(r) for r in checked if (r["metrics"].get("flags") or {}).get("other_gpu_processes")]
    measured = f"{len(checked)} cells checked with NVML; {len(flagged)} found other processes"
    return _row(control, NOT_HELD if flagged else HELD, measured, _named(flagged))


def deviations_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Cells that ran with a workaround of the fallback ladder (a difference the paper must show)."""
    control = "No workarounds"
    deviating = [
        f"{_cell_name(r)} ({', '.join(d.get('name', '?') for d in r['deviations'])})"
        for r in results
        if r.get("deviations")
    ]
    measured = f"{len(deviating)} of {len(results)} cells ran with a workaround"
    return _row(control, NOT_HELD if deviating else HELD, measured, _named(deviating))


def failures_row(results: list[dict[str, Any]]) -> dict[str, str]:
    control = "Every cell measured"
    failed = [r for r in results if r.get("status") != "ok"]
    kinds = Counter((r.get("failure") or {}).get("kind", "unknown") for r in failed)
    measured = f"{len(results) - len(failed)} of {len(results)} cells succeeded"
    where = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    if failed:
        where += ": " + _named([_cell_name(r) for r in failed])
    return _row(control, NOT_HELD if failed else HELD, measured, where)


def ledger(
    results: Iterable[dict[str, Any]],
    parity: pd.DataFrame,
    inference: pd.DataFrame,
    speedups: pd.DataFrame | None = None,
    config: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Every row of the ledger (COLUMNS), in the order the paper prints them (a row that does not apply to the study,
    such as the NumPy baseline's BLAS without NumPy cells, left out). `speedups`: the inference ratios
    (speedups.csv), whose `mixed_modes` the pairing control reads; `config`: the study's (its ratio_modes)."""
    results = list(results)
    parity_inputs = bool(parity["same_inputs"].astype(bool).all()) if len(parity) else None
    rows = [
        weights_row(results, parity),
        inputs_row(results, parity_inputs),
        precision_row(results),
        threads_row(results),
        blas_core_row(results),
        compile_row(results),
        pairing_row(results, speedups, config),
        autotune_row(results),
        device_row(results, inference),
        node_row(results),
        order_row(results),
        block_order_row(results),
        steal_row(results),
        load_row(results),
        idle_row(results),
        deviations_row(results),
        noise_row(results),
        # only the micro suite still times a loop to a CI target; inference cells are measured in blocks
        flag_row("CI target reached", results, "ci_not_reached", "stopped before their CI target", ("micro",)),
        recompile_row(results),
        isolation_row(results),
        failures_row(results),
    ]
    return pd.DataFrame([row for row in rows if row is not None], columns=COLUMNS)


def ledger_table(rows: pd.DataFrame) -> str:
    """The ledger as a full-width LaTeX table: control, status, what was measured and where it did not hold."""
    lines = [
        r"\begin{table*}[t]",
        r"\centering",
        r"\caption{Fairness ledger: every control of the comparison with what this study measured for it, from the "
        r"cells' own records and the study's parity rule. ``Did not hold'' names where; ``not measured'' says why.}",
        r"\label{tab:ledger}",
        r"\footnotesize",
        # Ragged right: cell names and digests do not justify well in narrow columns.
        r"\begin{tabular}{@{}"
        + "".join(rf">{{\raggedright\arraybackslash}}p{{{width}\textwidth}}" for width in (0.16, 0.08, 0.37, 0.28))
        + "@{}}",
        r"\toprule",
        r"Control & Status & Measured in this study & Where it did not hold, or why not measured \\",
        r"\midrule",
    ]
    for row in rows.itertuples():
        status = r"\textbf{" + escape(row.status) + "}" if row.status == NOT_HELD else escape(row.status)
        where = escape(_shortened(row.where or ""))
        lines.append(f"{escape(row.control)} & {status} & {escape(row.measured)} & {where} \\\\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def _shortened(where: str, limit: int = WHERE_CHARS) -> str:
    """A row's "where" as the table prints it: at most `limit` characters, cut after a whole item, the rest in
    ledger.csv (a table* float must fit one page)."""
    if len(where) <= limit:
        return where
    cut = max(where.rfind("; ", 0, limit), where.rfind(", ", 0, limit))
    return (where[:cut] if cut > 0 else where[:limit]) + "; more in ledger.csv"


def ledger_sentence(rows: pd.DataFrame) -> str:
    """The section's lead: how many controls held, which did not, which could not be measured."""
    counts = Counter(rows["status"])
    not_held = rows[rows["status"] == NOT_HELD]["control"].tolist()
    missing = rows[rows["status"] == NOT_MEASURED]["control"].tolist()
    text = f"Of the {len(rows)} controls in Table~\\ref{{tab:ledger}}, {counts[HELD]} held in this study"
    if not_held:
        text += f"; {len(not_held)} did not: {_in_sentence(not_held)}"
    if missing:
        text += f"; {len(missing)} could not be measured here: {_in_sentence(missing)}"
    return text + "."


def _in_sentence(controls: list[str]) -> str:
    """Control names inside a sentence, escaped (a name may hold "%", which would end the line in LaTeX), each with
    its first letter lowered unless it begins an abbreviation ("CI target reached" stays)."""
    return join_words(
        [escape(c[:1].lower() + c[1:] if c[1:2].islower() else c) for c in controls],
    )


def ledger_section(rows: pd.DataFrame) -> str:
    return "\n\n".join(
        [
            r"\section{Fairness ledger}",
            r"\label{sec:ledger}",
            "Each claim of fairness is checked in the study itself, from what every cell recorded and from a rule "
            "that runs every model's study weights in every framework on the same validation images and compares "
            "the logits with PyTorch's. " + ledger_sentence(rows),
            ledger_table(rows),
        ]
    )
