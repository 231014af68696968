"""Sending a workflow script's output to its rule's log file (Snakemake gives scripts no redirection)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def redirect_to(log_path: str | Path | None) -> Iterator[None]:
    if not log_path:
        yield
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            yield
        except BaseException:
            import traceback

            traceback.print_exc(file=log)
            raise
