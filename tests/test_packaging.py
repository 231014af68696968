from __future__ import annotations

import re
import tomllib

import yaml

from tests.conftest import REPO


def _pins(requirements):
    return {re.split(r"[=<>\[]", req, maxsplit=1)[0].lower(): req for req in requirements}


def test_conda_env_agrees_with_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO / "envs" / "fwbench.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _pins(project) == _pins([p for p in pip if not p.startswith("-e")])
    assert all("==" in req for req in project), "every dependency is pinned"


def test_readme_first_section_has_exactly_two_commands():
    readme = (REPO / "README.md").read_text()
    first = readme.split("\n## ", 2)[1]
    commands = re.findall(r"```(?:bash|sh)?\n(.*?)```", first, flags=re.S)
    assert len(commands) == 2
    assert "snakemake" in commands[0] and "paper.pdf" in commands[0]
    assert "pytest" in commands[1]
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_results_are_ignored():
    ignored = (REPO / ".gitignore").read_text().split()
    assert "results/" in ignored and ".snakemake/" in ignored
