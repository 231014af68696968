"""Does the tested set resolve on every supported Python? For each interpreter (3.11, 3.12, 3.13) and each accelerator
set (the `tested` extra with `cpu` or with `cuda`), pip resolves the pinned requirements for real, as an install into
an empty environment would (`pip install --dry-run --ignore-installed --report`: it reads the packages' metadata from
the package index and installs nothing), and the resolved set is written to envs/resolved/py3.X-SET.txt with the
wheel each package would come from.

    python benchmarks/resolve_pins.py                       # every python3.1[123] found (PATH, then pyenv)
    python benchmarks/resolve_pins.py --python 3.12=/usr/bin/python3.12

This is the resolution check of the README (three real installs would take 8 GB each). A record says which package
would be built from a source distribution rather than installed from a wheel (a pure-Python sdist builds anywhere;
a compiled one would need a marker in pyproject.toml). tests/test_packaging.py checks that every record was made
from the requirements pyproject.toml pins now, so a changed pin without a new record fails the fast tier.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from fwbench.installation import expand_extra, requirements_digest  # noqa: E402

VERSIONS = ("3.11", "3.12", "3.13")
SETS = ("cpu", "cuda")
RECORDS = REPO / "envs" / "resolved"


def requirements(accelerator: str) -> list[str]:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return expand_extra(extras, "tested") + extras[accelerator]


def find_interpreter(version: str) -> str | None:
    """python3.X on the PATH if it runs and is that version, else the newest pyenv build of it."""
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python{version}")), reverse=True)
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], **_quiet())
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


def _quiet() -> dict:
    return {"capture_output": True, "text": True}


def resolve(python: str, accelerator: str) -> dict:
    """pip's installation report for the set, resolved by `python` for this machine's platform."""
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp, "requirements.txt")
        reqs.write_text("\n".join(requirements(accelerator)) + "\n")
        report = Path(tmp, "report.json")
        command = [
            python,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
        ]
        proc = subprocess.run([*command, "-r", str(reqs)], **_quiet(), timeout=1800)
        if proc.returncode != 0:
            errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
            raise SystemExit(f"{python} ({accelerator}): does not resolve: {' '.join(errors) or proc.stderr[-500:]}")
        return json.loads(report.read_text())


def record_text(python: str, accelerator: str, report: dict) -> str:
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], **_quiet()).stdout.strip()
    pip = subprocess.run([python, "-m", "pip", "--version"], **_quiet()).stdout.split()[1]
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], **_quiet()).stdout.strip()
    rows, sdists = [], []
    for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
        name, resolved = item["metadata"]["name"], item["metadata"]["version"]
        source = Path(item["download_info"]["url"]).name
        if not source.endswith(".whl"):
            sdists.append(name)
        rows.append(f"{name}=={resolved}  # {source}")
    lines = [
        f"# The tested set with `{accelerator}` resolved by pip {pip} on Python {version}, {platform.machine()}",
        f"# ({platform.system()}, glibc {platform.libc_ver()[1]}), on {dt.date.today().isoformat()}, commit {commit},",
        "# by benchmarks/resolve_pins.py. Nothing was installed: pip read every package's metadata from the index.",
        f"# requirements-sha256: {requirements_digest(requirements(accelerator))}",
        f"# python: {version}",
        f"# packages: {len(rows)}; from source distributions: {', '.join(sdists) or 'none'}",
        *rows,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", default=[], metavar="3.X=PATH", help="an interpreter to use")
    parser.add_argument("--set", action="append", choices=SETS, help="only these accelerator sets (default: both)")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.python)
    RECORDS.mkdir(parents=True, exist_ok=True)
    for version in VERSIONS:
        python = given.get(version) or find_interpreter(version)
        if python is None:
            print(f"Python {version}: no interpreter found (pass --python {version}=PATH); its records are unchanged")
            continue
        for accelerator in args.set or SETS:
            report = resolve(python, accelerator)
            path = RECORDS / f"py{version}-{accelerator}.txt"
            path.write_text(record_text(python, accelerator, report))
            print(f"Python {version} ({python}), {accelerator}: {len(report['install'])} packages resolve -> {path}")


if __name__ == "__main__":
    main()
