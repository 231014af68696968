"""The house's floors (CONTRIBUTING.md): every fwbench import, lazy ones included, points down a floor or stays on its
own, no two modules import each other through any path, and no module grows past 500 lines. Read from the source with
`ast`, so a lazy import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 500

# Lowest first. A module's floor is the first entry its name starts with (longest prefix wins); a module may import
# from its own floor and those below. The analysis sits on top of the harness and is itself three floors: shared
# primitives, the sections of the paper (each one folder, importing only `common` and the ratio tables of
# `inference`), and the paper that gathers them.
FLOORS: list[tuple[str, ...]] = [
    ("fwbench", "fwbench.io", "fwbench.results"),
    ("fwbench.study",),
    ("fwbench.trackers",),
    ("fwbench.data",),
    ("fwbench.models",),
    ("fwbench.training",),
    ("fwbench.backends",),
    ("fwbench.scenarios",),
    ("fwbench.running",),
    ("fwbench.workflow",),
    ("fwbench.analysis", "fwbench.analysis.common"),
    ("fwbench.analysis.inference",),
    (
        "fwbench.analysis.training",
        "fwbench.analysis.micro",
        "fwbench.analysis.published",
        "fwbench.analysis.fairness",
        "fwbench.analysis.setup",
        "fwbench.analysis.failures",
        "fwbench.analysis.time",
        "fwbench.analysis.compare",
        "fwbench.analysis.profile",
    ),
    ("fwbench.analysis.paper",),
    ("fwbench.cli",),
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "fwbench").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


@cache
def imports_of(module: str) -> frozenset[str]:
    """The fwbench modules `module` imports anywhere in its body (a `from package import name` that names a module
    counts as that module)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "fwbench":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "fwbench")
    found.discard(module)
    return frozenset(found)


def floor_of(module: str) -> int:
    best, best_len = None, -1
    for index, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = index, len(name)
    assert best is not None, f"{module} is on no floor: add its package to FLOORS (and to CONTRIBUTING.md)"
    return best


def unit_of(module: str) -> str:
    """The package (or top-level module) a module belongs to: `fwbench.X`, or `fwbench.analysis.X` in the analysis."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[1:2] == ["analysis"] and len(parts) > 2 else parts[:2])


def test_every_module_is_on_a_floor():
    for module in MODULES:
        floor_of(module)


def test_imports_only_point_down():
    upward = [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module in sorted(MODULES)
        for target in sorted(imports_of(module))
        if target in MODULES and floor_of(target) > floor_of(module)
    ]
    assert not upward, "imports pointing up a floor:\n" + "\n".join(upward)


def test_packages_on_one_floor_do_not_import_each_other_both_ways():
    edges = {
        (unit_of(module), unit_of(target))
        for module in MODULES
        for target in imports_of(module)
        if target in MODULES and unit_of(target) != unit_of(module)
    }
    both_ways = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert not both_ways, f"packages importing each other: {both_ways}"


def test_no_import_cycles_between_modules():
    graph = {module: [t for t in imports_of(module) if t in MODULES] for module in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in graph[module]:
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_no_module_over_500_lines():
    long = {
        str(path.relative_to(SRC)): n
        for path in MODULES.values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by responsibility): {long}"


def test_the_floor_test_catches_an_upward_import(tmp_path):
    """The check itself can fail: a study module importing the runner is an upward import."""
    assert floor_of("fwbench.study.grid") < floor_of("fwbench.running.runner")
    assert floor_of("fwbench.analysis.paper.inputs") > floor_of("fwbench.analysis.micro.section")
    assert unit_of("fwbench.analysis.micro.section") == "fwbench.analysis.micro"
    assert unit_of("fwbench.running.runner") == "fwbench.running"
