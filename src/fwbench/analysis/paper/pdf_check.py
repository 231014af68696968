"""Check a built paper as a reader sees it: the LaTeX log, the LaTeX sources it was built from and the PDF itself.

Each check returns a list of `Problem`s (empty when clean), each naming where it is (a page, a source file, a
label, a line of the log):

- `log_problems`: undefined references or citations, labels that had not settled, overfull boxes more than
  `tolerance_pt` too wide (or high) and floats too large for their page, from the LaTeX log.
- `unreferenced_floats`: every table and figure environment's \\label, in the main file or in any file it
  \\input{}s (the generated sections under results/tables/ hold floats of their own), must be referenced (\\ref,
  \\autoref, \\cref, ...) somewhere outside that float.
- `stray_percents`: a generated input (any source but the main file) must not hold an unescaped % after text on a
  line: LaTeX would drop the rest of that line from the PDF without a warning.
- `text_problems`: the PDF's text, page by page (pdftotext), must not show ``??`` (an undefined reference) or a
  macro that was never expanded: a literal backslash command (``\\fwbNumCells``) or one of the study's macro names
  (``fwb`` followed by a capital letter).
- `small_text`: no text the reader has to read is set below `minimum_pt` (7 pt): see its docstring for the rule.
- `render_pages`: every page renders (pdftoppm) to a non-blank image.

`check_paper` runs them all, the checks every LaTeX document must pass. The workflow's paper_check rule runs them
with the paper's own shape (its length, its headline figure, its captions: fwbench.analysis.paper.structure_check,
`check_paper_and_structure`) and fails the study when the list is not empty.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TOLERANCE_PT = 2.0  # an overfull box this much too wide or less is invisible in print
MINIMUM_PT = 7.0  # the smallest size of text a reader has to read (IEEEtran's \scriptsize at 10 pt)
DPI = 100
LOG_LINE = 79  # TeX breaks its log's lines at this many characters (max_print_line)


@dataclass(frozen=True)
class Problem:
    """One thing a reader of the PDF would trip over."""

    check: str  # which check found it (e.g. "overfull_box", "unreferenced_float", "small_text")
    where: str  # page, file, label or log line
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.where}: {self.message}"


# --------------------------------------------------------------------------------------------------------------------
# The LaTeX log


def unwrap_log(text: str) -> str:
    """The log with TeX's hard line breaks undone: TeX breaks every line at 79 characters, so a line of exactly
    that length continues on the next."""
    out: list[str] = []
    carry = ""
    for line in text.splitlines():
        if len(line) == LOG_LINE:
            carry += line
            continue
        out.append(carry + line)
        carry = ""
    if carry:
        out.append(carry)
    return "\n".join(out)


_FILE_OPEN = re.compile(r"\(([^()\s]*/[^()\s]+\.(?:tex|sty|cls|clo|cfg|def|fd|aux|out|ltx|dict))")
_OVERFULL = re.compile(r"^Overfull \\([hv])box \((\d+(?:\.\d+)?)pt too (?:wide|high)\) (.*)$")
_UNDEFINED = re.compile(r"(?:LaTeX|Package natbib) Warning: (Reference|Citation) [`']([^']+)' on page (\S+) undefined")
_TOO_LARGE = re.compile(r"Float too large for page by (\d+(?:\.\d+)?)pt")


def _current_files(text: str) -> list[tuple[str, str]]:
    """For every line of the (unwrapped) log, the source file TeX was reading there: a stack of the files it opened
    ("(file.tex") and closed (")"), every other parenthesis pushed and popped alike so that a warning's own
    parentheses keep the stack balanced. The typeset material TeX shows after an overfull or underfull box, up to
    the next empty line, is text of the paper, whose parentheses need not balance: it is skipped. Each line gets
    (the file being read, the last file closed before it): a table's tabular is often a file of its own, closed
    before TeX finishes the paragraph that holds it."""
    stack: list[str | None] = []
    files = []
    in_box = False
    closed = ""
    for line in text.split("\n"):
        files.append((next((f for f in reversed(stack) if f), ""), closed))
        if line.startswith(("Overfull \\", "Underfull \\")):
            in_box = True
            continue
        if in_box:
            in_box = bool(line.strip())
            continue
        index = 0
        while index < len(line):
            char = line[index]
            if char == "(":
                match = _FILE_OPEN.match(line, index)
                stack.append(match.group(1) if match else None)
                index = match.end() if match else index + 1
                continue
            if char == ")" and stack:
                closed = stack.pop() or closed
            index += 1
    return files


def log_problems(log_text: str, *, tolerance_pt: float = TOLERANCE_PT) -> list[Problem]:
    """Undefined references and citations, unsettled labels, overfull boxes more than `tolerance_pt` too wide or
    high, and floats too large for their page, from a LaTeX log (its text)."""
    text = unwrap_log(log_text)
    lines = text.split("\n")
    files = _current_files(text)
    problems: list[Problem] = []
    for number_, line in enumerate(lines, start=1):
        reading, closed = files[number_ - 1]
        where = f"log line {number_}" + (f" ({Path(reading).name}" if reading else " (")
        where += f", after {Path(closed).name})" if closed else ")"
        where = where.replace(" ()", "")
        if match := _UNDEFINED.search(line):
            kind, name, page = match.groups()
            problems.append(Problem(f"undefined_{kind.lower()}", f"{name} (page {page})", line.strip()))
        elif "There were undefined references" in line or "There were undefined citations" in line:
            if not any(p.check.startswith("undefined_") for p in problems):
                problems.append(Problem("undefined_reference", where, line.strip()))
        elif "Label(s) may have changed" in line or "There were multiply-defined labels" in line:
            problems.append(Problem("labels", where, line.strip()))
        elif match := _OVERFULL.match(line):
            box, amount, rest = match.group(1), float(match.group(2)), match.group(3)
            if amount > tolerance_pt:
                context = lines[number_] if number_ < len(lines) else ""  # the box's content, as TeX shows it
                problems.append(
                    Problem(
                        "overfull_box",
                        where,
                        f"{box}box {amount:g} pt too {'wide' if box == 'h' else 'high'} (tolerance {tolerance_pt:g}"
                        f" pt) {rest}: {context.strip()[:120]}",
                    )
                )
        elif (match := _TOO_LARGE.search(line)) and float(match.group(1)) > tolerance_pt:
            problems.append(Problem("float_too_large", where, line.strip()))
    return problems


# --------------------------------------------------------------------------------------------------------------------
# The LaTeX sources


def strip_comments(tex: str) -> str:
    """LaTeX source without its comments (a % not escaped as \\%, to the end of the line)."""
    return re.sub(r"(?<!\\)%.*", "", tex)


_INPUT = re.compile(r"\\(?:input|include)\{([^}]+)\}")


def read_sources(main_tex: str | Path, search_path: Sequence[str | Path]) -> dict[str, str]:
    """The main file and every file it \\input{}s or \\include{}s, recursively, found as LaTeX finds them (the main
    file's folder, then `search_path` in order): {path: source without comments}. A name found nowhere is skipped
    (LaTeX itself would have stopped on it)."""
    main = Path(main_tex)
    folders = [main.parent, *map(Path, search_path)]
    sources: dict[str, str] = {}
    pending = [main]
    while pending:
        path = pending.pop(0)
        if str(path) in sources:
            continue
        text = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
        sources[str(path)] = text
        for name in _INPUT.findall(text):
            candidates = [name] if name.endswith(".tex") else [f"{name}.tex", name]
            found = next((f / c for f in folders for c in candidates if (f / c).is_file()), None)
            if found is not None:
                pending.append(found)
    return sources


# Text, then an unescaped %, then more text: a % that ends its line (the idiom that suppresses a space) drops nothing.
_TEXT_THEN_PERCENT = re.compile(r"^(.*?\S.*?)(?<!\\)%(.*\S.*)$", re.M)


def stray_percents(main_tex: str | Path, sources: Mapping[str, str]) -> list[Problem]:
    """An unescaped % after text in a generated input (every source but the hand-written `main_tex`): the study writes
    these files and never comments in them, so such a % is a value that was not escaped, and LaTeX silently drops
    the rest of its line from the PDF (seen: the ledger's lead sentence cut at "10%")."""
    problems = []
    for path in sources:
        if Path(path) == Path(main_tex):
            continue
        raw = Path(path).read_text(encoding="utf-8", errors="replace")
        for match in _TEXT_THEN_PERCENT.finditer(raw):
            line = raw.count("\n", 0, match.start()) + 1
            dropped = match.group(2).strip()[:60]
            problems.append(
                Problem(
                    "stray_percent",
                    f"{Path(path).name}:{line}",
                    f"an unescaped % after text drops the rest of the line from the PDF: {dropped!r}",
                )
            )
    return problems


_FLOAT = re.compile(r"\\begin\{(table\*?|figure\*?)\}(.*?)\\end\{\1\}", re.S)
_LABEL = re.compile(r"\\label\{([^}]+)\}")
_REF = re.compile(r"\\(?:ref|autoref|cref|Cref|pageref|nameref|vref|Autoref|cpageref)\*?\{([^}]+)\}")


def unreferenced_floats(sources: Mapping[str, str]) -> list[Problem]:
    """Every float (table, table*, figure, figure*) in `sources` ({file: text}) whose labels are never referenced
    outside the float itself, and every float without a label (nothing can refer to it)."""
    floats = []  # (file, environment, labels, text outside this float)
    for path, text in sources.items():
        for match in _FLOAT.finditer(text):
            rest = {**sources, path: text[: match.start()] + text[match.end() :]}
            floats.append((path, match.group(1), _LABEL.findall(match.group(2)), rest))
    problems = []
    for path, environment, labels, rest in floats:
        name = Path(path).name
        if not labels:
            problems.append(Problem("unreferenced_float", name, f"a {environment} without a \\label"))
            continue
        referenced = {key.strip() for text in rest.values() for group in _REF.findall(text) for key in group.split(",")}
        if not referenced & set(labels):
            problems.append(
                Problem("unreferenced_float", f"{name}: {', '.join(labels)}", f"the {environment} is never referenced")
            )
    return problems


# --------------------------------------------------------------------------------------------------------------------
# The PDF


def _version(pdf: str | Path) -> tuple[str, int, int]:
    """What a file's parse is cached by: its path, modification time and size (a rebuilt PDF is parsed again)."""
    stat = Path(pdf).stat()
    return str(pdf), stat.st_mtime_ns, stat.st_size


def page_texts(pdf: str | Path) -> tuple[str, ...]:
    """The text of every page (pdftotext; pages end with a form feed), extracted once per version of the file in a
    process: the paper check's text and identifier checks both read it."""
    return _extracted_texts(*_version(pdf))


@functools.lru_cache(maxsize=2)
def _extracted_texts(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", path, "-"], capture_output=True, text=True, check=True)
    pages = out.stdout.split("\f")
    return tuple(pages[:-1] if pages and not pages[-1].strip() else pages)


_UNEXPANDED = re.compile(r"\?\?|\\[A-Za-z@]+|\bfwb[A-Z]\w*")


def text_problems(pages: Sequence[str]) -> list[Problem]:
    """``??`` (what LaTeX prints for an undefined reference) and macro names that were never expanded (a literal
    ``\\name``, or one of the study's macro names, ``fwb`` and a capital letter) in the PDF's text."""
    problems = []
    for number_, text in enumerate(pages, start=1):
        for match in _UNEXPANDED.finditer(text):
            start, end = max(0, match.start() - 40), match.end() + 40
            context = " ".join(text[start:end].split())
            what = "an undefined reference" if match.group() == "??" else "an unexpanded macro"
            problems.append(Problem("unexpanded", f"page {number_}", f"{what} '{match.group()}' in '{context}'"))
    return problems


@dataclass(frozen=True)
class SmallLine:
    page: int
    size: float
    text: str
    table: str | None


def pdf_pages(pdf: str | Path) -> tuple[Any, ...]:
    """Every page's layout (pdfminer's, with its default LAParams), parsed once per version of the file in a
    process: the small-text and caption checks both read it, and parsing was most of the paper check's time (about
    4 s of a 20-page paper on the Zen 3 VM, each time)."""
    return _parsed_pages(*_version(pdf))


@functools.lru_cache(maxsize=2)
def _parsed_pages(path: str, mtime_ns: int, size: int) -> tuple[Any, ...]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams

    return tuple(extract_pages(path, laparams=LAParams()))


def text_lines(layout: Any) -> Iterable[Any]:
    """The text lines of a pdfminer layout, not descending into figures (LTFigure: an embedded PDF or image, i.e.
    an \\includegraphics)."""
    from pdfminer.layout import LTFigure, LTTextLine

    for item in layout:
        if isinstance(item, LTFigure):
            continue
        if isinstance(item, LTTextLine):
            yield item
        elif hasattr(item, "__iter__"):
            yield from text_lines(item)


_CAPTION = re.compile(r"^TABLE\s+[IVXLC]+$")  # IEEEtran's table caption line: "TABLE IV"


def _same_column(caption: Any, line: Any, width: float) -> bool:
    """Whether a table's caption can head this line: a caption centred on the page heads a full-width table (either
    column), one centred in a column heads the lines of that column."""
    centre = (caption.x0 + caption.x1) / 2
    if abs(centre - width / 2) < width * 0.05:
        return True
    return (centre < width / 2) == ((line.x0 + line.x1) / 2 < width / 2)


def small_lines(pdf: str | Path, *, minimum_pt: float = MINIMUM_PT) -> list[SmallLine]:
    """The lines of the PDF's own text whose base size is below `minimum_pt`.

    The rule: every text line that LaTeX set (body, captions, tables, footnotes) has a base size, the size of its
    largest characters, measured in the PDF (pdfminer's character size: the font size times the text matrix, so a
    table shrunk by \\resizebox or adjustbox's max width shows its real printed size). That base size must be at
    least `minimum_pt`. Two kinds of text are exempt: (1) text inside figures (the PDF's form XObjects, i.e. an
    \\includegraphics of a matplotlib PDF: its fonts are the figure's own business, chosen when it is drawn), and
    (2) superscripts and subscripts, i.e. characters smaller than their line's base size whose baseline is raised
    or lowered (TeX sets them at the script size of their line: the table notes' markers $^w$, $^\\dagger$, an
    exponent), which are marks rather than text to read. A line that is small through and through, like a table in
    \\tiny, is caught. Each line is attributed to the table whose caption ("TABLE IV") is the nearest above it on
    its page and overlaps it horizontally, when there is one."""
    from pdfminer.layout import LTChar

    found = []
    for number_, page in enumerate(pdf_pages(pdf), start=1):
        lines = list(text_lines(page))
        captions = [line for line in lines if _CAPTION.match(line.get_text().strip())]
        for line in lines:
            chars = [c for c in line if isinstance(c, LTChar) and c.get_text().strip()]
            if not chars:
                continue
            base = max(c.size for c in chars)
            if base >= minimum_pt - 0.05:  # pdfminer's sizes carry rounding of the text matrix
                continue
            above = [c for c in captions if c.y0 >= line.y1 and _same_column(c, line, page.width)]
            table = " ".join(min(above, key=lambda c: c.y0).get_text().split()) if above else None
            found.append(SmallLine(number_, round(base, 2), " ".join(line.get_text().split()), table))
    return found


def small_text(pdf: str | Path, *, minimum_pt: float = MINIMUM_PT) -> list[Problem]:
    """Text set below `minimum_pt` (see `small_lines` for the rule), one problem per page and table, with its
    smallest size and an example line."""
    groups: dict[tuple[int, str | None], list[SmallLine]] = {}
    for line in small_lines(pdf, minimum_pt=minimum_pt):
        groups.setdefault((line.page, line.table), []).append(line)
    problems = []
    for (page, table), lines in groups.items():
        smallest = min(lines, key=lambda line: line.size)
        where = f"page {page}" + (f", {table}" if table else "")
        problems.append(
            Problem(
                "small_text",
                where,
                f"{len(lines)} line(s) below {minimum_pt:g} pt, the smallest {smallest.size:g} pt: "
                f"'{smallest.text[:80]}'",
            )
        )
    return problems


def page_count(pdf: str | Path) -> int:
    """The number of pages (pdfinfo)."""
    out = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^Pages:\s+(\d+)", out, flags=re.M)
    if not match:
        raise ValueError(f"{pdf}: pdfinfo reports no page count")
    return int(match.group(1))


def render_pages(pdf: str | Path, out_dir: str | Path, *, dpi: int = DPI) -> tuple[list[Path], list[Problem]]:
    """Every page as out_dir/page-N.png (pdftoppm, `dpi`; N from 1, not zero-padded), and a problem for each page
    that did not render or rendered blank (one colour). The folder is emptied first."""
    from PIL import Image

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    subprocess.run(["pdftoppm", "-r", str(dpi), "-png", str(pdf), str(out / "raw")], check=True, capture_output=True)
    for raw in out.glob("raw-*.png"):  # pdftoppm zero-pads to the page count's width
        raw.rename(out / f"page-{int(raw.stem.rsplit('-', 1)[1])}.png")
    images, problems = [], []
    for number_ in range(1, page_count(pdf) + 1):
        image = out / f"page-{number_}.png"
        if not image.is_file() or image.stat().st_size == 0:
            problems.append(Problem("page_not_rendered", f"page {number_}", f"pdftoppm wrote no {image.name}"))
            continue
        with Image.open(image) as png:
            low, high = png.convert("L").getextrema()
            if png.width == 0 or png.height == 0 or low == high:
                problems.append(Problem("blank_page", f"page {number_}", f"{image.name} is one colour"))
        images.append(image)
    return images, problems


# --------------------------------------------------------------------------------------------------------------------
# All of it


def check_paper(
    *,
    pdf: str | Path,
    log: str | Path,
    main_tex: str | Path,
    search_path: Sequence[str | Path],
    pages_dir: str | Path,
    tolerance_pt: float = TOLERANCE_PT,
    minimum_pt: float = MINIMUM_PT,
    dpi: int = DPI,
) -> dict[str, Any]:
    """Every check on a built paper: the LaTeX `log`, the sources (`main_tex` and what it \\input{}s, found on
    `search_path`) and the `pdf`, whose pages are rendered into `pages_dir`. Returns {"pdf", "pages", "images",
    "problems": [{"check", "where", "message"}, ...]} (problems empty when the paper is clean)."""
    problems = log_problems(Path(log).read_text(encoding="utf-8", errors="replace"), tolerance_pt=tolerance_pt)
    sources = read_sources(main_tex, search_path)
    problems += unreferenced_floats(sources)
    problems += stray_percents(main_tex, sources)
    problems += text_problems(page_texts(pdf))
    problems += small_text(pdf, minimum_pt=minimum_pt)
    images, rendering = render_pages(pdf, pages_dir, dpi=dpi)
    problems += rendering
    return {
        "pdf": str(pdf),
        "pages": page_count(pdf),
        "images": [str(image) for image in images],
        "tolerance_pt": tolerance_pt,
        "minimum_pt": minimum_pt,
        "problems": [asdict(problem) for problem in problems],
    }


class PaperCheckError(Exception):
    """The paper has problems; `terminal_message` names each (fwbench.workflow.logs.redirect_to shows it on the
    terminal)."""

    def __init__(self, report: Mapping[str, Any], log: str | Path | None = None):
        problems = [Problem(**p) for p in report["problems"]]
        lines = [f"paper_check: {report['pdf']} has {len(problems)} problem(s):"]
        lines += [f"  - {problem}" for problem in problems]
        if log:
            lines.append(f"  (the full report is in {log})")
        self.terminal_message = "\n".join(lines)
        super().__init__(self.terminal_message)
