"""Check the paper's shape (issue 56): the length a venue allows and what a reader meets first. Each check returns a
list of `pdf_check.Problem`s (empty when the paper keeps its shape):

- `abstract_words`: the generated abstract (abstract.tex) is at most `MAX_ABSTRACT_WORDS` words, counted as a reader
  counts them (fwbench.analysis.paper.abstract.words).
- `body_pages`: the body, which ends where report/paper.tex places ``\\label{sec:body-end}`` (before the references),
  is at most `MAX_BODY_PAGES` pages: the label's page, read from paper.aux.
- `headline_page`: the headline figure (``\\label{fig:headline}``) is on page `HEADLINE_LAST_PAGE` or before.
- `identifiers_in_prose`: no configuration identifier (``resnet50``, ``vit_b_16``: the registered models whose display
  name differs, fwbench.analysis.common.names.identifiers) anywhere in the body's text, the abstract, captions,
  tables and figure labels included; the appendices after the body's end are exempt.
- `long_captions`: no figure or table caption over `MAX_CAPTION_LINES` lines, on any page.
- `long_sentences`: no sentence of the generated prose (the abstract and every section written from a template,
  `GENERATED_PROSE`) over `MAX_SENTENCE_WORDS` words, counted as `abstract_words` counts them; figures, tables and
  their captions are not prose (the captions have their own check).

These checks hold for this paper, not for any LaTeX document, so `pdf_check.check_paper` (what every document must
pass) does not run them: `check_paper_and_structure` runs both, and the workflow's paper_check rule calls it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fwbench.analysis.common.names import identifiers as registered_identifiers
from fwbench.analysis.paper.abstract import words
from fwbench.analysis.paper.pdf_check import Problem, check_paper, page_texts, pdf_pages, strip_comments, text_lines

# The numbers (56): a conference paper's body is 8 pages and its abstract 150 words (IEEE's limits); the
# headline figure is on page 1 or 2, where a reader who stops after the first page still sees it; a caption of more
# than three lines is a paragraph that belongs in the text.
MAX_ABSTRACT_WORDS = 150
MAX_BODY_PAGES = 8
HEADLINE_LAST_PAGE = 2
MAX_CAPTION_LINES = 3
# "sentences of at most about 35 words in the abstract and the conclusions": a reader holds about that much at once
MAX_SENTENCE_WORDS = 35

BODY_END = "sec:body-end"
HEADLINE = "fig:headline"
ABSTRACT = "abstract.tex"
CONCLUSIONS = "conclusions.tex"
# The sections written from report/templates, besides the abstract, the body's and the appendices': their sentences
# are held to MAX_SENTENCE_WORDS.
GENERATED_PROSE = (
    "inference_results.tex",
    "training_section.tex",
    "micro_section.tex",
    "published_section.tex",
    CONCLUSIONS,
    "training_detail.tex",
    "micro_detail.tex",
    "ledger_section.tex",
    "profile_section.tex",
)
# a sentence ends at a full stop followed by a space and a capital, a digit or a LaTeX command ("0.50" has no space
# after its stop, "Fig. 3" and "e.g. X" are abbreviations); headings and labels are not sentences
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!Fig\.)(?<!Eq\.)(?<!e\.g\.)(?<!i\.e\.)\s+(?=[A-Z0-9\\])")
_LIST = re.compile(r"\\(?:begin|end)\{(?:itemize|enumerate)\}|\\item\b")  # a list's items are read one at a time
_HEADING = re.compile(r"\\(section|subsection|paragraph|label)\*?\{[^}]*\}")
# figures and tables (their captions included) and the files a section inputs are not its prose
_FLOAT = re.compile(r"\\begin\{(figure|table|tabular)(\*?)\}.*?\\end\{\1\2\}", flags=re.S)
_INPUT = re.compile(r"\\input\{[^}]*\}")


# --------------------------------------------------------------------------------------------------------------------
# The abstract


def abstract_words(abstract_tex_text: str, limit: int = MAX_ABSTRACT_WORDS) -> list[Problem]:
    """The abstract's source (abstract.tex, comments ignored) is at most `limit` words."""
    count = words(strip_comments(abstract_tex_text))
    if count <= limit:
        return []
    return [Problem("abstract_words", ABSTRACT, f"the abstract has {count} words, over the limit of {limit}")]


def sentences(tex_text: str) -> list[str]:
    """The sentences of generated LaTeX prose, comments, headings, labels, figures and tables left out; a list's
    items (and the text that leads into the list) count one by one, as a reader reads them."""
    text = _HEADING.sub(" ", _INPUT.sub(" ", _FLOAT.sub(" ", strip_comments(tex_text))))
    units = [" ".join(part.split()) for part in _LIST.split(text)]
    return [sentence.strip() for unit in units for sentence in _SENTENCE_END.split(unit) if sentence.strip()]


def long_sentences(tex_text: str, file: str, limit: int = MAX_SENTENCE_WORDS) -> list[Problem]:
    """Every sentence of `tex_text` over `limit` words, named by its count and its opening words."""
    problems = []
    for sentence in sentences(tex_text):
        count = words(sentence)
        if count > limit:
            opening = " ".join(sentence.split()[:8])
            problems.append(
                Problem("long_sentences", file, f"a sentence of {count} words, over {limit}: '{opening} ...'")
            )
    return problems


def longest_sentence(tex_text: str) -> int:
    return max((words(sentence) for sentence in sentences(tex_text)), default=0)


# --------------------------------------------------------------------------------------------------------------------
# Pages, from the aux file


def _group(text: str, start: int) -> tuple[str, int] | None:
    """The brace group opening at text[start] (nested braces kept): (its content, the index after it)."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start + 1 : index], index + 1
    return None


def label_page(aux_text: str, label: str) -> str | None:
    """The page LaTeX recorded for `label` in an aux file (``\\newlabel{label}{{number}{page}...}``, 2 fields or 5
    with hyperref): the page as printed, None where the label is not there."""
    for match in re.finditer(r"\\newlabel\{" + re.escape(label) + r"\}", aux_text):
        outer = _group(aux_text, match.end())
        if outer is None:
            continue
        first = _group(outer[0], 0)
        second = _group(outer[0], first[1]) if first else None
        if second is not None:
            return second[0].strip()
    return None


def _page_number(aux_text: str, label: str) -> int | None:
    page = label_page(aux_text, label)
    return int(page) if page and page.isdigit() else None


def _labelled_page(check: str, aux_text: str, label: str, what: str) -> int | Problem:
    """The page of `label` in the aux file, or the problem where it is missing or not a page number."""
    page = label_page(aux_text, label)
    if page is None:
        return Problem(check, label, f"report/paper.tex has no \\label{{{label}}} ({what}): none in the aux file")
    if not page.isdigit():
        return Problem(check, label, f"the page of \\label{{{label}}} is '{page}', not a page number")
    return int(page)


def body_pages(aux_text: str, limit: int = MAX_BODY_PAGES) -> list[Problem]:
    """The body (pages 1 to the page of \\label{sec:body-end}) is at most `limit` pages; a paper without the label
    fails, as its body has no end."""
    page = _labelled_page("body_pages", aux_text, BODY_END, "where the body ends, before the references")
    if isinstance(page, Problem):
        return [page]
    if page > limit:
        return [Problem("body_pages", f"page {page}", f"the body ends on page {page}, over the limit of {limit}")]
    return []


def headline_page(aux_text: str, label: str = HEADLINE, last_page: int = HEADLINE_LAST_PAGE) -> list[Problem]:
    """The headline figure (`label`) is on page `last_page` or before."""
    page = _labelled_page("headline_page", aux_text, label, "the headline figure")
    if isinstance(page, Problem):
        return [page]
    if page > last_page:
        return [Problem("headline_page", f"page {page}", f"\\label{{{label}}} is on page {page}, after {last_page}")]
    return []


# --------------------------------------------------------------------------------------------------------------------
# Identifiers in the prose


def _identifier_pattern(identifier: str) -> re.Pattern[str]:
    """`identifier` as a whole word, its underscores as the PDF's text shows them: an underscore (T1 encoding) or a
    space (OT1 draws \\_ as a rule), with pdftotext's occasional space beside the underscore."""
    parts = [re.escape(part) for part in identifier.split("_")]
    return re.compile(r"(?<![A-Za-z0-9_])" + r"(?:\s?_\s?| )".join(parts) + r"(?![A-Za-z0-9_])")


def identifiers_in_prose(
    pages: Sequence[str], identifiers: Iterable[str], body_last_page: int | None = None
) -> list[Problem]:
    """Every occurrence of a configuration identifier in the text of pages 1 to `body_last_page` (all pages where it
    is None), each a problem naming its page and the text around it. Every body page's text counts, its tables and
    figure labels included: the body names models by their display names throughout."""
    patterns = [(name, _identifier_pattern(name)) for name in sorted(identifiers)]
    last = len(pages) if body_last_page is None else min(body_last_page, len(pages))
    problems = []
    for number_, text in enumerate(pages[:last], start=1):
        hits = sorted(
            (match.start(), match.end(), name) for name, pattern in patterns for match in pattern.finditer(text)
        )
        for start, end, name in hits:
            context = " ".join(text[max(0, start - 40) : end + 40].split())
            problems.append(Problem("identifier_in_prose", f"page {number_}", f"'{name}' in '{context}'"))
    return problems


# --------------------------------------------------------------------------------------------------------------------
# Captions


@dataclass(frozen=True)
class Line:
    """A line of the PDF's text (PDF coordinates: y grows upwards), with its base size (its largest characters)."""

    text: str
    x0: float
    x1: float
    y0: float
    y1: float
    size: float


@dataclass(frozen=True)
class Caption:
    page: int
    label: str  # "Fig. 3" or "TABLE IV"
    lines: tuple[str, ...]  # the caption's text lines ("TABLE IV", on a line of its own, not counted)


_FIGURE = re.compile(r"^(Fig\.\s*\d+)\.")  # IEEEtran: "Fig. 3. The caption..." in the caption's first line
_TABLE = re.compile(r"^T\s?ABLE\s+([IVXLC]+)$")  # IEEEtran: "TABLE IV" alone, the caption centred below it


def _next_line(lines: Sequence[Line], current: Line, fits: Callable[[Line], bool]) -> Line | None:
    """The line right below `current` that continues its block: the same size, its baseline at most 1.5 times the
    size lower (a caption's own lines are 1.1 apart; the table or text after a caption is further), and `fits`."""
    below = [
        line
        for line in lines
        if line.y1 <= current.y0 + 0.5 * current.size
        and 0.25 * current.size < current.y0 - line.y0 <= 1.5 * current.size
        and abs(line.size - current.size) < 0.5
        and fits(line)
    ]
    return max(below, key=lambda line: line.y0) if below else None


def _continues(lines: Sequence[Line], start: Line) -> bool:
    """Whether `start` continues a block of lines above it (of its size, in its column, a line's spacing away)."""
    return any(
        line is not start
        and line.y0 >= start.y1 - 0.5 * start.size
        and line.y0 - start.y0 <= 1.5 * start.size
        and abs(line.size - start.size) < 0.5
        and line.x0 < start.x1
        and line.x1 > start.x0
        for line in lines
    )


def _row(lines: Sequence[Line], line: Line) -> Line:
    """`line` with the pieces pdfminer split off it (on its baseline, of its size, each less than its size from the
    next, closer than the 12 pt between IEEEtran's columns): "Fig. 3." and the rest of its line come out as two
    lines where TeX stretched the space between them."""
    level = [
        other
        for other in lines
        if abs(other.y0 - line.y0) < 0.25 * line.size and abs(other.size - line.size) < 0.5 and other is not line
    ]
    row = [line]
    while near := [
        other
        for other in level
        if other not in row and any(max(other.x0 - piece.x1, piece.x0 - other.x1) < line.size for piece in row)
    ]:
        row += near
    row.sort(key=lambda piece: piece.x0)
    text = " ".join(" ".join(piece.text.split()) for piece in row)
    return Line(text, row[0].x0, max(piece.x1 for piece in row), line.y0, line.y1, line.size)


def captions(lines: Sequence[Line], page: int = 1) -> list[Caption]:
    """The figure and table captions among one page's `lines`, each with its lines. A figure caption starts with a
    line "Fig. N." that continues no paragraph above it and runs down its column; a table caption is the lines
    centred under its "TABLE N" line, down to the gap before the table."""
    found = []
    for line in lines:
        start = _row(lines, line)
        if start.x0 != line.x0:
            continue  # a piece of a row, which its first piece stands for
        text = start.text
        if match := _FIGURE.match(text):

            def fits(other: Line, start: Line = start) -> bool:
                return other.x0 < start.x1 and other.x1 > start.x0

            if _continues(lines, start):
                continue  # "Fig. 3." at the start of a line of a paragraph: a reference, not a caption
            label, block = match.group(1), [text]
        elif match := _TABLE.match(text):
            centre = (start.x0 + start.x1) / 2

            def fits(other: Line, centre: float = centre) -> bool:
                return other.x0 <= centre <= other.x1

            label, block = f"TABLE {match.group(1)}", []
        else:
            continue
        current = start
        while (current := _next_line(lines, current, fits)) is not None:
            block.append(_row(lines, current).text)
        found.append(Caption(page, label, tuple(block)))
    return found


def pdf_lines(pdf: str | Path) -> list[list[Line]]:
    """Every page's text lines (pdfminer), figures' own text left out (pdf_check.text_lines)."""
    from pdfminer.layout import LTChar

    pages = []
    for page in pdf_pages(pdf):
        lines = []
        for line in text_lines(page):
            sizes = [c.size for c in line if isinstance(c, LTChar) and c.get_text().strip()]
            if sizes:
                lines.append(Line(line.get_text().strip(), line.x0, line.x1, line.y0, line.y1, max(sizes)))
        pages.append(lines)
    return pages


def caption_problems(found: Iterable[Caption], max_lines: int = MAX_CAPTION_LINES) -> list[Problem]:
    problems = []
    for caption in found:
        if len(caption.lines) > max_lines:
            first = " ".join(" ".join(caption.lines).split()[:8])
            problems.append(
                Problem(
                    "long_caption",
                    f"page {caption.page}, {caption.label}",
                    f"a caption of {len(caption.lines)} lines, over the limit of {max_lines}: '{first} ...'",
                )
            )
    return problems


def long_captions(pdf: str | Path, max_lines: int = MAX_CAPTION_LINES) -> list[Problem]:
    """Every figure or table caption, on any page, over `max_lines` lines."""
    found = [caption for number_, lines in enumerate(pdf_lines(pdf), start=1) for caption in captions(lines, number_)]
    return caption_problems(found, max_lines)


# --------------------------------------------------------------------------------------------------------------------
# All of it


def structure_report(
    *,
    pdf: str | Path,
    aux: str | Path,
    abstract_tex: str | Path | None,
    prose_tex: Iterable[str | Path] = (),
    identifiers: Iterable[str] | None = None,
    max_abstract_words: int = MAX_ABSTRACT_WORDS,
    max_body_pages: int = MAX_BODY_PAGES,
    headline_last_page: int = HEADLINE_LAST_PAGE,
    max_caption_lines: int = MAX_CAPTION_LINES,
    max_sentence_words: int = MAX_SENTENCE_WORDS,
) -> dict[str, Any]:
    """Every shape check on a built paper: the `pdf`, its `aux` file, the generated `abstract_tex` (None: not
    found, itself a problem) and the other generated prose, `prose_tex` (each named by its file name; a file that
    does not exist is a section this paper does not have, not checked).
    Returns {"abstract_words", "body_pages", "headline_page" (None where unknown), "longest_sentence" (words, per
    generated file), "problems": [Problem, ...]}."""
    aux_path = Path(aux)
    aux_text = aux_path.read_text(encoding="utf-8", errors="replace") if aux_path.is_file() else ""
    problems: list[Problem] = []
    count = None
    longest: dict[str, int] = {}
    if abstract_tex is None or not Path(abstract_tex).is_file():
        problems.append(Problem("abstract_words", ABSTRACT, f"no {ABSTRACT} on the search path to count"))
    else:
        text = Path(abstract_tex).read_text(encoding="utf-8", errors="replace")
        count = words(strip_comments(text))
        problems += abstract_words(text, max_abstract_words)
        longest[ABSTRACT] = longest_sentence(text)
        problems += long_sentences(text, ABSTRACT, max_sentence_words)
    for path in map(Path, prose_tex):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            longest[path.name] = longest_sentence(text)
            problems += long_sentences(text, path.name, max_sentence_words)
    problems += body_pages(aux_text, max_body_pages)
    problems += headline_page(aux_text, HEADLINE, headline_last_page)
    body_end = _page_number(aux_text, BODY_END)
    names = registered_identifiers() if identifiers is None else identifiers
    problems += identifiers_in_prose(page_texts(pdf), names, body_end)
    problems += long_captions(pdf, max_caption_lines)
    return {
        "abstract_words": count,
        "body_pages": body_end,
        "headline_page": _page_number(aux_text, HEADLINE),
        "longest_sentence": longest,
        "problems": problems,
    }


def find_on_path(name: str, folders: Sequence[str | Path]) -> Path | None:
    """The first folders[i]/name that exists, as LaTeX's search would find it."""
    return next((Path(folder) / name for folder in folders if (Path(folder) / name).is_file()), None)


def check_paper_and_structure(
    *,
    pdf: str | Path,
    log: str | Path,
    main_tex: str | Path,
    search_path: Sequence[str | Path],
    pages_dir: str | Path,
    **options: Any,
) -> dict[str, Any]:
    """`pdf_check.check_paper` (its `options` passed on) and `structure_report`: the aux file is the one beside the
    LaTeX `log` (latexmk writes both into the build folder), abstract.tex the first on `main_tex`'s folder and
    `search_path` (each of GENERATED_PROSE likewise). The report adds "abstract_words", "body_pages",
    "headline_page" and "longest_sentence", and the shape's problems."""
    report = check_paper(pdf=pdf, log=log, main_tex=main_tex, search_path=search_path, pages_dir=pages_dir, **options)
    structure = structure_report(
        pdf=pdf,
        aux=Path(log).with_suffix(".aux"),
        abstract_tex=find_on_path(ABSTRACT, [Path(main_tex).parent, *search_path]),
        prose_tex=[
            found for name in GENERATED_PROSE if (found := find_on_path(name, [Path(main_tex).parent, *search_path]))
        ],
    )
    problems = structure.pop("problems")
    return {**report, **structure, "problems": report["problems"] + [asdict(problem) for problem in problems]}
