"""A job cancelled on the cluster must end its Snakemake job, not hang the study.

`sacct` reports a job cancelled by a user or an administrator as "CANCELLED by <uid>". Snakemake's SLURM executor
(snakemake-executor-plugin-slurm 2.8.0, pinned) compares the whole state string with its list of failure states, so
such a job matches neither "CANCELLED" nor "COMPLETED", counts as still running, and Snakemake waits for it forever
(tests/test_slurm.py found it: `scancel` of a running cell left the study waiting). The old cluster profile had the
same bug and fixed it by keeping the state's first word (Snakemake-Profiles/slurm#22); this does the same to the
executor's status query. The workflow applies it when it starts (workflow/Snakefile, onstart), in the one process
that queries job states; with a fixed executor it changes nothing.
"""

from __future__ import annotations

import sys
from typing import Any

PLUGIN = "snakemake_executor_plugin_slurm"


def state_of(reported: str) -> str:
    """The job state in a sacct State field: "CANCELLED by 1000" -> "CANCELLED"; other states are one word."""
    return reported.split(" ", 1)[0] if reported else reported


def normalise_status_query() -> bool:
    """Wrap the loaded SLURM executor's status query so that every state it returns is `state_of` the field. Returns
    whether the executor is loaded (it is not in a run without it); applying it twice wraps once."""
    plugin = sys.modules.get(PLUGIN)
    if plugin is None or not hasattr(plugin, "query_job_status"):
        return False
    original = plugin.query_job_status
    if getattr(original, "fwbench_states_normalised", False):
        return True

    async def query_job_status(command: str, logger: Any):
        states, duration = await original(command, logger)
        if states is not None:
            states = {job_id: state_of(state) for job_id, state in states.items()}
        return states, duration

    query_job_status.fwbench_states_normalised = True
    plugin.query_job_status = query_job_status
    return True
