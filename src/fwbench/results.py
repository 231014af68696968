"""Cell results: the one schema every producer is checked against and every consumer can rely on."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema


@cache
def result_schema() -> dict:
    text = (resources.files("fwbench") / "schemas" / "cell_result.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def validate_result(result: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError naming the offending field if `result` breaks the contract."""
    validator = jsonschema.Draft202012Validator(result_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(result))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "<top level>"
        raise jsonschema.ValidationError(f"cell result invalid at {where}: {error.message}")


def load_result(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        result = json.load(handle)
    validate_result(result)
    return result
