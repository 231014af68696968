"""Sending a workflow script's output to its rule's log file (Snakemake gives scripts no redirection)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def redirect_to(log_path: str | Path | None, *, native: bool = False) -> Iterator[None]:
    """Send stdout and stderr to `log_path`; with `native`, also what native code writes to file descriptors 1
    and 2 (a framework's C++ logging, e.g. TensorFlow's at import), which Python's redirection does not see. An
    error that carries a `terminal_message` (one line for the user, e.g. `fwbench.analysis.common.cells.CellFileError`)
    leaves its traceback in the log and ends the script with that line on the terminal, where the user is looking,
    instead of a traceback."""
    if not log_path:
        yield
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with (
        open(log_path, "w", encoding="utf-8") as log,
        contextlib.redirect_stdout(log),
        contextlib.redirect_stderr(log),
        _descriptors_to(log) if native else contextlib.nullcontext(),
    ):
        try:
            yield
        except BaseException as error:
            import traceback

            traceback.print_exc(file=log)
            message = getattr(error, "terminal_message", None)
            if message:
                raise SystemExit(message) from error
            raise


@contextlib.contextmanager
def _descriptors_to(log) -> Iterator[None]:
    """Point file descriptors 1 and 2 at `log` for the block, then back."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        yield
    finally:
        log.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
