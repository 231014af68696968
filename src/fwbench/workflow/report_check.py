"""Opens a Snakemake HTML report (`snakemake --report report.html`, or the `.zip` form) in a real headless browser and
checks it the way a reader would use it.

Snakemake's report is a React app whose results are data embedded in the page: nothing is listed until the app has
run and a category is clicked. So the check drives Debian's Chromium through Playwright: it loads the page, collects
what went wrong in it (uncaught JavaScript exceptions, console errors, resources that failed to load), clicks every
category and subcategory of the results menu and reads the entries the page then lists, opens every figure (it must
decode) and every entry's description (it must not be empty), compares the entries with those expected, and saves a
screenshot of one figure shown beside its description.

`check_report` returns what it found (`ReportCheck`); `ReportCheck.ok` is true only without errors, missing entries
and entries without a description. The browser is `$FWBENCH_CHROMIUM`, else `chromium` on the PATH (setup.sh installs
Debian's); Playwright never downloads one here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Debian's package names the browser `chromium`; other distributions' names follow.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VIEWPORT = {"width": 1600, "height": 1000}
# The report loads Tailwind's in-browser build, which warns on every load that it is not meant for production: a
# console warning, kept in `warnings`, never an error. Chromium's own PDF viewer, which shows the paper in the page,
# loads its parts from these schemes, and closing the paper while it is still loading aborts them: the browser's
# business, kept in `warnings` too.
BROWSER_INTERNAL = ("chrome://", "chrome-extension://", "chrome-untrusted://", "devtools://")

# Where things are in the report's page (Snakemake 9's report app): the navbar is the first <nav> (its breadcrumbs
# are a second one inside it), the menu or list it shows is its div.p-3, a list's entries are table rows whose first
# cell names the entry and whose last cell holds its two buttons (view, then description); what a view button opens
# is shown in the last div beside the navbar.
NAVBAR = "#app nav >> nth=0"
PANEL = "div.p-3"
ROWS = "div.p-3 table tbody tr"
CONTENT = "#app > div > div"


class ReportCheckError(RuntimeError):
    """The check could not run at all (no browser, no report file); a report with problems is a ReportCheck."""


@dataclass
class ReportCheck:
    report: Path
    # category -> subcategory -> the entries the page lists there (the first column of each row: the file's path)
    entries: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # JS exceptions, console errors, failed loads, broken figures
    missing: list[str] = field(default_factory=list)  # "category: name" expected but not listed
    uncaptioned: list[str] = field(default_factory=list)  # entries whose description is empty
    warnings: list[str] = field(default_factory=list)  # console warnings (not failures)
    figures: list[str] = field(default_factory=list)  # entries opened as images that decoded
    screenshot: Path | None = None

    @property
    def ok(self) -> bool:
        return not (self.errors or self.missing or self.uncaptioned)

    def summary(self) -> str:
        lines = [f"{self.report}: {'ok' if self.ok else 'PROBLEMS'}"]
        for category, subcategories in self.entries.items():
            for subcategory, names in subcategories.items():
                lines.append(f"  {category} / {subcategory}: {', '.join(names)}")
        lines += [f"  error: {e}" for e in self.errors]
        lines += [f"  missing: {m}" for m in self.missing]
        lines += [f"  no description: {u}" for u in self.uncaptioned]
        if self.screenshot:
            lines.append(f"  screenshot: {self.screenshot}")
        return "\n".join(lines)


def find_chromium() -> str:
    """The Chromium executable: $FWBENCH_CHROMIUM, else the first of CHROMIUM_NAMES on the PATH."""
    explicit = os.environ.get("FWBENCH_CHROMIUM")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ReportCheckError(f"FWBENCH_CHROMIUM={explicit} is not an executable file")
        return explicit
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ReportCheckError(
        "no Chromium found (looked for $FWBENCH_CHROMIUM and " + ", ".join(CHROMIUM_NAMES) + " on the PATH): "
        "`bash setup.sh` installs Debian's (`apt-get install chromium`)"
    )


def _matches(entry: str, name: str) -> bool:
    return entry == name or entry.endswith("/" + name)


def check_report(
    report: str | os.PathLike,
    expected: Mapping[str, Iterable[str]] | None = None,
    screenshot: str | os.PathLike | None = None,
    show: str | None = None,
    timeout_s: float = 60.0,
) -> ReportCheck:
    """Check the report at `report` (.html, or the .zip Snakemake writes with `--report x.zip`).

    expected: category -> names that must be among the entries the page lists in that category (an entry is the
    first column of its row, the file's path unless the report gives labels; a name matches the path or its end after
    a "/"). screenshot: where to save a PNG of the page showing the figure `show` (an entry name; default: the first
    figure listed) beside its description. Raises ReportCheckError only when no check could run (no browser, no
    file); whatever the page gets wrong is in the result."""
    path = Path(report)
    if not path.is_file():
        raise ReportCheckError(f"no report at {path}")
    if path.suffix == ".zip":
        with tempfile.TemporaryDirectory() as unpacked:
            with zipfile.ZipFile(path) as archive:
                archive.extractall(unpacked)
            pages = sorted(Path(unpacked).glob("*/report.html"))
            if not pages:
                raise ReportCheckError(f"{path} holds no */report.html")
            result = _check_page(pages[0], expected or {}, screenshot, show, timeout_s)
        result.report = path
        return result
    return _check_page(path, expected or {}, screenshot, show, timeout_s)


def _check_page(page_path: Path, expected, screenshot, show, timeout_s) -> ReportCheck:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    result = ReportCheck(report=page_path)
    executable = find_chromium()
    with sync_playwright() as playwright:
        try:
            # Playwright starts it without its sandbox (chromium_sandbox=False): runs as root too.
            browser = playwright.chromium.launch(
                executable_path=executable, headless=True, args=["--disable-dev-shm-usage"]
            )
        except PlaywrightError as error:
            raise ReportCheckError(f"{executable} did not start headless: {error}") from error
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(timeout_s * 1000)
            _listen(page, result)
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            try:
                page.wait_for_selector(NAVBAR, timeout=timeout_s * 1000)
            except PlaywrightError:
                result.errors.append("the report's app did not render (no navigation bar after loading)")
                _compare(result, expected)  # nothing listed: every expected entry is missing
                return result
            try:
                _walk(page, result)
            except PlaywrightError as error:  # a menu, list or view that never came: the app broke on the way
                result.errors.append(f"clicking through the report: {str(error).splitlines()[0]}")
            _compare(result, expected)
            if screenshot is not None and result.figures:
                try:
                    _screenshot(page, result, Path(screenshot), show)
                except PlaywrightError as error:
                    result.errors.append(f"screenshot: {str(error).splitlines()[0]}")
            elif screenshot is not None:
                result.errors.append("screenshot: no figure could be shown")
        finally:
            browser.close()
    return result


def _browser_internal(url: str) -> bool:
    return url.startswith(BROWSER_INTERNAL)


def _listen(page, result: ReportCheck) -> None:
    """Collect what goes wrong in the page; what the browser's own viewers do (see BROWSER_INTERNAL) is a warning."""

    def page_error(error):
        text = f"uncaught exception: {error}"
        internal = any(scheme in (error.stack or "") for scheme in BROWSER_INTERNAL)
        (result.warnings if internal else result.errors).append(text)

    def console(message):
        text = f"console {message.type}: {message.text}"
        if message.type == "error" and not _browser_internal(message.location.get("url") or ""):
            result.errors.append(text)
        elif message.type in ("error", "warning"):
            result.warnings.append(text)

    def failed(request):
        text = f"failed to load {request.url[:200]}: {request.failure}"
        (result.warnings if _browser_internal(request.url) else result.errors).append(text)

    def response(answer):
        if answer.status >= 400:
            result.errors.append(f"HTTP {answer.status} for {answer.url[:200]}")

    page.on("pageerror", page_error)
    page.on("console", console)
    page.on("requestfailed", failed)
    page.on("response", response)


def _categories(page) -> dict[str, list[str]]:
    """The categories and subcategories the report holds (its embedded data), in the order its menu sorts them."""
    return page.evaluate(
        """() => Object.fromEntries(Object.keys(categories).sort((a, b) => a.localeCompare(b)).map(
            c => [c, Object.keys(categories[c]).sort((a, b) => a.localeCompare(b))]))"""
    )


def _open(page, category: str, subcategory: str, single_category: bool, single_subcategory: bool):
    """From anywhere, the list of one subcategory, clicked as a reader would: home, category, subcategory (the app
    skips the category's own menu when it has one subcategory, and names a report's only category "Results")."""
    navbar = page.locator(NAVBAR)
    navbar.locator("ol li a").first.click()  # the home breadcrumb
    navbar.locator(PANEL).get_by_role("link", name="Results" if single_category else category, exact=True).click()
    if not single_subcategory:
        navbar.locator(PANEL).get_by_role("link", name=subcategory, exact=True).click()
    navbar.locator(ROWS).first.wait_for()
    return navbar.locator(ROWS)


def _walk(page, result: ReportCheck) -> None:
    layout = _categories(page)
    if not layout:
        result.errors.append("the report lists no results")
        return
    navbar = page.locator(NAVBAR)
    for category, subcategories in layout.items():
        for subcategory in subcategories:
            where = (category, subcategory, len(layout) == 1, len(subcategories) == 1)
            rows = _open(page, *where)
            names = rows.evaluate_all("rows => rows.map(r => r.querySelector('td').innerText.trim())")
            result.entries.setdefault(category, {})[subcategory] = names
            for index, name in enumerate(names):
                if index:
                    rows = _open(page, *where)
                buttons = rows.nth(index).locator("td").last.locator("a")
                # The app shows figures, PDFs and HTML itself (a "#" link); any other file is a download link.
                if buttons.first.get_attribute("href") == "#":
                    buttons.first.click()
                    _check_shown(page, result, f"{category}: {name}")
                buttons.last.click()
                navbar.get_by_text("Snakemake rule", exact=True).wait_for()  # the description view is up
                caption = navbar.locator("li.prose")
                if caption.count() == 0 or not caption.first.inner_text().strip():
                    result.uncaptioned.append(f"{category}: {name}")


def _check_shown(page, result: ReportCheck, label: str) -> None:
    """What an entry's eye button opened: a figure must decode; a PDF or HTML page must get its frame."""
    content = page.locator(CONTENT).last
    content.locator("img, iframe").first.wait_for()
    shown = content.locator("img, iframe").first.evaluate(
        """async node => {
            if (node.tagName === 'IFRAME') return {kind: 'frame', ok: !!node.getAttribute('src')};
            try { await node.decode(); } catch (e) {}
            return {kind: 'figure', ok: node.complete && node.naturalWidth > 0};
        }"""
    )
    if not shown["ok"]:
        result.errors.append(f"{label}: the {shown['kind']} did not load")
    elif shown["kind"] == "figure":
        result.figures.append(label)


def _compare(result: ReportCheck, expected: Mapping[str, Iterable[str]]) -> None:
    for category, names in expected.items():
        listed = [entry for entries in result.entries.get(category, {}).values() for entry in entries]
        for name in names:
            if not any(_matches(entry, name) for entry in listed):
                result.missing.append(f"{category}: {name}")


def _screenshot(page, result: ReportCheck, out: Path, show: str | None) -> None:
    target = None
    for category, subcategories in result.entries.items():
        for subcategory, names in subcategories.items():
            for index, name in enumerate(names):
                figure = f"{category}: {name}" in result.figures
                if target is None and figure and (show is None or _matches(name, show)):
                    target = (category, subcategory, index)
    if target is None:
        result.errors.append(f"screenshot: no figure {show!r} listed" if show else "screenshot: no figure listed")
        return
    category, subcategory, index = target
    layout = _categories(page)
    buttons = _open(page, category, subcategory, len(layout) == 1, len(layout[category]) == 1).nth(index).locator("a")
    buttons.first.click()  # the figure
    buttons.last.click()  # its description beside it
    page.locator(NAVBAR).locator("li.prose").first.wait_for()
    page.locator(CONTENT).last.locator("img").first.wait_for()
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out))
    result.screenshot = out
