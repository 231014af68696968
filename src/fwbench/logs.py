"""Sending a workflow script's output to its rule's log file (Snakemake gives scripts no redirection)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def redirect_to(log_path: str | Path | None) -> Iterator[None]:
    """Send stdout and stderr to `log_path`. An error that carries a `terminal_message` (one line for the user, e.g.
    `fwbench.analysis.cells.CellFileError`) leaves its traceback in the log and ends the script with that line on
    the terminal, where the user is looking, instead of a traceback."""
    if not log_path:
        yield
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            yield
        except BaseException as error:
            import traceback

            traceback.print_exc(file=log)
            message = getattr(error, "terminal_message", None)
            if message:
                raise SystemExit(message) from error
            raise
