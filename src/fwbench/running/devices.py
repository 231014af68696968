"""One device per study: what every framework computes on, checked before any benchmark cell runs.

A GPU machine with PyTorch's CUDA wheel and JAX's CPU wheel would time PyTorch on the GPU and JAX on the host, and
nothing downstream would notice. So the `device_check` rule asks each framework, in a fresh process of its own and
under exactly the environment a cell gets, what it sees; the study goes on only when they agree (and agree with the
config's `device`), and the agreed record (`results/device.json`) is what every cell checks itself against.

Run as `python -m fwbench.running.devices FRAMEWORK` it prints one framework's report as JSON (the probe's child side).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fwbench.io import atomic_write_json, read_json
from fwbench.running.threads import available_cpus

DEVICE_SETTINGS = ("auto", "cpu", "cuda")
PROBE_TIMEOUT_S = 300
SETUP_HINT = "FWBENCH_ACCELERATOR=cuda bash setup.sh"
# How each framework gets a CUDA build, when it sees only the CPU on a machine where another framework sees a GPU.
INSTALL_HINTS = {
    "jax": f"install the CUDA plugin with {SETUP_HINT}",
    "torch": f"install PyTorch's CUDA wheel with {SETUP_HINT}",
    "tensorflow": f"install TensorFlow's CUDA build with {SETUP_HINT}",
}


class DeviceCheckError(RuntimeError):
    """The frameworks would not compute on the same device; the message is the one line the user sees."""


def forced_environment(setting: str) -> dict[str, str]:
    """Environment that makes `device: cpu` hold in every framework, even on a GPU machine (empty otherwise)."""
    if setting not in DEVICE_SETTINGS:
        raise ValueError(f"device = {setting!r}: expected one of {DEVICE_SETTINGS}")
    return {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"} if setting == "cpu" else {}


def software_fingerprint() -> dict[str, str]:
    """Installed versions of the frameworks and their CUDA plugins (package metadata only, no import: this runs
    while Snakemake parses the workflow), so that reinstalling one reruns the device check."""
    from importlib import metadata

    wanted = ("torch", "jax", "jaxlib", "tensorflow", "tensorflow-cpu", "keras")
    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in wanted or name.startswith("jax-cuda"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def describe(framework: str) -> dict[str, Any]:
    """This process's view (the child side of `probe`): imports only `framework`."""
    from fwbench.backends import backend_class

    return backend_class(framework).describe_devices()


def probe(framework: str, env: Mapping[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """One framework's report from a fresh process, or {"platform": "failed", "error": ...} if it could not say."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "fwbench.running.devices", framework],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"platform": "failed", "error": f"no answer within {timeout_s:g} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    stderr = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return {"platform": "failed", "error": stderr[-1] if stderr else f"exit code {proc.returncode}, no output"}
    report = json.loads(lines[-1])
    # JAX says why it fell back to the CPU (e.g. "a CUDA-enabled jaxlib is not installed") only as a warning.
    report["warnings"] = [line for line in stderr if "warn" in line.lower() or "falling back" in line.lower()][-3:]
    return report


def _seen(report: Mapping[str, Any]) -> str:
    if report["platform"] == "cpu":
        return "only cpu"
    names = sorted({d["name"] for d in report.get("devices", [])})
    return f"{report['platform']} ({', '.join(names)})" if names else str(report["platform"])


def _cuda_build(framework: str, report: Mapping[str, Any]) -> Any:
    """What makes `framework`'s installed build a CUDA one (JAX's CUDA plugins, the CUDA runtime PyTorch or
    TensorFlow was built for), or a false value for a CPU build."""
    return report.get("jax_plugins") if framework == "jax" else report.get("cuda_runtime")


def _names(frameworks: Sequence[str]) -> str:
    return frameworks[0] if len(frameworks) == 1 else f"{', '.join(frameworks[:-1])} and {frameworks[-1]}"


def _why_cpu(framework: str, report: Mapping[str, Any]) -> str:
    """What to do about a framework that sees only the CPU: install its CUDA build, or find out why a CUDA build
    found no GPU (the framework's own warning, when it printed one)."""
    cuda_build = _cuda_build(framework, report)
    if not cuda_build:
        return INSTALL_HINTS.get(framework, "install its CUDA build")
    build = ", ".join(cuda_build) if isinstance(cuda_build, list) else f"a CUDA {cuda_build} build"
    said = f"; it said: {report['warnings'][-1]}" if report.get("warnings") else ""
    return f"no GPU is visible to it although it is {build} (check nvidia-smi and CUDA_VISIBLE_DEVICES){said}"


def decide(reports: Mapping[str, Mapping[str, Any]], setting: str) -> dict[str, Any]:
    """The study's device, or DeviceCheckError with one line saying what disagrees and what to do about it."""
    for framework, report in reports.items():
        if report["platform"] == "failed":
            raise DeviceCheckError(f"device check: {framework} could not report its devices: {report['error']}")
    platforms = {framework: report["platform"] for framework, report in reports.items()}
    if setting == "cuda":
        cpu_builds = [f for f, report in reports.items() if report["platform"] == "cpu" and not _cuda_build(f, report)]
        if cpu_builds and len(cpu_builds) == len(reports):
            # The CPU set: setup.sh chose it where no NVIDIA driver answered (a GPU-less login node, say), and a
            # GPU node then finds nothing but CPU builds.
            builds = "is a CPU build that sees" if len(cpu_builds) == 1 else "are CPU builds that see"
            raise DeviceCheckError(
                f"device: cuda, but {_names(cpu_builds)} {builds} only cpu: setup.sh made this .venv where "
                f"nvidia-smi found no GPU (a login node?); reinstall with {SETUP_HINT} "
                "(or set device: auto to measure on the CPU)"
            )
        for framework, platform in platforms.items():
            if platform != "cuda":
                why = f": {_why_cpu(framework, reports[framework])}" if platform == "cpu" else ""
                raise DeviceCheckError(
                    f"device: cuda, but {framework} sees {_seen(reports[framework])}{why}"
                    + (" (or set device: auto to measure on the CPU)" if platform == "cpu" else "")
                )
    if len(set(platforms.values())) > 1:
        gpu_side = next(f for f, p in platforms.items() if p != "cpu")
        cpu_side = next((f for f, p in platforms.items() if p == "cpu"), None)
        if cpu_side is None:
            raise DeviceCheckError(
                "device check: the frameworks see different platforms: "
                + ", ".join(f"{f} sees {_seen(r)}" for f, r in reports.items())
            )
        raise DeviceCheckError(
            f"{gpu_side} sees {_seen(reports[gpu_side])} but {cpu_side} sees only cpu: "
            f"{_why_cpu(cpu_side, reports[cpu_side])}"
        )
    platform = next(iter(platforms.values()))
    if setting == "cpu" and platform != "cpu":
        raise DeviceCheckError(f"device: cpu, but the frameworks still see {platform} with {forced_environment('cpu')}")
    gpus: list[dict[str, Any]] = []
    if platform != "cpu":
        lists = {f: [d["name"] for d in r["devices"]] for f, r in reports.items()}
        if len({tuple(names) for names in lists.values()}) > 1:
            raise DeviceCheckError(
                "device check: the frameworks see different GPUs: "
                + "; ".join(f"{f}: {len(n)} ({', '.join(n)})" for f, n in lists.items())
            )
        # torch knows UUIDs (used to bind a cell to its GPU); any framework's list serves otherwise.
        gpus = list((reports.get("torch") or next(iter(reports.values())))["devices"])
    return {
        "setting": setting,
        "platform": platform,
        "gpus": gpus,
        "frameworks": {f: dict(r) for f, r in reports.items()},
        "environment": forced_environment(setting),
        "visible_devices_env": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cpus": available_cpus(),
        "checked_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def check_slots(record: Mapping[str, Any], gpu_slots: int) -> None:
    """`--resources gpu=N` runs up to N cells at once, one per GPU: more slots than GPUs cannot be honoured."""
    if gpu_slots < 1:
        raise DeviceCheckError(f"--resources gpu={gpu_slots}: must be >= 1")
    gpus = record["gpus"]
    if record["platform"] != "cpu" and gpu_slots > len(gpus):
        raise DeviceCheckError(
            f"--resources gpu={gpu_slots}, but the frameworks see {len(gpus)} GPU(s): run with --resources "
            f"gpu={len(gpus)} (one cell per GPU)"
        )


def check(
    frameworks: Sequence[str],
    setting: str,
    gpu_slots: int,
    out: str | os.PathLike,
    probe_fn: Callable[[str, Mapping[str, str]], dict[str, Any]] = probe,
) -> dict[str, Any]:
    """Probe every framework (one fresh process each), decide, and write the record; nothing is written on a
    disagreement, so no cell (all of which depend on the record) can start. The slot count is checked but not
    recorded: running more or fewer cells at once must not make finished cells stale."""
    env = forced_environment(setting)
    record = decide({framework: probe_fn(framework, env) for framework in frameworks}, setting)
    check_slots(record, gpu_slots)
    atomic_write_json(out, record)
    return record


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    record = read_json(path)
    if not isinstance(record, dict) or {"platform", "gpus", "frameworks", "environment"} - set(record):
        raise ValueError(f"{path}: not a device record written by the device_check rule")
    return record


def normalise_platform(name: str) -> str:
    """JAX calls a CUDA device "gpu"; every record here says "cuda"."""
    return "cuda" if name == "gpu" else name


def verify(record: Mapping[str, Any], device_info: Mapping[str, Any], expected_name: str | None) -> None:
    """Raise if a cell's backend computes somewhere other than the study's device (a recorded failure, never a
    silently misplaced result)."""
    platform = normalise_platform(str(device_info.get("platform")))
    if platform != record["platform"]:
        raise RuntimeError(
            f"device mismatch: this cell runs on {platform} ({device_info.get('name')}) but the study's device "
            f"check (device.json) found {record['platform']}"
        )
    if expected_name is not None and device_info.get("name") != expected_name:
        raise RuntimeError(
            f"device mismatch: this cell runs on {device_info.get('name')} but its GPU slot holds {expected_name}"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m fwbench.running.devices FRAMEWORK")
    print(json.dumps(describe(sys.argv[1])), flush=True)
