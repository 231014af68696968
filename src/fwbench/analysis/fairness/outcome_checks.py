"""The fairness ledger's checks of how the measurements came out: no noisy trial, the CI target reached where a loop
is timed to one, no cell run with a workaround of the fallback ladder, and every cell measured.

Each reads the flags, deviations and failures a cell recorded about itself, and names the cells where a check did not
hold, so that the paper shows every difference the comparison carries.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fwbench.analysis.fairness.rows import HELD, NOT_HELD, NOT_MEASURED, cell_name, named, plural, row, succeeded


def noise_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No noisy trial: each trial judged on its own samples (IQR above 10% of its median, `metrics.noisy_trials`
    and each trial's `noisy`), so that differences between processes are not counted as noise; a cell is flagged
    (`flags.noisy`) when at least one of its trials is. Results from before the per-trial flag carry the pooled
    samples' flag, and the row says how many."""
    control = "Not noisy (each trial's IQR at most 10% of its median)"
    ok = [r for r in succeeded(results) if r["cell"]["suite"] in ("inference", "micro")]
    if not ok:
        return row(control, NOT_MEASURED, "no inference or micro cells")
    flagged, noisy, trials, pooled = [], 0, 0, 0
    for r in ok:
        metrics = r["metrics"]
        flag = bool((metrics.get("flags") or {}).get("noisy"))
        if metrics.get("noisy_trials") is None:
            pooled += 1
            if flag:
                flagged.append(f"{cell_name(r)} (pooled samples)")
            continue
        count, here = len(metrics.get("trials") or []) or 1, int(metrics["noisy_trials"])
        trials, noisy = trials + count, noisy + here
        if flag or here:
            flagged.append(f"{cell_name(r)} ({here} of {count} trials)")
    measured = f"{len(flagged)} of {len(ok)} cells had a noisy trial"
    if trials:
        measured += f" ({noisy} of {trials} trials noisy)"
    if pooled:
        measured += f"; {plural(pooled, 'cell')} recorded only the pooled samples' flag (before per-trial flags)"
    return row(control, NOT_HELD if flagged else HELD, measured, named(flagged))


def flag_row(
    control: str, results: list[dict[str, Any]], flag: str, what: str, suites: tuple[str, ...] = ("inference", "micro")
) -> dict[str, str]:
    """A per-cell flag that must be off everywhere (noisy, CI not reached, recompiled), in the suites it exists in."""
    ok = [r for r in succeeded(results) if r["cell"]["suite"] in suites]
    flagged = [cell_name(r) for r in ok if (r["metrics"].get("flags") or {}).get(flag)]
    measured = f"{len(flagged)} of {len(ok)} cells {what}"
    return row(control, NOT_HELD if flagged else HELD, measured, named(flagged))


def deviations_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Cells that ran with a workaround of the fallback ladder (a difference the paper must show)."""
    control = "No workarounds"
    deviating = [
        f"{cell_name(r)} ({', '.join(d.get('name', '?') for d in r['deviations'])})"
        for r in results
        if r.get("deviations")
    ]
    measured = f"{len(deviating)} of {len(results)} cells ran with a workaround"
    return row(control, NOT_HELD if deviating else HELD, measured, named(deviating))


def failures_row(results: list[dict[str, Any]]) -> dict[str, str]:
    control = "Every cell measured"
    failed = [r for r in results if r.get("status") != "ok"]
    kinds = Counter((r.get("failure") or {}).get("kind", "unknown") for r in failed)
    measured = f"{len(results) - len(failed)} of {len(results)} cells succeeded"
    where = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    if failed:
        where += ": " + named([cell_name(r) for r in failed])
    return row(control, NOT_HELD if failed else HELD, measured, where)
