"""`fwbench doctor`: what this environment can run, in a few seconds and without starting a study.

A user who installed fwbench into an environment of their own (`python -m pip install -e .`) needs to know, before
a study runs for hours, what they have: each framework with its version against the tested one, its build (CPU, or
CUDA and which), the device it would compute on; whether a GPU driver answers; whether the paper can be built here
(LaTeX) and the HTML report checked (a browser); and which studies in config/ can run as they are, and if not, the
first thing each lacks. The frameworks' versions come from package metadata; their builds and devices from the
device check's own probe (one fresh process per framework, all at once), so doctor sees what a study's device
check would see. Where the NVIDIA driver lists no GPU, every framework computes on the CPU and the builds are read
from the installed files instead, which takes no import (`--probe` asks the frameworks anyway).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fwbench
from fwbench import installation
from fwbench.installation import FRAMEWORKS
from fwbench.study import files as study_files
from fwbench.study.config import ConfigError

PROBE_TIMEOUT_S = 120


@dataclass
class Framework:
    """One framework as this environment has it; `report` is its device probe's answer (None: not installed)."""

    name: str
    versions: dict[str, str | None]
    missing: list[str]
    untested: dict[str, str]
    report: dict[str, Any] | None = None

    @property
    def installed(self) -> bool:
        return not self.missing


@dataclass
class Environment:
    frameworks: dict[str, Framework]
    gpus: list[str]
    gpu_note: str
    tools: dict[str, str | None]
    notes: list[str] = field(default_factory=list)

    @property
    def latex(self) -> bool:
        return bool(self.tools.get("latexmk") and self.tools.get("IEEEtran.cls"))

    def platforms(self) -> set[str]:
        return {f.report["platform"] for f in self.frameworks.values() if f.report and "platform" in f.report}


def _probe(framework: str) -> dict[str, Any]:
    from fwbench.running.devices import probe

    return probe(framework, {}, timeout_s=PROBE_TIMEOUT_S)


def nvidia_gpus() -> tuple[list[str], str]:
    """The GPUs the NVIDIA driver lists (`nvidia-smi -L`), and what to say where it lists none."""
    if shutil.which("nvidia-smi") is None:
        return [], "no NVIDIA driver (nvidia-smi not found)"
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return [], f"nvidia-smi -L failed ({type(error).__name__})"
    gpus = [
        line.split(": ", 1)[1].split(" (UUID")[0] for line in listing.stdout.splitlines() if line.startswith("GPU ")
    ]
    return gpus, "" if gpus else (listing.stdout.strip() or listing.stderr.strip() or "nvidia-smi lists no GPU")


def tools() -> dict[str, str | None]:
    """Where the paper's and the report check's tools are (None: not found)."""
    found: dict[str, str | None] = {name: shutil.which(name) for name in ("latexmk", "pdftoppm")}
    beside = Path(sys.executable).parent / "snakemake"  # this environment's own, where it is not on the PATH
    found["snakemake"] = str(beside) if beside.is_file() else shutil.which("snakemake")
    kpsewhich = shutil.which("kpsewhich")
    found["IEEEtran.cls"] = None
    if kpsewhich:
        located = subprocess.run([kpsewhich, "IEEEtran.cls"], capture_output=True, text=True, timeout=30)
        found["IEEEtran.cls"] = located.stdout.strip() or None
    try:
        from fwbench.workflow.report_check import ReportCheckError, find_chromium

        try:
            found["chromium"] = find_chromium()
        except ReportCheckError:
            found["chromium"] = None
    except ImportError:
        found["chromium"] = None
    return found


def _package_file(module: str, *parts: str) -> str | None:
    """The text of a file inside an installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location, *parts)
        if path.is_file():
            return path.read_text(encoding="utf-8", errors="replace")
    return None


def static_build(framework: str) -> dict[str, Any]:
    """The build keys of a device probe's report (`cuda_runtime`, `jax_plugins`), read from the installed files and
    package metadata without importing the framework: torch/version.py's `cuda`, JAX's CUDA plugin distributions,
    TensorFlow's build_info.py."""
    if framework == "jax":
        plugins = sorted(
            f"{dist.metadata['Name']}=={dist.version}"
            for dist in importlib.metadata.distributions()
            if installation.normalise(dist.metadata["Name"] or "").startswith("jax-cuda")
        )
        return {"jax_plugins": plugins}
    if framework == "torch":
        text = _package_file("torch", "version.py") or ""
        found = re.search(r"^cuda(?::[^=]*)?=\s*'([^']+)'", text, flags=re.M)
        return {"cuda_runtime": found.group(1) if found else None}
    text = _package_file("tensorflow", "python", "platform", "build_info.py") or ""
    cuda = "('is_cuda_build', True)" in text
    version = re.search(r"\('cuda_version', '([^']+)'\)", text)
    return {"cuda_runtime": (version.group(1) if version else "unknown") if cuda else None}


def inspect(probe_devices: bool | None = None, probe: Callable[[str], dict[str, Any]] = _probe) -> Environment:
    """This environment. Its installed frameworks are probed at once, each in a fresh process, where the NVIDIA
    driver lists a GPU or `probe_devices` is true; elsewhere each computes on the CPU, and its build is read from its
    files (`static_build`)."""
    gpus, gpu_note = nvidia_gpus()
    probe_devices = bool(gpus) if probe_devices is None else probe_devices
    frameworks = {}
    for name in FRAMEWORKS:
        versions = installation.framework_versions(name)
        frameworks[name] = Framework(
            name, versions, installation.missing_modules(name), installation.untested_versions(versions)
        )
    installed = [f for f in frameworks.values() if f.installed]
    if probe_devices:
        with ThreadPoolExecutor(max_workers=max(1, len(installed))) as pool:
            for framework, report in zip(installed, pool.map(probe, [f.name for f in installed]), strict=True):
                framework.report = report
    else:
        for framework in installed:
            framework.report = {"platform": "cpu", "devices": [], "static": True, **static_build(framework.name)}
    return Environment(frameworks, gpus, gpu_note, tools())


def build_text(framework: str, report: Mapping[str, Any]) -> str:
    """ "CPU build", "CUDA 13.0 build", "CUDA build (jax-cuda13-plugin==0.10.2)", from the device probe's report."""
    if framework == "jax":
        plugins = report.get("jax_plugins") or []
        if not plugins:
            return "CPU build"
        runtime = f", CUDA {report['cuda_runtime']}" if report.get("cuda_runtime") else ""
        return f"CUDA build ({', '.join(plugins)}{runtime})"
    runtime = report.get("cuda_runtime")
    return f"CUDA {runtime} build" if runtime else "CPU build"


def device_text(report: Mapping[str, Any]) -> str:
    if report.get("platform") == "failed":
        return f"could not say what it computes on: {report.get('error')}"
    if report.get("static"):
        return "computes on cpu"
    devices = report.get("devices") or []
    if not devices:
        return f"computes on {report.get('platform')}"
    names = sorted({d.get("name") for d in devices}, key=str)
    return f"computes on {report.get('platform')} ({len(devices)} x {', '.join(map(str, names))})"


def framework_line(framework: Framework) -> str:
    packages = FRAMEWORKS[framework.name]
    if not framework.installed:
        install = installation.install_command(framework.name)
        return f"{packages.label}: not installed ({', '.join(framework.missing)}): {install}"
    versions = ", ".join(
        f"{name} {version}" + (f" (tested {framework.untested[name]})" if name in framework.untested else "")
        for name, version in framework.versions.items()
        if version
    )
    report = framework.report or {"platform": "failed", "error": "not probed"}
    build = build_text(framework.name, report) if report.get("platform") != "failed" else "build unknown"
    return f"{packages.label}: {versions}; {build}; {device_text(report)}"


def study_verdict(config: Mapping[str, Any], environment: Environment) -> str:
    """Whether this environment can run the study as it is: "yes", "to its tables", or "no: the first lack"."""
    from fwbench.data import hub

    lacks = []
    for name in config["frameworks"]:
        framework = environment.frameworks.get(name)
        if framework is not None and not framework.installed:
            lacks.append(f"{name} is not installed ({installation.install_command(name)})")
    torch = environment.frameworks["torch"]
    if not torch.installed and "torch" not in config["frameworks"]:
        lacks.append(f"torch writes the starting weights ({installation.install_command('torch')})")
    platforms = environment.platforms()
    if config["device"] == "cuda" and "cuda" not in platforms:
        lacks.append("device: cuda, but no framework sees a GPU here")
    dataset = config["dataset"]
    if dataset["source"] == "huggingface" and not hub.is_saved_to_disk(dataset["name"]):
        try:
            reader = importlib.util.find_spec("datasets") is not None
        except (ImportError, ValueError):
            reader = False
        if not reader:
            lacks.append("its Hub dataset needs the datasets package (python -m pip install -e '.[hub]')")
    if lacks:
        return "no: " + "; ".join(lacks)
    device = "cuda" if config["device"] == "cuda" or (config["device"] == "auto" and "cuda" in platforms) else "cpu"
    where = f"measures on {device}"
    if dataset["source"] == "huggingface" and not hub.is_saved_to_disk(dataset["name"]):
        where += f", downloads {dataset['name']} from the Hugging Face Hub unless resources/ holds it"
    if not environment.latex:
        return (
            f"to its tables ({where}; no LaTeX here: `snakemake results/tables/study_time.json` stops before the paper)"
        )
    return f"yes ({where})"


def studies(directory: Path = Path("config")) -> dict[str, Any]:
    """{study file: its effective config, or the ConfigError that stops it} for every study file in `directory`."""
    found: dict[str, Any] = {}
    for path in sorted(directory.glob("*.yaml")):
        try:
            found[str(path)] = study_files.resolve([path]).config
        except ConfigError as error:
            found[str(path)] = error
    return found


def report_lines(environment: Environment, found_studies: Mapping[str, Any]) -> list[str]:
    interpreter = installation.interpreter()
    lines = [
        f"fwbench {fwbench.__version__} on Python {interpreter['version']} ({interpreter['implementation']}, "
        f"{interpreter['environment']}: {sys.executable})",
        "frameworks (tested versions: pyproject.toml's `tested` extra):",
        *(f"  {framework_line(f)}" for f in environment.frameworks.values()),
        "GPU: " + (", ".join(environment.gpus) if environment.gpus else environment.gpu_note),
    ]
    if any((f.report or {}).get("static") for f in environment.frameworks.values()):
        lines[-1] += (
            " (so every framework computes on the CPU; builds read from the installed files, --probe asks each)"
        )
    t = environment.tools
    latex = "LaTeX found (latexmk, IEEEtran.cls)" if environment.latex else "no LaTeX (latexmk and IEEEtran.cls)"
    lines.append(
        f"paper: {latex}; pdftoppm {'found' if t.get('pdftoppm') else 'not found'}; "
        f"browser for the report check: {t.get('chromium') or 'not found'}"
    )
    lines.append(f"snakemake: {t.get('snakemake') or 'not on the PATH'}")
    lines.append("studies:")
    for path, config in found_studies.items():
        verdict = f"no: {config}" if isinstance(config, Exception) else study_verdict(config, environment)
        lines.append(f"  {path}: {verdict}")
    return lines
