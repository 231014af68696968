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

from fwbench.study.modes import CUDA_GRAPHS_COMPILE_MODE, TORCH_AUTOTUNING_COMPILE_MODES, autotune_setting


class ConfigError(ValueError):
    """A study configuration that cannot be run; the message is a single line naming key and value. `key` is the
    dotted key it names, where there is one, so that fwbench.study.files can add the file that wrote it."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


# Keys that select among another key's values (the axis): each selects among the study's own, so a study that
# shrinks `models` never has to edit them (fwbench.study.files says when a name outside the axis is an error instead).
NARROWING = {"training.models": "models", "mode_scope.models": "models", "mode_scope.suites": "suites"}


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
            raise ConfigError(
                "config error: dataset.path: required when dataset.source = 'imagefolder'", key="dataset.path"
            )
        if not Path(dataset["path"]).is_dir():
            raise ConfigError(f"config error: dataset.path = {dataset['path']!r}: not a directory", key="dataset.path")
    resize = dataset["resize_size"]
    if resize is not None and resize < dataset["image_size"]:
        raise ConfigError(
            f"config error: dataset.resize_size = {resize}: must be >= dataset.image_size ({dataset['image_size']})",
            key="dataset.resize_size",
        )


def _check_fallbacks(fallbacks: Mapping[str, Any]) -> None:
    """Each rung's pattern must compile and its name be unique: a rung is named in every deviation it causes."""
    seen: set[str] = set()
    for index, rung in enumerate(fallbacks["ladder"]):
        if rung["name"] in seen:
            raise ConfigError(
                f"config error: fallbacks.ladder[{index}].name = {rung['name']!r}: used twice", key="fallbacks.ladder"
            )
        seen.add(rung["name"])
        try:
            re.compile(rung["pattern"])
        except re.error as exc:
            raise ConfigError(
                f"config error: fallbacks.ladder[{index}].pattern = {rung['pattern']!r}: not a regular expression "
                f"({exc})",
                key="fallbacks.ladder",
            ) from None


def _check_consistency(config: Mapping[str, Any], strict: Mapping[str, str], notes: list[str]) -> None:
    _check_dataset(config["dataset"])
    for model, path in config["pretrained"].items():
        if not Path(path).is_file():
            raise ConfigError(f"config error: pretrained.{model} = {path!r}: file not found", key=f"pretrained.{model}")
    _check_fallbacks(config["fallbacks"])
    _narrow(config, strict, notes)
    _check_modes(config)
    micro = config["micro"]
    if micro["hidden"] is None:
        micro["hidden"] = 4 * micro["dim"]


def _narrow(config: dict[str, Any], strict: Mapping[str, str], notes: list[str]) -> None:
    """Each NARROWING key keeps the names among its axis's (in its own order); a name outside the axis is an error
    only where `strict` names the key. A training suite left with no model to train is dropped, with a note."""
    for key, axis in NARROWING.items():
        section, name = key.split(".")
        chosen = config[section][name]
        if chosen is None:
            continue
        outside = [n for n in chosen if n not in config[axis]]
        if outside and key in strict:
            raise ConfigError(
                f"config error: {key} = {chosen}: {', '.join(outside)} not in {axis} ({config[axis]}); "
                f"{key} selects among {axis}",
                key=key,
            )
        config[section][name] = [n for n in chosen if n in config[axis]]
        if key == "training.models" and not config[section][name] and "training" in config["suites"]:
            config["suites"] = [s for s in config["suites"] if s != "training"]
            notes.append(f"training.models = {chosen} selects none of models {config['models']}: no training cells")


def _check_modes(config: dict[str, Any]) -> None:
    """`autotune` as on/off; no autotuning compile mode with autotune off; no mode compile in reduce-overhead beside
    mode cudagraphs (the same program twice)."""
    config["autotune"] = autotune_setting(config["autotune"])
    torch_mode = config["compile"]["torch_mode"]
    torch_modes = config["modes"].get("torch") or []
    if torch_mode == CUDA_GRAPHS_COMPILE_MODE and {"compile", "cudagraphs"} <= set(torch_modes):
        raise ConfigError(
            f"config error: compile.torch_mode = {torch_mode!r}: modes.torch names both compile and cudagraphs, which "
            "would then be the same program (cudagraphs is torch.compile in mode reduce-overhead)",
            key="compile.torch_mode",
        )
    if torch_mode in TORCH_AUTOTUNING_COMPILE_MODES and config["autotune"] == "off":
        raise ConfigError(
            f"config error: compile.torch_mode = {torch_mode!r}: autotunes kernels, which autotune: off rules out "
            "for every framework (use default or reduce-overhead, or autotune: on)",
            key="compile.torch_mode",
        )


def validate_config(
    config: Mapping[str, Any],
    schema: Mapping[str, Any] | None = None,
    *,
    strict: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> dict:
    """Return a validated copy of `config` with every default filled in, or raise ConfigError.

    The NARROWING keys keep only the names among their axis's. `strict` maps those of them whose every name must be
    in the axis (fwbench.study.files: written after the axis was chosen) to where they were written, for the error. What
    the narrowing changed beyond dropping names (a suite left with no model) is appended to `notes`."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"config must be a mapping of keys to values, got {type(config).__name__}")
    filled = copy.deepcopy(dict(config))
    validator = _DefaultFillingValidator(schema or load_schema())
    errors = sorted(validator.iter_errors(filled), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    if errors:
        # Report the deepest error: it names the exact offending value rather than its container.
        error = max(errors, key=lambda e: len(e.absolute_path))
        raise ConfigError(f"config error: {_describe(error)}", key=_offending_key(error))
    _check_consistency(filled, strict or {}, notes if notes is not None else [])
    return filled


def _offending_key(error: jsonschema.ValidationError) -> str:
    """The dotted key an error is about: the unknown key itself for an unknown key, else the value's key."""
    path = [str(part) for part in error.absolute_path if not isinstance(part, int)]
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        path += extra[:1]
    return ".".join(path)
