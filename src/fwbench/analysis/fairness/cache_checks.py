"""The fairness ledger's check of the compile cache across a cell's launches (compile.launch_cache,
fwbench.backends.launch_cache): every measured launch of a cell started in the same cache state.

A cell's launches are the unit of its interval, so a launch that compiled cold beside launches that loaded the cache
confounds the cache with the launch order (on an H200 compiled ResNet-50 ran 13,980 img/s in its cold launch 1 and
13,358 in its warm launch 2). The runner runs the cold compile in a compile launch of its own
(fwbench.running.compile_launch) so that every measured launch finds the cache warm; without the launch cache every
launch compiles cold, which is one state too. The check reads what each measured launch's process recorded
(`metrics.trials[].compilation_cache.state`); cells recorded before the record, or measured in one launch, are not
checked, and a study without any such cell has no row (None).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fwbench.analysis.fairness.rows import HELD, NOT_HELD, cell_name, named, plural, row, succeeded

CONTROL = "Compile cache alike in measured launches"


def launch_states(result: dict[str, Any]) -> list[str | None]:
    """The compile-cache state each measured launch of a cell found (None where a launch recorded none)."""
    return [((t.get("compilation_cache") or {}).get("state")) for t in (result["metrics"].get("trials") or [])]


def launch_cache_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """Every measured launch of every cell found its compile cache in the same state (all warm after a compile
    launch, all cold or disabled without the launch cache, "not applicable (eager)" in an eager mode); did not hold
    names the cells whose launches differed, with each launch's state."""
    checked = []
    for result in succeeded(results):
        states = launch_states(result)
        if len(states) > 1 and any(state is not None for state in states):
            checked.append((result, states))
    if not checked:
        return None
    mixed = [(r, states) for r, states in checked if len(set(states)) > 1]
    found = Counter(states[0] for _, states in checked if len(set(states)) == 1)
    # short: the paper's ledger is one table on one page (the counts of each state say what the launches found)
    counts = ", ".join(f"{state} {n}" for state, n in sorted(found.items(), key=str))
    measured = f"{len(checked) - len(mixed)} of {plural(len(checked), 'cell')}: one state in every measured launch"
    measured += f" ({counts})" if counts else ""
    return row(
        CONTROL, NOT_HELD if mixed else HELD, measured, named([f"{cell_name(r)} ({_runs(s)})" for r, s in mixed])
    )


def _runs(states: list[str | None]) -> str:
    """Each launch's state, consecutive launches alike as one: "launch 1 cold, launches 2-3 warm"."""
    runs: list[list] = []
    for number, state in enumerate(states, start=1):
        if runs and runs[-1][2] == state:
            runs[-1][1] = number
        else:
            runs.append([number, number, state])
    return ", ".join(
        f"launch {first} {state}" if first == last else f"launches {first}-{last} {state}"
        for first, last, state in runs
    )
