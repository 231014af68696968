"""The fairness ledger's checks of warm workers in blocks (fwbench.scenarios.blocks): the block order balanced within
each launch, bursts without steal or other processes' load, and waiting workers that use no CPU.

Each check reads what the cells recorded (provenance.group.blocks, metrics.blocks); in a study without cells
measured in blocks (older results, or only the micro suite, which does not run in blocks yet) the rows do not apply
and are left out (None).
"""

from __future__ import annotations

from typing import Any

from fwbench.analysis.common.partners import cell_mode
from fwbench.running import order as trial_order
from fwbench.scenarios.blocks import OTHER_LOAD_FLAG, STEAL_FLAG

HELD, NOT_HELD, NOT_MEASURED = "held", "did not hold", "not measured"
IDLE_CPU_LIMIT = 0.05  # CPU seconds per wall second a waiting worker may use: 5% of one core
WHERE_LIMIT = 4


def _row(control: str, status: str, measured: str, where: str = "") -> dict[str, str]:
    return {"control": control, "status": status, "measured": measured, "where": where}


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:WHERE_LIMIT])
    return shown + (f" and {len(names) - WHERE_LIMIT} more" if len(names) > WHERE_LIMIT else "")


def _in_blocks(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["status"] == "ok" and (r.get("metrics") or {}).get("blocks")]


def _group_name(result: dict[str, Any]) -> str:
    cell = result["cell"]
    return f"{cell['suite']} {cell['model']} {cell['precision']} bs{cell['batch_size']}"


def block_order_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """Within every launch of every group, each variant in each position of a block, and right after each other
    variant, equally often (from the orders that ran, provenance.group.blocks.ran); a worker that failed leaves
    the later blocks unbalanced, which the row names."""
    control = "Balanced block order within each launch"
    groups: dict[str, tuple[dict[str, Any], str]] = {}
    for result in _in_blocks(results):
        group = result["provenance"].get("group") or {}
        if group.get("blocks"):
            groups.setdefault(group["id"], (group, _group_name(result)))
    if not groups:
        return None
    unbalanced, launches = [], 0
    for group, name in groups.values():
        per_launch = len(group["blocks"]["ran"]) // max(1, group.get("rounds") or 1)
        ran, variants = group["blocks"]["ran"], group["order"]["variants"]
        for start in range(0, len(ran), max(1, per_launch)):
            launches += 1
            balance = trial_order.balance(ran[start : start + per_launch], variants)
            if len(variants) > 1 and not balance.balanced:
                unbalanced.append(f"{name} launch {start // per_launch + 1} ({'; '.join(balance.problems())})")
    measured = f"balanced in {launches - len(unbalanced)} of {launches} launches of {len(groups)} groups"
    return _row(control, NOT_HELD if unbalanced else HELD, measured, _named(unbalanced))


def steal_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """No burst lost more than STEAL_FLAG of the machine's CPU time to other guests (flagged, not dropped)."""
    control = "No steal time in the bursts"
    cells = _in_blocks(results)
    if not cells:
        return None
    bursts = sum(r["metrics"]["blocks"]["bursts"] for r in cells)
    flagged = [(r, r["metrics"]["blocks"]["steal_flagged"]) for r in cells if r["metrics"]["blocks"]["steal_flagged"]]
    worst = max((r["metrics"]["blocks"]["steal_share_max"] or 0.0 for r in cells), default=0.0)
    measured = (
        f"{sum(n for _, n in flagged)} of {bursts} bursts above {STEAL_FLAG:.0%} steal "
        f"(worst {worst:.1%}), in {len(flagged)} of {len(cells)} cells"
    )
    where = _named([f"{_cell(r)} ({n})" for r, n in flagged])
    return _row(control, NOT_HELD if flagged else HELD, measured, where)


def load_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """No other process (another job, a test run, a daemon) used more than OTHER_LOAD_FLAG of the machine's CPU
    time during a burst; flagged, not dropped. A study running beside other work shows here, where steal does not
    (the machine's own processes are not the hypervisor's other guests). Cells recorded before the check: not
    measured."""
    control = "No other load on the machine in the bursts"
    cells = _in_blocks(results)
    if not cells:
        return None
    recorded = [r for r in cells if r["metrics"]["blocks"].get("other_load_share") is not None]
    if not recorded:
        return _row(control, NOT_MEASURED, "the cells recorded no other load (/proc/stat unreadable, or older cells)")
    bursts = sum(r["metrics"]["blocks"]["bursts"] for r in recorded)
    flagged = [(r, r["metrics"]["blocks"]["load_flagged"]) for r in recorded if r["metrics"]["blocks"]["load_flagged"]]
    worst = max(recorded, key=lambda r: r["metrics"]["blocks"]["other_load_share"])
    measured = (
        f"{sum(n for _, n in flagged)} of {bursts} bursts with other processes above {OTHER_LOAD_FLAG:.0%} of the "
        f"machine, in {len(flagged)} of {len(recorded)} cells; their share over a cell's bursts at most "
        f"{worst['metrics']['blocks']['other_load_share']:.1%} ({_cell(worst)}){_repeats(cells)}"
    )
    return _row(control, NOT_HELD if flagged else HELD, measured, _named([f"{_cell(r)} ({n})" for r, n in flagged]))


def _repeats(results: list[dict[str, Any]]) -> str:
    """The launches run again because they were disturbed (fwbench.running.launches), counted once per group."""
    groups = {}
    for result in results:
        group = result["provenance"].get("group") or {}
        blocks = group.get("blocks") or {}
        if "repeated" in blocks:
            groups[group.get("id")] = (len(blocks["repeated"]), blocks.get("repeat_bound"))
    if not groups:
        return ""
    bound = max((b for _, b in groups.values() if b is not None), default=0)
    return f"; disturbed launches run again: {sum(n for n, _ in groups.values())} (at most {bound} per job)"


def idle_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """A waiting worker uses at most IDLE_CPU_LIMIT of a core (its framework's thread pools might spin, and take
    the CPU from the worker that runs)."""
    control = "Waiting workers idle"
    cells = [r for r in _in_blocks(results) if r["metrics"]["blocks"].get("idle_cpu_per_wall") is not None]
    if not _in_blocks(results):
        return None
    if not cells:
        return _row(control, NOT_MEASURED, "no worker waited (one variant per group)")
    busy = [r for r in cells if r["metrics"]["blocks"]["idle_cpu_per_wall"] > IDLE_CPU_LIMIT]
    worst = max(cells, key=lambda r: r["metrics"]["blocks"]["idle_cpu_per_wall"])
    measured = (
        f"at most {worst['metrics']['blocks']['idle_cpu_per_wall']:.1%} of a core while waiting ({_cell(worst)}); "
        f"{len(busy)} of {len(cells)} cells above {IDLE_CPU_LIMIT:.0%}"
    )
    return _row(control, NOT_HELD if busy else HELD, measured, _named([_cell(r) for r in busy]))


def _cell(result: dict[str, Any]) -> str:
    cell = result["cell"]
    return f"{cell['framework']}/{cell_mode(cell)} {cell['model']} bs{cell['batch_size']}"
