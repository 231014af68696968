"""The study's generated prose lives in template files (report/templates/*.j2), so an author rewords the abstract or the
README's summary without touching Python: the analysis hands a template numbers, verdicts and display names
(fwbench.analysis.paper.headline), never sentences, and the template decides how they read.

One Jinja2 environment per target markup, chosen by the template's name (`abstract.tex.j2`: LaTeX, `summary.md.j2`:
Markdown), because the same finding is spelt differently in each: "1.5$\\times$" against "1.5×", "0.25--1.4" against
"0.25–1.4", "95\\%" against "95%". A template shared by both (`findings.j2`, the sentences the abstract and the summary
both say) is compiled by the environment that imports it, so it takes that target's filters and says the same
findings the same way in both.

The delimiters read naturally inside LaTeX and Markdown, where braces and `#` are everywhere: `<< value >>`,
`<% if ... %>`, `<# comment #>`. StrictUndefined makes a missing value an error that names the template, its line and
the variable (TemplateValueError), never an empty gap in the paper. Nothing is HTML-escaped; for the LaTeX target,
every string handed to a template is LaTeX-escaped before it renders (a model named `my_net` must not break the
build), so the template's own text and the filters' markup are the only LaTeX in the output.

The folder is the repository's report/templates, found from the package as installation.PYPROJECT finds
pyproject.toml (the package is installed editable from the checkout); `folder` names another.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

import jinja2

import fwbench
from fwbench.analysis.common.latex import escape, number

TEMPLATES = Path(fwbench.__file__).resolve().parents[2] / "report" / "templates"
TARGETS = ("tex", "md")
# What a template prints to end a paragraph (`<< paragraph >>`): its own line breaks are layout (`prose`).
PARAGRAPH = "\f"
# Small counts read as words ("five of eight"), larger ones as digits.
NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


class TemplateValueError(ValueError):
    """A template asked for a value the analysis did not hand it: names the template, its line and the variable."""


def target_of(name: str) -> str:
    """The markup a template writes, from its name: `x.tex.j2` LaTeX, `x.md.j2` Markdown (a shared template has no
    target of its own and takes its importer's)."""
    for target in TARGETS:
        if name.endswith(f".{target}.j2"):
            return target
    raise ValueError(f"{name}: a template's name ends in .tex.j2 or .md.j2, which say the markup it writes")


def rounded(value: float, digits: int = 2) -> float:
    """`value` to `digits` significant figures, the integer part included (1234 to 1200 at two), so that no printed
    number claims more precision than the template asked for."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def sig(value: float | None, digits: int = 2, target: str = "tex") -> str:
    """A number to `digits` significant figures, as fwbench.analysis.common.latex.number writes it. A ratio that two
    figures would round to 1.0 though it is not 1 takes a third (1.04, not 1.0), so a resolved difference never reads
    as none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        text = number(None)
        return text if target == "tex" else "—"
    value = float(value)
    if digits < 3 and value != 1 and rounded(value, digits) == 1:
        digits = 3
    text = number(rounded(value, digits), digits)
    if target == "md":
        text = text.replace("{,}", ",").replace("---", "—").replace(r"\ensuremath{\times 10^{", "×10^")
        text = text.replace("}}", "")
    return text


class Latex(str):
    """Text that is LaTeX already (a paragraph another module wrote), which the LaTeX target hands on unescaped."""


def latex_escaped(value: Any) -> Any:
    """`value` with every string in it LaTeX-escaped, through dataclasses, mappings, lists and tuples (numbers, None
    and booleans as they are; `Latex` text as it is): what the LaTeX target hands its templates."""
    if isinstance(value, Latex):
        return value
    if isinstance(value, str):
        return escape(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value, **{f.name: latex_escaped(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        )
    if isinstance(value, Mapping):
        return {key: latex_escaped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(latex_escaped(item) for item in value)
    return value


def _filters(target: str) -> dict[str, Any]:
    times = "$\\times$" if target == "tex" else "×"
    dash = "--" if target == "tex" else "–"

    def sig_filter(value: float | None, digits: int = 2) -> str:
        return sig(value, digits, target)

    def times_filter(value: float, digits: int = 2) -> str:
        """ "1.5×": a ratio as the prose writes it."""
        return sig(value, digits, target) + times

    def span(low: float, high: float, digits: int = 2) -> str:
        """ "0.25–1.4×": a range of ratios (one number where the two ends print alike)."""
        a, b = sig(low, digits, target), sig(high, digits, target)
        return (a if a == b else f"{a}{dash}{b}") + times

    def interval(low: float | tuple[float, float], high: float | None = None, digits: int = 2) -> str:
        """ "[1.4, 1.6]", from `low|interval(high)` or `(low, high)|interval`."""
        if high is None:
            low, high = low
        return f"[{sig(low, digits, target)}, {sig(high, digits, target)}]"

    def join_words(items: Iterable[object], last: str = "and") -> str:
        """ "a, b and c"."""
        texts = [str(item) for item in items]
        return f" {last} ".join(texts) if len(texts) < 3 else ", ".join(texts[:-1]) + f" {last} " + texts[-1]

    def spell(count: int) -> str:
        """ "five" for 5, digits beyond ten."""
        count = int(count)
        return NUMBER_WORDS[count] if 0 <= count < len(NUMBER_WORDS) else str(count)

    def article(name: object) -> str:
        """ "an AMD EPYC", "a Test CPU": the indefinite article by the name's first letter."""
        text = str(name)
        return ("an " if text[:1].lower() in "aeiou" else "a ") + text

    def plural(count: int, word: str, many: str | None = None) -> str:
        """The word alone, in the plural unless `count` is one."""
        return word if int(count) == 1 else (many or word + "s")

    return {
        "sig": sig_filter,
        "times": times_filter,
        "span": span,
        "interval": interval,
        "join_words": join_words,
        "spell": spell,
        "article": article,
        "plural": plural,
    }


@cache
def environment(target: str, folder: Path = TEMPLATES) -> jinja2.Environment:
    """The environment that renders `target` ("tex" or "md") templates from `folder`."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: one of {TARGETS}")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        block_start_string="<%",
        block_end_string="%>",
        variable_start_string="<<",
        variable_end_string=">>",
        comment_start_string="<#",
        comment_end_string="#>",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(_filters(target))
    env.globals.update(
        target=target,
        percent="\\%" if target == "tex" else "%",
        dash="--" if target == "tex" else "–",
        paragraph=PARAGRAPH,
    )
    return env


def _template_line(trace: TracebackType | None, folder: Path) -> str:
    """ " (findings.j2, line 12)": where in a template the error arose (its innermost frame inside `folder`; Jinja
    rewrites the traceback so that a template frame carries the template's own line)."""
    where = ""
    while trace is not None:
        path = Path(trace.tb_frame.f_code.co_filename)
        if path.parent == folder:
            where = f" ({path.name}, line {trace.tb_lineno})"
        trace = trace.tb_next
    return where


def render(name: str, values: dict[str, Any], folder: Path | None = None) -> str:
    """The template `name` rendered with `values`, as prose (`prose`); a value it needs and was not given raises
    TemplateValueError naming the template and the variable."""
    folder = Path(folder or TEMPLATES).resolve()
    target = target_of(name)
    try:
        template = environment(target, folder).get_template(name)
        return prose(template.render(**(latex_escaped(values) if target == "tex" else values)))
    except jinja2.UndefinedError as error:
        raise TemplateValueError(f"{name}{_template_line(error.__traceback__, folder)}: {error}") from error


def prose(text: str) -> str:
    """A rendered template as prose: its line breaks and indentation are layout, so each run of whitespace is one
    space and none stands before punctuation; a paragraph ends where the template printed `paragraph`."""
    paragraphs = (re.sub(r"\s+([,.;:)])", r"\1", " ".join(p.split())) for p in text.split(PARAGRAPH))
    return "\n\n".join(p for p in paragraphs if p)
