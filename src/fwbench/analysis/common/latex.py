"""Small LaTeX helpers shared by the table and macro writers, and the floats every section sets (`table_float`,
`figure_float`): a caption of at most three lines that says what the reader sees, its explanations in a note under the
table or figure (`float_note`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

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

# The paper's name for each framework; its order is the paper's order (PyTorch, the baseline of every ratio, first).
FRAMEWORK_LABELS = {"torch": "PyTorch", "jax": "JAX/Flax", "tensorflow": "TensorFlow/Keras"}
# Short names where a table header or a ratio's name must stay narrow ("JAX/PT [95% CI]", "TF compile s").
SHORT_LABELS = {"torch": "PT", "jax": "JAX", "tensorflow": "TF"}
# Every ratio is a framework's throughput over PyTorch's (fwbench.analysis.inference.ratios.speedups).
BASELINE = "torch"


def label(framework: str) -> str:
    """The paper's name for a framework (its own name for one the label map does not know)."""
    return FRAMEWORK_LABELS.get(framework, framework)


def short_label(framework: str) -> str:
    return SHORT_LABELS.get(framework, framework)


def ratio_label(framework: str) -> str:
    """The name of a framework's ratio to the baseline in prose, e.g. "JAX/PyTorch" or "TF/PyTorch"."""
    return f"{short_label(framework)}/{label(BASELINE)}"


def ordered_frameworks(frameworks) -> list[str]:
    """The distinct frameworks in the paper's order (FRAMEWORK_LABELS), any other after them by name: tables and
    macros list frameworks the same way whatever order the cells came in."""
    known = list(FRAMEWORK_LABELS)
    distinct = {str(f) for f in frameworks}
    return sorted(distinct, key=lambda f: (known.index(f) if f in known else len(known), f))


# How each execution mode (fwbench.study.modes) reads in tables and prose; compiled modes are what the ratios pair.
MODE_LABELS = {"eager": "eager", "compile": "compiled", "cudagraphs": "CUDA graphs", "jit": "jit", "xla": "XLA"}
MODE_SHORT = {"eager": "e", "compile": "c", "cudagraphs": "g", "jit": "", "xla": ""}


def mode_label(mode: str) -> str:
    return MODE_LABELS.get(mode, mode)


def variant_label(framework: str, mode: str, *, alone: bool = False) -> str:
    """A framework in one execution mode: "PyTorch (eager)", "PyTorch (compiled)", "JAX/Flax (jit)". `alone`: the
    framework has no other mode in this study, so its name alone is unambiguous ("JAX/Flax")."""
    return label(framework) if alone else f"{label(framework)} ({mode_label(mode)})"


def variant_short(framework: str, mode: str) -> str:
    """Narrow form for headers and ratio names: "PT-eager", "PT-compiled", "JAX", "TF" (a framework's only, always
    compiled mode needs no suffix)."""
    if framework in ("jax", "tensorflow") and mode in ("jit", "xla"):
        return short_label(framework)
    return f"{short_label(framework)}-{mode_label(mode)}"


def pairing_label(framework: str, mode: str, baseline_mode: str) -> str:
    """A ratio to the baseline in prose with the modes it pairs: "JAX/PyTorch-compiled", "TF/PyTorch-eager" (the
    numerator as `variant_short` names it, the baseline spelt out with its mode)."""
    return f"{variant_short(framework, mode)}/{label(BASELINE)}-{mode_label(baseline_mode)}"


def ordered_variants(variants) -> list[tuple[str, str]]:
    """Distinct (framework, mode) pairs in the paper's order: frameworks as ordered_frameworks, then each
    framework's modes in registry order (eager before compiled)."""
    from fwbench.study.modes import MODES

    distinct = {(str(f), str(m)) for f, m in variants}
    frameworks = ordered_frameworks(f for f, _ in distinct)

    def key(variant):
        framework, mode = variant
        order = MODES.get(framework, ())
        return (frameworks.index(framework), order.index(mode) if mode in order else len(order), mode)

    return sorted(distinct, key=key)


def others(frameworks) -> list[str]:
    """The frameworks compared against the baseline, in the paper's order."""
    return [f for f in ordered_frameworks(frameworks) if f != BASELINE]


def join_words(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c": the frameworks a sentence names."""
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


def default_title(frameworks) -> str:
    """The paper's title when the study gives none: its frameworks, so a study of two never claims three."""
    return f"{join_words([label(f) for f in ordered_frameworks(frameworks)])}, measured side by side"


def escape(text: object) -> str:
    return "".join(_SPECIAL.get(ch, ch) for ch in str(text))


def literal(text: object) -> str:
    """`escape(text)` with every hyphen printed as typed: LaTeX sets "--" as an en dash, so a command-line flag
    (--xla_gpu_autotune_level=0) would print as one that does not work when copied."""
    return re.sub(r"-(?=-)", "-{}", escape(text))


# Beyond these magnitudes a number is written in powers of ten: an interval from a process or two can span
# 1e-16 to 1e12, and 0.000000000000000137 written out runs a table cell off the page.
PLAIN_MAGNITUDES = range(-4, 9)


def number(value: float | None, digits: int = 3) -> str:
    """Significant-figure formatting; a missing value is an em dash, never 0; powers of ten beyond
    PLAIN_MAGNITUDES, which read alike in text and in math (1.37 times 10^-16 as LaTeX's ensuremath)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "---"
    if value == 0:
        return "0"
    if isinstance(value, float) and math.isinf(value):
        return r"\ensuremath{-\infty}" if value < 0 else r"\ensuremath{\infty}"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude not in PLAIN_MAGNITUDES:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        return rf"{mantissa}\ensuremath{{\times 10^{{{int(exponent)}}}}}"
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


def stacked(*lines: str, align: str = "c", position: str = "b") -> str:
    """A table cell of several lines (a header "RSS max (MB)" as "RSS max" over "(MB)"), aligned `align` (l, c, r):
    tables stay narrow enough for 8 pt without scaling. `position` "b" (a header) puts the last line on the row's
    baseline, "t" (a body cell) the first."""
    return rf"\begin{{tabular}}[{position}]{{@{{}}{align}@{{}}}}" + r" \\ ".join(lines) + r"\end{tabular}"


def stacked_header(*lines: str, align: str = "r") -> str:
    """A bold header of several lines (`stacked`)."""
    return r"\textbf{" + stacked(*lines, align=align) + "}"


def breakable(text: str) -> str:
    """LaTeX-escaped `text`, hyphens as typed, that may break after "/", "=", ",", ";", ":" or "_" (unbroken tokens
    such as XLA_FLAGS or a UUID would otherwise overrun a narrow column)."""
    return re.sub(r"(\\_|[/=,;:])", r"\1\\allowbreak{}", literal(text))


# A caption says what the reader sees in at most three lines of IEEEtran's 8 pt caption type: at most this many
# characters of rendered text per float environment. Measured in the PDF (pdfminer, as the paper check reads it):
# a line holds about 55 characters of a one-column table's caption (IEEEtran sets table captions in small capitals),
# 66 of a one-column figure's (less "Fig. 3. " on its first line), 117 of a page-wide table's and 133 of a
# page-wide figure's; each budget leaves a tenth for how the words break. Everything else the reader needs (what a
# mark means, what a column holds, which modes are paired, where the numbers come from) goes into the float's note
# (`float_note`), under the table or figure, so that the paper check (fwbench.analysis.paper.structure_check) passes
# the PDF; tests/test_captions.py holds every generated caption to these.
CAPTION_CHARS = {"table": 150, "figure": 175, "table*": 320, "figure*": 360}


def float_note(notes: Sequence[str], size: str = r"\footnotesize") -> str:
    """The note under a table or figure, inside its float: the non-empty `notes` as one ragged-right paragraph the
    float's width at `size` (IEEEtran's \\footnotesize is 8 pt, \\scriptsize 7 pt, the paper check's least); empty
    when there is nothing to say."""
    text = " ".join(note.strip() for note in notes if note and note.strip())
    if not text:
        return ""
    return rf"\par\smallskip\parbox{{\linewidth}}{{{size}\raggedright {text}}}"


def table_float(
    caption: str,
    label_: str,
    body: str,
    notes: Sequence[str] = (),
    *,
    wide: bool = True,
    placement: str = "tp",
    size: str = r"\footnotesize",
    setup: Sequence[str] = (),
) -> list[str]:
    """A table's float, line by line: its caption above (a short statement of what the reader sees, at most
    CAPTION_CHARS), the label, the body at `size` after the `setup` lines (a narrower \\tabcolsep), and the note
    under it (`float_note`). `wide`: across the page (table*; [tp] by default: a page top, or a page of floats, so
    that the paper's many page-wide tables do not hold the one-column figures back)."""
    environment = "table*" if wide else "table"
    note = float_note(notes)
    return [
        rf"\begin{{{environment}}}[{placement}]",
        r"\centering",
        rf"\caption{{{caption}}}",
        rf"\label{{{label_}}}",
        size,
        *setup,
        body.rstrip(),
        *([note] if note else []),
        rf"\end{{{environment}}}",
    ]


def figure_float(
    graphic: str, caption: str, label_: str, notes: Sequence[str] = (), *, wide: bool = False, placement: str = "t"
) -> list[str]:
    """A figure's float, line by line: the graphic the float's width (`wide`: across the page, figure*), its note
    right under it (`float_note`), then the caption (IEEEtran sets a figure's caption below it) and the label. The
    note stays above the caption: under it, at the caption's size and spacing, the paper check would read its lines
    as the caption's."""
    environment, width = ("figure*", r"\textwidth") if wide else ("figure", r"\columnwidth")
    note = float_note(notes)
    return [
        rf"\begin{{{environment}}}[{placement}]",
        r"\centering",
        rf"\includegraphics[width={width}]{{{graphic}}}",
        *([note] if note else []),
        rf"\caption{{{caption}}}",
        rf"\label{{{label_}}}",
        rf"\end{{{environment}}}",
    ]
