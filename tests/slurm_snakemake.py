"""Snakemake's command line, as `.venv/bin/snakemake` runs it, with the SLURM executor checking its jobs' status
every POLL_S seconds. The executor plugin waits 10 s longer after each check that finds no job finished (2 s, 12 s,
22 s, ... up to 180 s), which no setting shortens: right for a queue of hour-long jobs, while the test cluster's
jobs take seconds, so each job's end was noticed up to 20 s late, a minute of every test study. Only the waiting
changes: submission, the status queries and what they decide are the plugin's own."""

from __future__ import annotations

import sys

from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

POLL_S = 2


def _capped(self, value) -> None:
    self._next_seconds_between_status_checks = None if value is None else min(value, POLL_S)


Executor.next_seconds_between_status_checks = property(RemoteExecutor.next_seconds_between_status_checks.fget, _capped)

if __name__ == "__main__":
    sys.argv[0] = "snakemake"
    sys.exit(main())
