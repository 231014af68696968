"""Rounds of fresh children: the trials of a group without blocks (a training cell), one process per trial.

Each round starts one child per cell still in the group, in the order of the round's row of the group's Williams design
(fwbench.running.order), and runs it from start to end, so that carry-over from the child before hits every cell alike.
"""

from __future__ import annotations

import time

from fwbench.running import order as trial_order
from fwbench.running.children import Outcome
from fwbench.running.context import CellRun, Context, now


def run_rounds(context: Context, plan: trial_order.Design, runs: list[CellRun]) -> None:
    """The group's trial rounds in the order of `plan`, one child per cell per round from start to end (a cell
    that failed leaves its place in the later rounds; a cell leaves at its first failed trial)."""
    trials, names = len(plan.rows), list(plan.variants)
    for round_ in range(trials):
        # The design's row for this round, without the cells that have failed: over a whole design each cell runs
        # in every position and right after every other cell alike.
        order = [i for i in plan.rows[round_] if runs[i].failure is None]
        round_order = [names[i] for i in order]
        for position, index in enumerate(order):
            cell, run = context.cells[index], runs[index]
            run.started_at = run.started_at or now()
            started = time.perf_counter()
            label = (
                f"{cell.framework}/{cell.mode}: trial {round_ + 1} of {trials} (round {round_ + 1}, #{position + 1})"
            )

            def start(attempts: int, index=index, run=run, round_=round_) -> Outcome:
                return context.child(index, run, f"{index}-{round_}-{attempts}").run()

            outcome, attempts = context.attempt(index, run, round_ + 1, label, start)
            if outcome.failure is None:
                context.record(run, label + (f", attempt {attempts}" if attempts > 1 else ""), outcome)
            schedule = {
                "round": round_ + 1,
                "order": position + 1,
                "round_order": round_order,
                "started_s": started - context.t0,
                "duration_s": time.perf_counter() - started,
                "attempts": attempts,
            }
            context.finish(run, round_ + 1, trials, schedule, outcome)
