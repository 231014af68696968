"""Study configuration: one validator for the workflow and the CLI, so both see identical, default-filled values.

Errors are reduced to one line that names the offending key and value, because a user editing YAML needs to know
where to look, not to read a jsonschema traceback.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from fwbench.modes import TORCH_AUTOTUNING_COMPILE_MODES, autotune_setting


class ConfigError(ValueError):
    """A study configuration that cannot be run; the message is a single line naming key and value."""


def schema_path() -> Path:
    return Path(str(resources.files("fwbench") / "schemas" / "config.schema.yaml"))


def load_schema(path: str | Path | None = None) -> dict:
    with open(path or schema_path(), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_DefaultFillingValidator = _with_defaults(jsonschema.Draft202012Validator)


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        names = ", ".join(f"'{_key([*error.absolute_path, k])}'" for k in extra)
        return f"unknown key {names} (allowed here: {', '.join(sorted(allowed))})"
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"missing required key '{_key([*error.absolute_path, missing])}'"
    value = error.instance
    if "propertyNames" in error.schema_path:
        return f"unknown key '{key}.{value}' (expected one of {error.validator_value})"
    if error.validator == "enum":
        return f"{key} = {value!r}: unknown value, expected one of {error.validator_value}"
    if error.validator == "minItems" and error.validator_value == 1:
        return f"{key} = {value!r}: must not be empty"
    if error.validator == "type":
        return f"{key} = {value!r}: wrong type, expected {error.validator_value}"
    if error.validator in ("exclusiveMinimum", "minimum"):
        op = ">" if error.validator == "exclusiveMinimum" else ">="
        return f"{key} = {value!r}: must be {op} {error.validator_value}"
    return f"{key} = {value!r}: {error.message}"


DEFAULT_SPLITS = {
    "huggingface": {"train": "train", "val": "validation"},  # the Hub's usual names (clane9/imagenet-100 has these)
    "imagefolder": {"train": "train", "val": "val"},
}


def _check_dataset(dataset: dict[str, Any]) -> None:
    source = dataset["source"]
    if dataset["splits"] is None:
        dataset["splits"] = dict(DEFAULT_SPLITS.get(source, {"train": "train", "val": "val"}))
    if source == "imagefolder":
        if not dataset["path"]:
            raise ConfigError("config error: dataset.path: required when dataset.source = 'imagefolder'")
        if not Path(dataset["path"]).is_dir():
            raise ConfigError(f"config error: dataset.path = {dataset['path']!r}: not a directory")
    resize = dataset["resize_size"]
    if resize is not None and resize < dataset["image_size"]:
        raise ConfigError(
            f"config error: dataset.resize_size = {resize}: must be >= dataset.image_size ({dataset['image_size']})"
        )


def _check_fallbacks(fallbacks: Mapping[str, Any]) -> None:
    """Each rung's pattern must compile and its name be unique: a rung is named in every deviation it causes."""
    seen: set[str] = set()
    for index, rung in enumerate(fallbacks["ladder"]):
        if rung["name"] in seen:
            raise ConfigError(f"config error: fallbacks.ladder[{index}].name = {rung['name']!r}: used twice")
        seen.add(rung["name"])
        try:
            re.compile(rung["pattern"])
        except re.error as exc:
            raise ConfigError(
                f"config error: fallbacks.ladder[{index}].pattern = {rung['pattern']!r}: not a regular expression "
                f"({exc})"
            ) from None


def _check_consistency(config: Mapping[str, Any]) -> None:
    _check_dataset(config["dataset"])
    for model, path in config["pretrained"].items():
        if not Path(path).is_file():
            raise ConfigError(f"config error: pretrained.{model} = {path!r}: file not found")
    _check_fallbacks(config["fallbacks"])
    trained = config["training"]["models"]
    if trained is not None and (extra := [m for m in trained if m not in config["models"]]):
        raise ConfigError(
            f"config error: training.models = {trained}: {', '.join(extra)} not in models ({config['models']})"
        )
    for suite in ("inference", "micro"):
        _check_stop_rule(suite, config[suite])
    _check_modes(config)
    micro = config["micro"]
    if micro["hidden"] is None:
        micro["hidden"] = 4 * micro["dim"]


def _check_modes(config: dict[str, Any]) -> None:
    """`autotune` as on/off; mode_scope's models among the study's; no autotuning compile mode with autotune off."""
    config["autotune"] = autotune_setting(config["autotune"])
    scoped = config["mode_scope"]["models"]
    if scoped is not None and (extra := [m for m in scoped if m not in config["models"]]):
        raise ConfigError(
            f"config error: mode_scope.models = {scoped}: {', '.join(extra)} not in models ({config['models']})"
        )
    torch_mode = config["compile"]["torch_mode"]
    if torch_mode in TORCH_AUTOTUNING_COMPILE_MODES and config["autotune"] == "off":
        raise ConfigError(
            f"config error: compile.torch_mode = {torch_mode!r}: autotunes kernels, which autotune: off rules out "
            "for every framework (use default or reduce-overhead, or autotune: on)"
        )


def _check_stop_rule(suite: str, settings: Mapping[str, Any]) -> None:
    """A stopping rule whose minimum exceeds its maximum would silently run to the maximum."""
    for low, high in (("min_iters", "max_iters"), ("min_seconds", "max_seconds")):
        if settings[low] > settings[high]:
            raise ConfigError(
                f"config error: {suite}.{low} = {settings[low]}: must be <= {suite}.{high} ({settings[high]})"
            )


def validate_config(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> dict:
    """Return a validated copy of `config` with every default filled in, or raise ConfigError."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"config must be a mapping of keys to values, got {type(config).__name__}")
    filled = copy.deepcopy(dict(config))
    validator = _DefaultFillingValidator(schema or load_schema())
    errors = sorted(validator.iter_errors(filled), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    if errors:
        # Report the deepest error: it names the exact offending value rather than its container.
        error = max(errors, key=lambda e: len(e.absolute_path))
        raise ConfigError(f"config error: {_describe(error)}")
    _check_consistency(filled)
    return filled


def load_config(path: str | Path) -> dict:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    return validate_config(raw or {})
