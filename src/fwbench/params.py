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
