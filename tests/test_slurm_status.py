"""The executor's status query, wrapped so that "CANCELLED by <uid>" counts as CANCELLED
(fwbench.workflow.slurm_status)."""

from __future__ import annotations

import asyncio
import sys
import types

from fwbench.workflow import slurm_status


def test_a_cancelled_job_reads_as_cancelled(monkeypatch):
    plugin = types.ModuleType(slurm_status.PLUGIN)

    async def query_job_status(command, logger):
        return {"12": "CANCELLED by 0", "13": "COMPLETED", "14": "RUNNING"}, 0.01

    plugin.query_job_status = query_job_status
    monkeypatch.setitem(sys.modules, slurm_status.PLUGIN, plugin)
    assert slurm_status.normalise_status_query() and slurm_status.normalise_status_query()
    states, duration = asyncio.run(plugin.query_job_status("sacct ...", None))
    assert states == {"12": "CANCELLED", "13": "COMPLETED", "14": "RUNNING"} and duration == 0.01
    assert plugin.query_job_status.fwbench_states_normalised  # wrapped once, not twice


def test_a_failed_query_and_a_missing_executor_are_left_alone(monkeypatch):
    plugin = types.ModuleType(slurm_status.PLUGIN)

    async def query_job_status(command, logger):
        return None, None

    plugin.query_job_status = query_job_status
    monkeypatch.setitem(sys.modules, slurm_status.PLUGIN, plugin)
    slurm_status.normalise_status_query()
    assert asyncio.run(plugin.query_job_status("sacct ...", None)) == (None, None)
    monkeypatch.delitem(sys.modules, slurm_status.PLUGIN)
    assert slurm_status.normalise_status_query() is False


def test_the_pinned_executor_still_needs_it():
    """The real 2.8.0 executor's own list of failure states has no "CANCELLED by" form: drop this module when a
    pinned executor parses the field itself (this test then fails)."""
    import inspect

    import snakemake_executor_plugin_slurm as plugin

    source = inspect.getsource(plugin)
    assert '"CANCELLED",' in source and "CANCELLED by" not in source
