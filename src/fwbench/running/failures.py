"""Why a measuring child failed, as one kind from a closed set, and the known workarounds that may be retried.

A failure is a finding: the paper groups failures by kind (an out-of-memory is a property of the model, batch size
and device; a compiler crash is a bug with a known workaround; a timeout says the cell is too slow for its limit), so
the runner classifies each one from what it can observe: the exit status, whether it killed the child itself, the
memory limit's OOM counter and the child's output. Nothing here retries anything; `fwbench.running.context` decides.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The closed set of failure kinds, in the order the paper lists them.
KINDS = ("device_oom", "host_oom", "compiler", "crash", "timeout", "exception", "no_result")
# Memory is never "worked around": the batch size is an axis and the cell stays an out-of-memory finding; a timeout
# is not retried either (it would double the cost of a cell that is already too slow).
RETRYABLE_KINDS = ("compiler", "crash", "exception", "no_result")

# Out of memory on the accelerator, as the frameworks and the CUDA driver word it.
_DEVICE_OOM = re.compile(
    r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
    r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|OOM when allocating tensor"
    r"|out of memory (while|trying to allocate).*(GPU|cuda|device)"
)
# XLA's generic out-of-memory status: on the device when the cell computes on a GPU, the host otherwise.
_XLA_OOM = re.compile(r"RESOURCE_EXHAUSTED|Out of memory while trying to allocate")
# Out of host memory inside the process (an allocation refused, e.g. under an address-space limit).
_HOST_OOM = re.compile(r"\bMemoryError\b|std::bad_alloc|Unable to allocate|Cannot allocate memory|ENOMEM")
# Compilers and kernel autotuners: XLA, Triton, Inductor, ptxas, LLVM.
_COMPILER = re.compile(
    r"autotun|Autotun|[Tt]riton|ptxas|nvlink error|LLVM ERROR|XlaRuntimeError: (INTERNAL|UNIMPLEMENTED)"
    r"|xla/service/|Compilation failure|BackendCompilerFailed|torch\._inductor|InductorError|TracerError"
)

OUTPUT_WINDOW_CHARS = 20_000  # classification looks at the end of the output, where the error is


@dataclass(frozen=True)
class Failure:
    """One failed child: its kind, a one-line reason, and what the runner saw."""

    kind: str
    reason: str
    exit_code: int | None = None
    signal: str | None = None

    def as_dict(self, **extra: Any) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "exit_code": self.exit_code, "signal": self.signal, **extra}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def last_error_line(output: str) -> str:
    """The final 'Type: message' line of a Python traceback if the child printed one, else its last line."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def classify(
    *,
    returncode: int | None,
    output: str,
    timeout_s: float | None = None,
    timeout_key: str = "timeout_s",
    memory_limit_mb: int | None = None,
    memory_limit_key: str = "max_host_mb",
    oom_killed: bool = False,
    on_gpu: bool = False,
    result_error: str | None = None,
) -> Failure | None:
    """The failure of a child that has exited, or None if it succeeded.

    `returncode` is None when the runner killed the child at its timeout; `oom_killed` is True when the kernel's OOM
    killer ended it (the limit's cgroup or the runner's own counted an OOM kill); `result_error` is set when it
    exited 0 but its result could not be read. An out-of-memory message outranks a compiler match: an autotuner that
    ran out of memory is an out-of-memory finding, and the ladder must not retry it."""
    tail = output[-OUTPUT_WINDOW_CHARS:]
    if returncode is None:
        return Failure("timeout", f"timeout: no result after {timeout_s:g} s ({timeout_key}); child killed")
    if returncode < 0 and oom_killed:
        limit = f"its {memory_limit_key} limit of {memory_limit_mb} MB" if memory_limit_mb else "host memory"
        return Failure(
            "host_oom", f"host out of memory: killed by the kernel's OOM killer at {limit}", signal="SIGKILL"
        )
    if returncode < 0:
        name = _signal_name(-returncode)
        return Failure("crash", f"crashed: killed by {name}", signal=name)
    if returncode != 0:
        line = last_error_line(tail)
        if _DEVICE_OOM.search(tail) or (on_gpu and _XLA_OOM.search(tail)):
            kind = "device_oom"
        elif _HOST_OOM.search(tail) or _XLA_OOM.search(tail):
            kind = "host_oom"
        elif _COMPILER.search(tail):
            kind = "compiler"
        else:
            kind = "exception"
        limited = kind == "host_oom" and memory_limit_mb
        where = f" (under its {memory_limit_key} limit of {memory_limit_mb} MB)" if limited else ""
        return Failure(kind, f"{kind.replace('_', ' ')}{where} (exit code {returncode}): {line}", exit_code=returncode)
    if result_error is not None:
        return Failure("no_result", f"child exited 0 without a readable result: {result_error}", exit_code=0)
    return None


@dataclass(frozen=True)
class Workaround:
    """One rung of the fallback ladder: when it applies and what it changes in the retried child's environment."""

    name: str
    kinds: tuple[str, ...]
    pattern: str
    frameworks: tuple[str, ...] = ()  # empty: every framework
    env: Mapping[str, str] = field(default_factory=dict)
    xla_flags: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, entry: Mapping[str, Any]) -> Workaround:
        return cls(
            name=str(entry["name"]),
            kinds=tuple(entry["kinds"]),
            pattern=str(entry["pattern"]),
            frameworks=tuple(entry.get("frameworks") or ()),
            env={str(k): str(v) for k, v in (entry.get("env") or {}).items()},
            xla_flags=tuple(entry.get("xla_flags") or ()),
        )

    def matches(self, failure: Failure, output: str, framework: str) -> str | None:
        """Why this workaround applies to `failure` (a sentence for the record), or None if it does not."""
        if failure.kind not in self.kinds or failure.kind not in RETRYABLE_KINDS:
            return None
        if self.frameworks and framework not in self.frameworks:
            return None
        found = re.search(self.pattern, f"{failure.reason}\n{output[-OUTPUT_WINDOW_CHARS:]}")
        if found is None:
            return None
        return f"{failure.kind} failure matched /{self.pattern}/ ({found.group(0)!r})"

    def changes(self) -> dict[str, Any]:
        return {"env": dict(self.env), "xla_flags": list(self.xla_flags)}

    def apply(self, env: Mapping[str, str]) -> dict[str, str]:
        """The child environment with this workaround on top of `env` (XLA flags appended, not replaced)."""
        out = {**env, **self.env}
        if self.xla_flags:
            out["XLA_FLAGS"] = " ".join(filter(None, [out.get("XLA_FLAGS", ""), *self.xla_flags])).strip()
        return out


def ladder_from_config(fallbacks: Mapping[str, Any] | None) -> list[Workaround]:
    """The configured ladder, or an empty one when `fallbacks.enabled` is false (or no config is given)."""
    if not fallbacks or not fallbacks.get("enabled", True):
        return []
    return [Workaround.from_config(entry) for entry in fallbacks.get("ladder") or []]


def next_workaround(
    ladder: Sequence[Workaround], applied: Sequence[str], failure: Failure, output: str, framework: str
) -> tuple[Workaround, str] | None:
    """The first rung not yet applied that matches this failure, with why; rungs accumulate down the ladder."""
    for rung in ladder:
        if rung.name in applied:
            continue
        because = rung.matches(failure, output, framework)
        if because is not None:
            return rung, because
    return None
