"""What each run's cells record about where and how they ran (hardware, software, environment variables,
configuration), and which of those facts differ between two runs: the environment half of `fwbench compare`.

It exists apart from `fwbench.analysis.compare.ratios` because it answers a question of its own, whether two runs ran on
the same machine, software and settings, from the cells' provenance alone; the ratios and their verdicts play no
part in it. `environment_differences` gives, for each recorded fact, the set of values each run's cells record, and
the facts whose sets differ; `fwbench.analysis.compare.ratios` puts them in its `Comparison`.

Pure: the standard library only. It must not import `fwbench.analysis.compare.runs` or
`fwbench.analysis.compare.ratios`, which import it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

HARDWARE, SOFTWARE, ENVIRONMENT, CONFIGURATION = "hardware", "software", "environment", "configuration"
CATEGORIES = (HARDWARE, SOFTWARE, ENVIRONMENT, CONFIGURATION)
NOT_RECORDED = "(not recorded)"


def side_text(framework: Any, mode: Any) -> str:
    """A framework in a mode as the comparison names it: "jax/jit", or "numpy" without a mode."""
    return f"{framework}/{mode}" if mode else str(framework)


def _flat(category: str, prefix: str, value: Any) -> Iterator[tuple[str, str, Any]]:
    """(category, dotted key, value) of every leaf of a record. A list gives each of its items as a value of its key
    (an empty one "[]"), so that a list of CPU flags compares flag by flag."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _flat(category, f"{prefix}.{key}", inner)
    elif isinstance(value, list | tuple):
        yield from ((category, prefix, item) for item in value) if value else [(category, prefix, "[]")]
    else:
        yield category, prefix, value


HOST_FACTS = {
    HARDWARE: ("cpu_model", "cpu_count", "machine", "hostname"),
    SOFTWARE: ("fwbench", "harness_version", "python", "platform"),
}


def _record(value: Any) -> Mapping[str, Any]:
    """A part of a result that should be a record; anything else (None for a failed cell's framework, a value of an
    unexpected shape) reads as an empty one, so that an unknown layout is compared as far as it goes."""
    return value if isinstance(value, Mapping) else {}


def cell_facts(result: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """What one cell records about where and how it ran, as (category, key, value). Facts that differ between the
    cells of one run by design (times, group, placement) are left out; any recorded `hardware` block is taken whole.
    Keys a cell does not record are simply absent."""
    provenance, cell = _record(result.get("provenance")), _record(result.get("cell"))
    framework = str(cell.get("framework", "unknown"))
    record = _record(provenance.get("framework"))  # None for a failed cell
    for category, keys in HOST_FACTS.items():
        yield from ((category, key, provenance[key]) for key in keys if key in provenance)
    yield from _flat(HARDWARE, "hardware", provenance.get("hardware") or {})
    yield from _flat(HARDWARE, f"framework.{framework}.device", record.get("device") or {})
    yield from _flat(SOFTWARE, "git", provenance.get("git") or {})
    yield from _flat(SOFTWARE, "libraries", provenance.get("libraries") or {})
    yield from _flat(SOFTWARE, "blas", provenance.get("blas") or {})
    yield from _flat(SOFTWARE, f"framework.{framework}.versions", record.get("versions") or {})
    yield from _flat(ENVIRONMENT, "env", provenance.get("env") or {})
    yield from _flat(CONFIGURATION, f"settings.{cell.get('suite', 'unknown')}", result.get("settings") or {})
    yield from _stable(_flat(CONFIGURATION, f"framework.{framework}.settings", record.get("settings") or {}))
    if "threads_requested" in provenance:
        yield CONFIGURATION, "threads_requested", provenance["threads_requested"]
    inputs = _record(result.get("inputs"))
    if inputs.get("dataset_manifest_sha256"):
        yield CONFIGURATION, "inputs.dataset_manifest_sha256", inputs["dataset_manifest_sha256"]
    if inputs.get("weights_sha256") and cell.get("model"):
        yield CONFIGURATION, f"inputs.weights_sha256.{cell['model']}", inputs["weights_sha256"]


# A group's scratch directory (fwbench.running.runner: a cell's launch cache lives there) and a process's fresh Inductor
# cache (fwbench.running.worker) have a new name in every group and run: no difference between runs.
_SCRATCH = re.compile(r"\S*/fwbench-(?:group|inductor)-[^/\s]+\S*")


def _stable(facts: Iterable[tuple[str, str, Any]]) -> Iterator[tuple[str, str, Any]]:
    """Facts without the paths of groups' scratch directories: a cache directory there is left out, and one named
    in a flag is replaced by what it is."""
    for category, key, value in facts:
        if isinstance(value, str) and _SCRATCH.search(value):
            if key.endswith("compilation_cache.dir"):
                continue
            value = _SCRATCH.sub("<this cell's launch cache>", value)
        yield category, key, value


def _shown(value: Any) -> str:
    """A recorded value as text: strings as they are, anything else as JSON (null, true, 2, [..])."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def study_axes(results: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The study's grid as its cells show it, per suite: the framework/mode variants, models (micro: operations),
    precisions and batch sizes, each one sorted list."""
    axes: dict[str, set[str]] = {}
    for result in results:
        cell = _record(result.get("cell"))
        suite = str(cell.get("suite", "unknown"))
        axes.setdefault("study.suites", set()).add(suite)
        values = {
            "variants": side_text(cell.get("framework"), cell.get("mode")),
            "models": cell.get("model"),
            "precisions": cell.get("precision"),
            "batch_sizes": cell.get("batch_size"),
        }
        for axis, value in values.items():
            axes.setdefault(f"study.{suite}.{axis}", set()).add(_shown(value))
    return {key: ", ".join(sorted(values, key=_natural)) for key, values in axes.items()}


def _natural(text: str) -> tuple[int, float | str]:
    """Numbers in numeric order (batch sizes 1, 8, 32), text after them."""
    try:
        return 0, float(text)
    except ValueError:
        return 1, text


def value_sets(results: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(category, key) -> the set of values the run's cells record for it (a key no cell records is absent), plus
    the study's axes (`study_axes`) as configuration, one value each."""
    results = list(results)
    sets: dict[tuple[str, str], set[str]] = {}
    for result in results:
        for category, key, value in cell_facts(result):
            sets.setdefault((category, key), set()).add(_shown(value))
    for key, value in study_axes(results).items():
        sets[(CONFIGURATION, key)] = {value}
    return sets


def environment_differences(
    cells_a: Iterable[Mapping[str, Any]], cells_b: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Every recorded fact whose set of values differs between the runs: {category, key, a, b}, a and b the sorted
    values (["(not recorded)"] where a run's cells do not record the key), by category (CATEGORIES) then key."""
    sets_a, sets_b = value_sets(cells_a), value_sets(cells_b)
    out = []
    for category, key in sorted(set(sets_a) | set(sets_b), key=lambda k: (CATEGORIES.index(k[0]), k[1])):
        a, b = sets_a.get((category, key), set()), sets_b.get((category, key), set())
        if a != b:
            shown = [sorted(values, key=_natural) or [NOT_RECORDED] for values in (a, b)]
            out.append({"category": category, "key": key, "a": shown[0], "b": shown[1]})
    return out
