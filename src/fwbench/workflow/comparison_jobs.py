"""Comparison jobs by batch size, whose warm workers still serve every comparison in their scope that is due.

Snakemake reruns what is missing or stale job by job, and removes a job's outputs before it runs the job. With one
job per model whose outputs were all its batch sizes (so that one warm worker per framework and mode could serve them
all: one import, one model build, one process per launch), adding a batch size threw away and measured again every
batch size of every model. A comparison job is therefore one batch size's (every framework and mode at one model,
precision and batch size), so that Snakemake plans exactly the comparisons that are new or stale; and the first job
of a model and precision to run (with `share_workers`) measures, in the same launches of the same warm workers, every
other batch size of its model and precision that is due. It writes those cells to `results/held/` (the same layout as
`results/cells/`); when Snakemake then runs the job of such a batch size, that job moves its held cells into place and
measures nothing. A full run thus starts as many processes as before, and a new batch size starts only its own.

How far a job reaches is its suite's `share_workers` scope (fwbench.study.grid.worker_scope): the batch sizes of
its model and precision (`batch_sizes`), every model's at its precision (`models`), or every model's at every
precision (`launch`, the default: one warm worker per framework and mode then serves every cell of the launch). A
peer comparison is measured only if its inputs exist (its model's weights): they are not the job's inputs (adding a
model would change every job's set of inputs, which reruns them), so the workflow gives the weights jobs a higher
priority than the measuring ones, and a model whose weights come later is measured by its own job.

A batch size is due when one of its cells is missing, or was measured under another identity than the one its job
would measure now; a held cell is used only under the same identity. The identity (`job_key`, recorded in every
cell as `provenance.job_key`) is a digest of what Snakemake's triggers judge for the job: the harness version, the
comparison's variants, its settings (fwbench.study.params.comparison_settings), model, precision, batch size, image
size and classes, the device setting and its frameworks' installed versions, and its inputs' sizes and modification
times. A cell without a key (written before keys existed)
is due. A forced rerun (`--forcerun`) of cells that are up to date measures each job on its own.

Jobs that run at once (`--resources gpu=N`, a cluster) claim each batch size they measure: a file in
`results/held/claims/`, created exclusively, naming its owner and touched by a heartbeat. A job waits only for its
own batch size, and only before it holds any other, so no two jobs wait for each other; a claim whose owner is gone
(its process, on this host; its heartbeat, elsewhere) is removed. The pairing is the same whichever job measures a
batch size: its variants run in the same launches and blocks, in the same Williams design.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fwbench import HARNESS_VERSION
from fwbench.running.devices import software_fingerprint
from fwbench.study.grid import (
    Cell,
    group_variants,
    suite_batch_sizes,
    suite_frameworks,
    suite_image_size,
    suite_models,
    suite_num_classes,
    worker_scope,
)
from fwbench.study.params import canonical, comparison_settings, merged_settings
from fwbench.workflow.requirements import framework_software
from fwbench.workflow.state import boot_id, owner_record, process_start_time, stale_owner

HELD = "held"
CLAIMS = "claims"
HEARTBEAT_S = 20.0
# A claim of another host is its owner's until its heartbeat is this old.
STALE_AFTER_S = 120.0
WAIT_POLL_S = 0.5

# measure(cells, out_paths, job_keys, settings, weights): measure the cells in one group
# (fwbench.running.runner.run_group); `weights`: each measured model's weights (None where the job has no pattern).
Measure = Callable[[list[Cell], list[Path], list[str], Mapping[str, Any], dict[str, str] | None], Any]


@dataclass(frozen=True)
class Comparisons:
    """The comparisons of one model and precision of a suite, one per batch size, and where their cells live."""

    config: Mapping[str, Any]
    suite: str
    model: str
    precision: str
    results: Path
    inputs: tuple[str, ...]  # the jobs' inputs (the same for every batch size of a model)
    # where each model's weights are ("results/weights/{model}.npz"); None: every model reads the same inputs
    weights_pattern: str | None = None

    @property
    def weights(self) -> str | None:
        return None if self.weights_pattern is None else self.weights_pattern.format(model=self.model)

    def peer(self, model: str, precision: str) -> Comparisons:
        """The comparisons of another model and precision of the suite, with that model's inputs (its weights in
        place of this model's)."""
        inputs = self.inputs
        if self.weights_pattern is not None and model != self.model:
            theirs = self.weights_pattern.format(model=model)
            inputs = tuple(theirs if path == self.weights else path for path in inputs)
        return replace(self, model=model, precision=precision, inputs=inputs)

    def peers(self, scope: str) -> list[Comparisons]:
        """These comparisons first, then every other model and precision one worker serves with them under
        `scope` (fwbench.study.grid.WORKER_SCOPES), in the study's order."""
        if scope in ("cell", "batch_sizes"):
            return [self]
        precisions = self.config["precisions"] if scope == "launch" else [self.precision]
        others = [
            self.peer(model, precision)
            for precision in precisions
            for model in suite_models(self.config, self.suite)
            if (model, precision) != (self.model, self.precision)
        ]
        return [self, *others]

    def ready(self) -> bool:
        """Whether this model's inputs exist, so that its comparisons can be measured now."""
        return all(os.path.exists(path) for path in self.inputs)

    def batch_sizes(self) -> list[int]:
        return [int(b) for b in suite_batch_sizes(self.config, self.suite)]

    def cells(self, batch: int) -> list[Cell]:
        image_size = suite_image_size(self.config, self.suite)
        return [
            Cell(self.suite, framework, self.model, self.precision, int(batch), image_size, mode)
            for framework, mode in group_variants(self.config, self.suite, self.model)
        ]

    def paths(self, batch: int, *, held: bool = False) -> list[Path]:
        root = self.results / HELD if held else self.results
        return [cell.path(root) for cell in self.cells(batch)]

    def settings(self, batch: int) -> dict[str, Any]:
        return comparison_settings(self.config, self.suite, batch)

    def identity(self, batch: int) -> dict[str, Any]:
        """What the job of `batch` measures, as its params say it (workflow/rules: the comparison rules)."""
        return canonical(
            {
                "harness_version": HARNESS_VERSION,
                "suite": self.suite,
                "model": self.model,
                "precision": self.precision,
                "batch": int(batch),
                "variants": group_variants(self.config, self.suite, self.model),
                "settings": self.settings(batch),
                "image_size": suite_image_size(self.config, self.suite),
                "num_classes": suite_num_classes(self.config, self.suite),
                "device": {
                    "device": self.config["device"],
                    "software": framework_software(_installed(), suite_frameworks(self.config, self.suite)),
                },
            }
        )

    def key(self, batch: int) -> str:
        stamp = [_stamp(path) for path in self.inputs]
        text = json.dumps([self.identity(batch), stamp], sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def claim_path(self, batch: int) -> Path:
        return self.results / HELD / CLAIMS / self.suite / self.model / self.precision / f"bs{batch}.json"


@functools.cache
def _installed() -> dict[str, str]:
    return software_fingerprint()


def _stamp(path: str) -> list[Any]:
    stat = os.stat(path)
    return [str(path), stat.st_size, stat.st_mtime_ns]


def _key_of(path: Path) -> str | None:
    """The job key a cell result records, None if it records none or cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return (json.load(handle).get("provenance") or {}).get("job_key")
    except (OSError, ValueError, AttributeError):
        return None


def _all_keyed(paths: Sequence[Path], key: str) -> bool:
    return all(_key_of(path) == key for path in paths)


def due(comparisons: Comparisons, batch: int) -> bool:
    """Whether `batch`'s comparison still has to be measured: a cell missing or measured under another identity, and
    no complete set of held cells of the current one."""
    key = comparisons.key(batch)
    return not _all_keyed(comparisons.paths(batch), key) and not _all_keyed(comparisons.paths(batch, held=True), key)


def take_held(comparisons: Comparisons, batch: int, outputs: Sequence[str | Path]) -> bool:
    """Move `batch`'s held cells to `outputs` if every one is held under the current identity (True); else remove
    the held cells of `batch`, which no job can use, and return False."""
    held = comparisons.paths(batch, held=True)
    if len(held) != len(outputs):
        raise ValueError(f"{len(outputs)} outputs for a comparison of {len(held)} cells")
    if _all_keyed(held, comparisons.key(batch)):
        for source, target in zip(held, outputs, strict=True):
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        return True
    for path in held:
        path.unlink(missing_ok=True)
    return False


class Claims:
    """The batch sizes this job measures, claimed in `results/held/claims/` until it ends (a context manager)."""

    def __init__(self, comparisons: Comparisons) -> None:
        self.comparisons = comparisons
        self.held: list[Path] = []
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)

    def __enter__(self) -> Claims:
        self._beat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for path in self.held:
            path.unlink(missing_ok=True)
        self.held.clear()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for path in list(self.held):
                with contextlib.suppress(OSError):  # released meanwhile
                    os.utime(path)

    def claim(self, batch: int, comparisons: Comparisons | None = None) -> bool:
        """Claim `batch` (of `comparisons`, by default the job's own) unless a live job holds it; a dead owner's
        claim is removed first."""
        path = (comparisons or self.comparisons).claim_path(batch)
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if owner_alive(path):
                    return False
                path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(owner_record(), handle)
            self.held.append(path)
            return True
        return False

    def wait_for(self, batch: int, poll_s: float = WAIT_POLL_S) -> None:
        """Return once no live job holds `batch`."""
        path = self.comparisons.claim_path(batch)
        while path.exists() and owner_alive(path):
            time.sleep(poll_s)


def owner_alive(path: Path, now: float | None = None) -> bool:
    """Whether the job that wrote claim `path` may still run: on this host, unless fwbench.workflow.state judges its
    process gone (another boot, no such process, a reused pid); elsewhere, or for a claim without a process to judge,
    while its heartbeat is younger than STALE_AFTER_S. An unreadable claim (being written) counts as alive while it
    is young."""
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return age < STALE_AFTER_S
    host = socket.gethostname()
    if isinstance(record, dict) and record.get("host") == host and isinstance(record.get("start_time"), int):
        return stale_owner(record, host=host, current_boot_id=boot_id(), start_time_of=process_start_time) is None
    return age < STALE_AFTER_S


@dataclass(frozen=True)
class JobOutcome:
    """What a comparison job did: the comparisons it measured (its own first, as "model/precision/bsN"), or none
    when it took held cells."""

    batch: int
    measured: tuple[str, ...]

    def line(self) -> str:
        if not self.measured:
            return (
                f"bs{self.batch}: its cells were measured by another job, in the same warm workers, "
                f"and held in results/{HELD}/ until this job ran (fwbench.workflow.comparison_jobs)"
            )
        others = ", ".join(self.measured[1:])
        with_others = f", with {others} in the same warm workers (held for their jobs)" if others else ""
        return f"bs{self.batch}: measured{with_others}"


def run_job(
    comparisons: Comparisons,
    batch: int,
    outputs: Sequence[str | Path],
    measure: Measure,
    *,
    share_workers: bool | str,
) -> JobOutcome:
    """The job of `batch`'s comparison: take its held cells, or measure it, with every other comparison its
    workers' scope reaches (`share_workers`, fwbench.study.grid.worker_scope: the other batch sizes of its model,
    the other models, the other precisions) that is due, whose inputs exist and that no other job claims, writing
    theirs to results/held/."""
    batch = int(batch)
    scope = worker_scope({"share_workers": share_workers})
    with Claims(comparisons) as claims:
        while not claims.claim(batch):
            claims.wait_for(batch)
        if take_held(comparisons, batch, outputs):
            return JobOutcome(batch, ())
        measured: list[tuple[Comparisons, int]] = [(comparisons, batch)]
        if scope != "cell":
            for peer in comparisons.peers(scope):
                if peer is not comparisons and not peer.ready():
                    continue
                measured += [
                    (peer, other)
                    for other in peer.batch_sizes()
                    if (peer is not comparisons or other != batch) and due(peer, other) and claims.claim(other, peer)
                ]
        cells, paths, keys = [], [], []
        for index, (each, b) in enumerate(measured):
            targets = [Path(p) for p in outputs] if index == 0 else each.paths(b, held=True)
            key = each.key(b)
            for cell, target in zip(each.cells(b), targets, strict=True):
                cells.append(cell)
                paths.append(target)
                keys.append(key)
        settings = merged_settings([each.settings(b) for each, b in measured])
        weights = {each.model: each.weights for each, _ in measured} if comparisons.weights_pattern else None
        measure(cells, paths, keys, settings, weights)
        return JobOutcome(batch, tuple(f"{each.model}/{each.precision}/bs{b}" for each, b in measured))


def write_log_line(log_path: str | Path, outcome: JobOutcome) -> None:
    """End the job's log (a measuring job's is its group's, from the runner) with what the job did."""
    path = Path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a" if outcome.measured and path.exists() else "w", encoding="utf-8") as handle:
        handle.write(("\n" if outcome.measured and path.stat().st_size else "") + outcome.line() + "\n")
