"""Rule params in one canonical form, so that Snakemake's params trigger sees values, not spelling.

Snakemake records each param as its `repr` and reruns a job whose recorded reprs differ from the current ones
(`snakemake.persistence.PersistenceBase._params`). A dict's repr follows its insertion order, which for a config
section is the order of the keys in the YAML file followed by the schema's defaults: rewriting the config with the
same values in another key order (as `yaml.safe_dump` does, sorting them) would rerun every job. `canonical` gives
every value one spelling: mappings rebuilt with recursively sorted keys, tuples (and sets, sorted) as lists, and a
float with an integral value as an int, so that `min_seconds: 0` and `min_seconds: 0.0` are the same setting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from typing import Any

# Keys of a suite's section that are grid axes, not settings: adding a batch size or a trained model must not rerun
# the other cells.
AXES = ("batch_sizes", "models")


def _key_order(key: Any) -> tuple[str, str]:
    return (type(key).__name__, str(key))


def canonical(value: Any) -> Any:
    """`value` with a repr that depends only on what it means; lists keep their order (it is meaningful)."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else value
    if isinstance(value, Mapping):
        return {key: canonical(value[key]) for key in sorted(value, key=_key_order)}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    if isinstance(value, Set):
        return sorted((canonical(item) for item in value), key=repr)
    return value


def measurement_settings(config: Mapping[str, Any], suite: str) -> dict[str, Any]:
    """What a cell of `suite` measures under, as the workflow passes it (a param) and `fwbench run-cell` alike: the
    suite's section minus its AXES, how compiled modes compile, whether kernels are autotuned and how each framework
    lays out its tensors (study-level, the same for every framework), a training cell's loader and seed, a micro
    cell's seed (its input rows are drawn from it). Canonical: key order or 0 vs 0.0 must not rerun cells."""
    settings = {k: v for k, v in config[suite].items() if k not in AXES}
    settings.update(compile=config["compile"], autotune=config["autotune"], memory_format=config["memory_format"])
    if suite == "training":
        settings.update(loader=config["loader"], seed=config["seed"])
    if suite == "micro":
        settings.update(seed=config["seed"])
    return canonical(settings)


def comparison_settings(config: Mapping[str, Any], suite: str, batch: int | str) -> dict[str, Any]:
    """What one comparison (every framework and mode at one model, precision and batch size) measures under: the
    suite's `measurement_settings` with each setting that names batch sizes (`inference.profile.batch_sizes`)
    reduced to `batch` alone, so that profiling another batch size reruns that batch size's comparisons and no other
    (a comparison job's params, fwbench.workflow.comparison_jobs)."""
    settings = measurement_settings(config, suite)
    profile = settings.get("profile")
    if isinstance(profile, Mapping) and profile.get("batch_sizes") is not None:
        settings["profile"] = {**profile, "batch_sizes": [b for b in profile["batch_sizes"] if int(b) == int(batch)]}
    return canonical(settings)


def merged_settings(per_comparison: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The settings of comparisons measured in the same warm workers (one model's batch sizes): equal but for what
    `comparison_settings` reduced to each batch size, which is joined again (the profiled batch sizes, sorted)."""
    merged = dict(per_comparison[0])
    profiles = [s.get("profile") for s in per_comparison]
    if isinstance(merged.get("profile"), Mapping) and merged["profile"].get("batch_sizes") is not None:
        batches = sorted({int(b) for p in profiles for b in (p or {}).get("batch_sizes") or []})
        merged["profile"] = {**merged["profile"], "batch_sizes": batches}
    rest = [{k: v for k, v in s.items() if k != "profile"} for s in per_comparison]
    if any(r != rest[0] for r in rest):
        raise ValueError("comparisons measured in the same workers must share their settings")
    return canonical(merged)
