"""A study as its files say: one resolution for `snakemake`, `snakemake -n` and every `fwbench` command.

Snakemake deep-merges each `--configfile` over a Snakefile's `configfile:`, so a study file used to inherit the
default study's lists, trials and timeouts, and a narrower study stopped on keys its author never wrote. The rule
here instead (config/README.md, "Study files"):

- no study file given: the default study, `config/config.yaml`;
- a study file stands alone: the schema's defaults plus what it writes; `extends: PATH` names a base explicitly
  (relative to the working directory, like `--configfile`; a base may extend another);
- several files merge in the order given, then `--config KEY=VALUE` values (Snakemake's overrides) last;
- merging is Snakemake's: mappings key by key, lists and scalars replaced.

Every value keeps where it came from (a file, a base, `--config`, the schema's default), which `fwbench
check-config --show` prints. Keys that narrow another axis (fwbench.study.config.NARROWING) select among the study's own
values, except that a name written in a layer after the one that chose the axis (an override naming a model the
study does not have) is an error naming it and its file.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fwbench.study.config import NARROWING, ConfigError, load_schema, validate_config

# The study that runs when no study file is given, relative to the working directory (the repository's root).
DEFAULT_STUDY = "config/config.yaml"
BASE_KEY = "extends"
SCHEMA_DEFAULT = "schema default"
OVERRIDES = "--config"


@dataclass(frozen=True)
class Layer:
    """One source of values: a study file (or a base it extends), or the command line's overrides."""

    label: str
    values: dict


@dataclass
class Study:
    """The effective, validated config; the layers it was merged from (first = lowest) and what they wrote, merged
    (before defaults and validation); where each leaf key's value came from (dotted key -> layer label, absent = the
    schema's default); and what validation changed beyond defaults (notes, one line each)."""

    config: dict
    layers: list[Layer]
    written: dict = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def source(self, key: str) -> str:
        return self.sources.get(key, SCHEMA_DEFAULT)


def display_path(path: str | Path) -> str:
    """A path as the user would write it: relative to the working directory where it lies below it."""
    absolute = Path(path).absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def read_study_file(path: str | Path) -> dict:
    """One study file's own values (a mapping; an empty file is {}), or a one-line ConfigError naming the file."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {display_path(path)}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {display_path(path)} is a directory") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {display_path(path)} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"config file {display_path(path)}: a study is a mapping of keys to values, not a {type(raw).__name__}"
        )
    return raw


def _base_path(name: Any, extending: Path) -> Path:
    """Where `extends: name` in `extending` points: relative to the working directory, as --configfile is."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"config error: {BASE_KEY} = {name!r} in {display_path(extending)}: expected a file path")
    path = Path(name)
    if not path.is_file():
        raise ConfigError(
            f"config error: {BASE_KEY} = {name!r} in {display_path(extending)}: file not found "
            f"(relative to the working directory {Path.cwd()})"
        )
    return path


def file_layers(path: str | Path, _chain: tuple[Path, ...] = ()) -> list[Layer]:
    """A study file's layers: its bases' (by `extends`, deepest first), then its own values without `extends`."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _chain:
        cycle = " -> ".join(display_path(p) for p in (*_chain, resolved))
        raise ConfigError(f"config error: {BASE_KEY} forms a cycle: {cycle}")
    values = read_study_file(path)
    layers: list[Layer] = []
    if BASE_KEY in values:
        base = _base_path(values.pop(BASE_KEY), path)
        layers = file_layers(base, (*_chain, resolved))
    return [*layers, Layer(display_path(path), values)]


def merge(into: dict, values: Mapping[str, Any]) -> dict:
    """Snakemake's merge (snakemake.utils.update_config): mappings key by key, anything else replaced."""
    for key, value in values.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)
    return into


def leaf_keys(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value for every leaf of a nested mapping (lists and empty mappings are leaves)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(leaf_keys(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


def _written_by(layers: Sequence[Layer]) -> dict[str, int]:
    """Dotted key -> index of the last layer that wrote it (or a mapping above it, replacing what was below)."""
    written: dict[str, int] = {}
    for index, layer in enumerate(layers):
        for key in leaf_keys(layer.values):
            # A layer that sets a whole mapping to a scalar or list replaces every key below it.
            for older in [k for k in written if k.startswith(f"{key}.")]:
                del written[older]
            written[key] = index
    return written


def _strict_narrowing(layers: Sequence[Layer], written: Mapping[str, int]) -> dict[str, str]:
    """The narrowing keys written in a layer after the one that chose their axis (an override naming a model the
    study does not have is a mistake; a base's or the same file's list is a selection that shrinking the axis
    narrows): key -> the label of the layer that wrote it."""
    strict = {}
    for key, axis in NARROWING.items():
        if key in written and written[key] > written.get(axis, -1):
            strict[key] = layers[written[key]].label
    return strict


def resolve(
    files: Sequence[str | Path] | None = None,
    overrides: Mapping[str, Any] | None = None,
    schema: Mapping[str, Any] | None = None,
) -> Study:
    """The study that `snakemake [--configfile FILE ...] [--config KEY=VALUE ...]` runs: `files` in order (none:
    DEFAULT_STUDY), each after its bases, then `overrides`; validated with every default filled in."""
    layers = [layer for path in (files or [DEFAULT_STUDY]) for layer in file_layers(path)]
    if overrides:
        layers.append(Layer(OVERRIDES, copy.deepcopy(dict(overrides))))
    merged: dict = {}
    for layer in layers:
        merge(merged, layer.values)
    written = _written_by(layers)
    sources = {key: layers[index].label for key, index in written.items()}
    notes: list[str] = []
    try:
        config = validate_config(
            merged, schema or load_schema(), strict=_strict_narrowing(layers, written), notes=notes
        )
    except ConfigError as error:
        where = _where(error.key, sources)
        raise ConfigError(f"{error}{where}", key=error.key) from None
    return Study(config, layers, merged, sources, notes)


def _where(key: str | None, sources: Mapping[str, str]) -> str:
    """' (in FILE)' for the file that wrote `key` or a key below it, if one did."""
    if not key:
        return ""
    labels = {label for dotted, label in sources.items() if dotted == key or dotted.startswith(f"{key}.")}
    return f" (in {', '.join(sorted(labels))})" if labels else ""


def load_config(path: str | Path | None = None) -> dict:
    """The effective config of one study file (its bases included), as the workflow sees it with --configfile."""
    return resolve([path] if path else None).config


def show(study: Study) -> str:
    """The effective config, one dotted key a line, each with where its value came from."""
    stack = " < ".join([SCHEMA_DEFAULT, *(layer.label for layer in study.layers)])
    written = leaf_keys(study.written)
    lines = [f"# layers, later ones winning: {stack}"]
    lines += [f"# note: {note}" for note in study.notes]
    rows = []
    for key, value in leaf_keys(study.config).items():
        source = study.source(key)
        if key in written and _canonical_yaml(written[key]) != _canonical_yaml(value):
            source += ", adjusted by validation"
        rows.append((f"{key}: {_canonical_yaml(value)}", source))
    width = min(max(len(text) for text, _ in rows), 72)
    lines += [f"{text:<{width}}  # {source}" for text, source in rows]
    return "\n".join(lines)


def _canonical_yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def snakemake_overrides(config_setting: Mapping[str, Any] | None) -> dict:
    """Snakemake's parsed `--config` values (an immutable mapping) as a plain dict of plain values."""

    def plain(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    return plain(config_setting or {})
