"""The fairness ledger's checks of where and in what order the cells ran: one device model (and equal GPU settings)
for every framework of a comparison, the cells of each pair on one node, a trial order interleaved and balanced
across the variants of every group, and the device to itself while a cell ran.

A ratio compares two cells; what these rows check is that nothing but the framework told the two apart: not the
board (`partners.check_placement`), not the node, not the position in a round (fwbench.running.order), not another
process on the GPU.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import join_words, label, ordered_frameworks
from fwbench.analysis.common.partners import PlacementCheck, check_placement, node_of
from fwbench.analysis.fairness.rows import (
    HELD,
    NOT_HELD,
    NOT_MEASURED,
    cell_name,
    group_key,
    in_suite,
    named,
    plural,
    row,
    succeeded,
    variant_of,
)
from fwbench.running import order as trial_order


def _pairs(results: list[dict[str, Any]], host_baseline: bool) -> dict[str, PlacementCheck]:
    """Where the cells of each comparison ran ("inference resnet50 fp32 bs1" -> `check_placement` of its
    successful cells, one per framework), for every comparison of two or more frameworks: an inference or micro
    group, or the training cells of one model, precision and batch size. `host_baseline`: keep the micro suite's
    NumPy cells (they run on the host's CPU by design, so they count for the node but not the device model)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in succeeded(results):
        if host_baseline or r["cell"]["framework"] != "numpy":
            groups[group_key(r)].append(r)
    return {"{} {} {} bs{}".format(*key): check_placement(cells) for key, cells in groups.items() if len(cells) > 1}


def device_row(results: list[dict[str, Any]], inference: pd.DataFrame) -> dict[str, str]:
    """One device model for every framework of each comparison, and (on GPUs) the comparable settings equal within
    each comparison. A study may use several device models (on a cluster, one per node), so what must hold is that
    every framework ran on the same ones and the two cells of every ratio on one model (`check_placement`: the GPU
    model on a GPU, the CPU model on a CPU)."""
    control = "Same device and settings"
    devices: dict[str, set[str]] = defaultdict(set)
    for r in succeeded(results):
        if r["cell"]["framework"] == "numpy":  # the micro suite's host baseline runs on the CPU by design
            continue
        device = r["provenance"]["framework"].get("device", {})
        devices[r["cell"]["framework"]].add(str(device.get("name") or device.get("platform")))
    if not devices:
        return row(control, NOT_MEASURED, "no successful cell")
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
        where.append("device models differ within " + named(split))
    elif len({frozenset(d) for d in devices.values()}) > 1:  # the frameworks' devices differ outside any pair
        where.append(
            "frameworks ran on different devices: "
            + "; ".join(f"{label(f)} {', '.join(sorted(d))}" for f, d in devices.items())
        )
    if differing:
        where.append("GPU settings differ from the partner cell in " + named(differing))
    return row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def node_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The cells of each comparison on one node (on a cluster a SLURM job may land anywhere): a ratio across nodes
    of one device model is kept, but two boards of one model still differ (clocks, cooling, the node's CPU)."""
    control = "Same node for each pair"
    nodes = {node_of(r) for r in succeeded(results)} - {None}
    if not nodes:
        return row(control, NOT_MEASURED, "no cell recorded its node (cells from before fwbench recorded it)")
    if len(nodes) == 1:
        return row(control, HELD, f"every cell ran on 1 node ({nodes.pop()})")
    pairs = _pairs(results, host_baseline=True)
    split = [f"{name} ({check.node_values()})" for name, check in pairs.items() if check.nodes_differ]
    measured = f"{len(nodes)} nodes; {len(pairs) - len(split)} of {len(pairs)} comparison pairs each on one node"
    return row(control, NOT_HELD if split else HELD, measured, "nodes differ within " + named(split) if split else "")


ORDER_SUITES = (
    "inference",
    "micro",
)  # the suites whose cells run in interleaved rounds (fwbench.running.runner.run_group)


def _order_name(result: dict[str, Any]) -> str:
    """A variant as the runner names it in a round's order ("torch/compile")."""
    framework, mode = variant_of(result)
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
        for r in succeeded(in_suite(results, suite)):
            if (r["provenance"].get("group") or {}).get("blocks"):
                in_blocks = True  # its order is the blocks' (block_checks.block_order_row), not the launches'
                continue
            groups[group_key(r)].append(r)
    if not groups and in_blocks:
        return None
    if not groups:
        return row(control, NOT_MEASURED, "no inference or micro cells")
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
        return row(control, NOT_MEASURED, "one trial per cell: nothing to interleave", "every comparison group")
    measured = []
    for suite, counts in rounds_of.items():
        if len(counts) == 1:
            ((rounds, n),) = counts.items()
            measured.append(f"{suite}: {plural(n, 'group')} in {plural(rounds, 'round')}")
        else:
            spread = ", ".join(f"{n} in {plural(rounds, 'round')}" for rounds, n in sorted(counts.items()))
            measured.append(f"{suite}: {plural(sum(counts.values()), 'group')} ({spread})")
    interleaved = len(groups) - len(single)
    flawed = {name for problems in unbalanced.values() for names in problems.values() for name in names}
    measured.append(f"balanced (positions and carry-over) in {interleaved - len(flawed)} of {interleaved} groups")
    where = []
    for (rounds, n), problems in sorted(unbalanced.items()):
        needed = trial_order.rounds_needed(n)
        where.append(
            f"{plural(rounds, 'round')} for {n} variants (a balanced order needs a multiple of {needed}): "
            + "; ".join(f"{problem} in {named(names)}" for problem, names in problems.items())
        )
    if single:
        where.append(f"one trial in {plural(len(single), 'group')} ({named(single)})")
    return row(control, NOT_HELD if where else HELD, "; ".join(measured), "; ".join(where))


def isolation_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No other process on the GPU when a cell started (NVML); on a CPU there is no such list to read."""
    control = "Device to itself"
    checked = [r for r in succeeded(results) if r["metrics"].get("isolation")]
    if not checked:
        reasons = {(r["metrics"].get("missing") or {}).get("isolation") for r in succeeded(results)} - {None}
        reason = sorted(reasons)[0] if reasons else "no cell recorded it"
        return row(control, NOT_MEASURED, f"cells ran one at a time; other processes not listed: {reason}")
    flagged = [cell_name(r) for r in checked if (r["metrics"].get("flags") or {}).get("other_gpu_processes")]
    measured = f"{len(checked)} cells checked with NVML; {len(flagged)} found other processes"
    return row(control, NOT_HELD if flagged else HELD, measured, named(flagged))
