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
    suite's section minus its AXES, how compiled modes compile and whether kernels are autotuned (study-level, the
    same for every framework), a training cell's loader and seed, a micro cell's seed (its input rows are drawn from
    it). Canonical: key order or 0 vs 0.0 must not rerun cells."""
    settings = {k: v for k, v in config[suite].items() if k not in AXES}
    settings.update(compile=config["compile"], autotune=config["autotune"])
    if suite == "training":
        settings.update(loader=config["loader"], seed=config["seed"])
    if suite == "micro":
        settings.update(seed=config["seed"])
    return canonical(settings)
