"""torch.compile as the PyTorch backend and trainer use it: one compiler setting, and what Dynamo saw.

Imported only by cells in a compiled mode (`compile`, `cudagraphs`): importing torch._dynamo costs a process ~2 s,
which eager cells do not pay (fwbench.models.torchvision_defs). `cuda_graphs` reads whether a compiled model ran as
CUDA graphs (mode cudagraphs: reduce-overhead). Shapes are static (`dynamic=False`), as XLA's are in JAX and TensorFlow:
a new shape is a recompilation, which the counters below make visible, so a timed loop that recompiles is flagged
like a JAX cell that does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fwbench.backends import launch_cache

INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# Set by the worker when the study keeps no Inductor cache (compile.inductor_cache: null): the process's cache
# directory is a fresh, empty one, so every compilation is cold.
FRESH_CACHE_ENV = "FWBENCH_INDUCTOR_CACHE_FRESH"
# Dynamo falls back to running a function eagerly, silently apart from a warning, once it has compiled this many
# variants of it (guards: train/eval mode, grad mode, BatchNorm momentum...). A trainer compiles a handful; the
# limit is raised so that a cell never times eager code while recording itself as compiled.
CACHE_SIZE_LIMIT = 64


def compiler(compile_mode: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """torch.compile with the study's mode and static shapes."""
    import torch._dynamo  # binds torch too

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, CACHE_SIZE_LIMIT)
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = max(
            torch._dynamo.config.accumulated_cache_size_limit, 4 * CACHE_SIZE_LIMIT
        )
    return lambda function: torch.compile(function, mode=compile_mode, dynamic=False)


def _counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def events() -> int:
    """Compile events so far: graphs Dynamo compiled (a recompilation is one more) plus graph breaks (each splits
    a function into more graphs with Python between them). A change across a timed loop flags the cell."""
    now = snapshot()
    return now["graphs"] + sum(now["breaks"].values())


def snapshot() -> dict[str, Any]:
    """Dynamo's counters now, for `report` to count what happened after: they are process-wide, and a process
    (a test's, say) may compile before a backend is made."""
    counters = _counters()
    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "frames": int(counters["stats"]["calls_captured"]),
        "breaks": dict(counters["graph_break"]),
    }


def report(since: dict[str, Any] | None = None) -> dict[str, Any]:
    """What Dynamo compiled since `since` (a `snapshot`; None: over the process): graphs, graph breaks and their
    reasons (the first few)."""
    now, before = snapshot(), since or {"graphs": 0, "frames": 0, "breaks": {}}
    breaks = {reason: count - before["breaks"].get(reason, 0) for reason, count in now["breaks"].items()}
    breaks = {reason: count for reason, count in breaks.items() if count > 0}
    return {
        "graphs": now["graphs"] - before["graphs"],
        "graph_breaks": int(sum(breaks.values())),
        "graph_break_reasons": [str(reason)[:200] for reason in list(breaks)[:5]],
        "frames_compiled": now["frames"] - before["frames"],
    }


REPORT_COUNTS = ("graphs", "graph_breaks", "frames_compiled")


def report_difference(now: dict[str, Any] | None, before: dict[str, Any] | None) -> dict[str, Any] | None:
    """What Dynamo compiled between two `report`s of one backend (None where either is None: no torch.compile), e.g.
    while a worker was timed after compiling each of its batch sizes (fwbench.scenarios.inference.run_cells)."""
    if now is None or before is None:
        return None
    reasons = [reason for reason in now["graph_break_reasons"] if reason not in before["graph_break_reasons"]]
    return {**{key: now[key] - before[key] for key in REPORT_COUNTS}, "graph_break_reasons": reasons}


def report_sum(report: dict[str, Any] | None, more: dict[str, Any] | None) -> dict[str, Any] | None:
    """Two `report`s of disjoint spans as one (the first where either is None)."""
    if report is None or more is None:
        return report
    reasons = list(dict.fromkeys([*report["graph_break_reasons"], *more["graph_break_reasons"]]))[:5]
    return {**{key: report[key] + more[key] for key in REPORT_COUNTS}, "graph_break_reasons": reasons}


def cache_state() -> dict[str, Any]:
    """Inductor's cache as this process found it: fresh and empty (every compilation cold, the study keeps no
    cache), or the study's persistent directory, cold or warm by whether it held entries before this process."""
    directory = os.environ.get(INDUCTOR_CACHE_ENV)
    if os.environ.get(FRESH_CACHE_ENV):
        return {"state": "disabled (a fresh, empty cache per process: cold)", "dir": directory}
    if not directory:
        return {"state": "torch's default directory (not controlled by the study)"}
    return launch_cache.describe(directory)


def first_call(call: Callable[[], Any], synchronize: Callable[[Any], None]) -> float:
    """Seconds of the first call of a compiled function: Dynamo's tracing, AOTAutograd and Inductor's code
    generation and the run itself, synchronised."""
    import time

    start = time.perf_counter()
    synchronize(call())
    return time.perf_counter() - start


def _recorded(nodes: Any) -> int:
    """CUDA graphs recorded in a forest of cudagraph-tree nodes (each node one graph, its children under it)."""
    return sum(1 + _recorded([child for children in node.children.values() for child in children]) for node in nodes)


def graphs_recorded(device_index: int) -> int:
    """CUDA graphs Inductor's cudagraph trees recorded on this device in this process (0 where it made no tree)."""
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_manager(device_index, create_if_none_exists=False)
    roots = getattr(manager, "roots", None) or {}
    return _recorded([node for nodes in roots.values() for node in nodes])


def cuda_graphs(compile_mode: str, device_type: str, device_index: int | None = None) -> dict[str, Any]:
    """Whether this process's compiled model ran as CUDA graphs, read from what ran: the compile mode asks for them
    (torch._inductor.list_mode_options: triton.cudagraphs; reduce-overhead and max-autotune do), Inductor's
    cudagraph trees recorded graphs on the CUDA device, and the graphs Inductor skipped
    (counters["inductor"]["cudagraph_skips"]: on a CPU every compiled graph is skipped)."""
    import torch._inductor

    asked = bool(torch._inductor.list_mode_options(compile_mode).get("triton.cudagraphs"))
    skips = int(_counters()["inductor"]["cudagraph_skips"])
    recorded = graphs_recorded(device_index or 0) if asked and device_type == "cuda" else 0
    if not asked:
        reason = f"torch.compile mode {compile_mode} does not use CUDA graphs"
    elif device_type != "cuda":
        reason = f"CUDA graphs exist only on CUDA GPUs: on the {device_type}, Inductor compiled without them"
    elif not recorded:
        reason = f"Inductor recorded no CUDA graph ({skips} compiled graphs skipped)"
    else:
        reason = None
    return {
        "in_effect": recorded > 0,
        "asked": asked,
        "graphs_recorded": recorded,
        "skipped": skips,
        "reason": reason,
        "source": "torch._inductor.cudagraph_trees (graphs recorded), counters['inductor']['cudagraph_skips']",
    }
