"""Small LaTeX helpers shared by the table and macro writers."""

from __future__ import annotations

import math
import re

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}

FRAMEWORK_LABELS = {"torch": "PyTorch", "jax": "JAX/Flax"}


def escape(text: object) -> str:
    return "".join(_SPECIAL.get(ch, ch) for ch in str(text))


def number(value: float | None, digits: int = 3) -> str:
    """Significant-figure formatting; a missing value is an em dash, never 0."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "---"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}".replace(",", "{,}")


def define_macros(values: dict[str, str]) -> str:
    """`\\newcommand` lines for {macro name: value}, one per line."""
    return "".join(rf"\newcommand{{\{name}}}{{{value}}}" + "\n" for name, value in values.items())


def macro_name(*parts: str) -> str:
    """A valid LaTeX macro name (letters only) from parts like ('speedup', 'small_cnn')."""
    words = re.split(r"[^A-Za-z0-9]+", " ".join(parts))
    digits = dict(
        zip("0123456789", ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"], strict=True)
    )
    out = "".join(w[:1].upper() + w[1:] for w in words if w)
    return "fwb" + "".join(digits.get(ch, ch) for ch in out)
