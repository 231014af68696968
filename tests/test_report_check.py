"""fwbench.workflow.report_check in a real headless Chromium, on the report of a two-rule Snakemake workflow (seconds):
a clean report passes, and each kind of problem (a JavaScript exception, a console error, a failed load, a figure that
does not decode, an entry or category missing, an entry without description, a page that never renders) is reported."""

from __future__ import annotations

import base64
import os
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from fwbench.workflow.report_check import ReportCheckError, check_report

SNAKEFILE = """
rule all:
    input:
        "out/figure.png",
        "out/table.csv",


rule figure:
    input:
        "figure-source.png",
    output:
        report("out/figure.png", caption="figure.rst", category="Figures", subcategory="Plots"),
    shell:
        "cp {input} {output}"


rule table:
    output:
        report("out/table.csv", caption="table.rst", category="Tables"),
    shell:
        "printf 'a,b\\n1,2\\n' > {output}"
"""
FIGURE_CAPTION = "A figure made for the tests of the checker."
EXPECTED = {"Figures": ["figure.png"], "Tables": ["table.csv"]}


def _png(width: int = 40, height: int = 30) -> bytes:
    """A valid RGB PNG: a horizontal gradient."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"".join(bytes((x * 6 % 256, 80, 160)) for x in range(width)) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def reports(tmp_path_factory, venv_bin) -> dict[str, Path]:
    """The workflow run once, and its report as .html and as .zip."""
    root = tmp_path_factory.mktemp("report-check")
    (root / "Snakefile").write_text(SNAKEFILE)
    (root / "figure.rst").write_text(FIGURE_CAPTION + "\n")
    (root / "table.rst").write_text("A two-line table.\n")
    (root / "figure-source.png").write_bytes(_png())
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    for args in (["--cores", "1"], ["--report", "report.html"], ["--report", "report.zip"]):
        proc = subprocess.run(
            [str(venv_bin / "snakemake"), *args], cwd=root, capture_output=True, text=True, timeout=300, env=env
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {"html": root / "report.html", "zip": root / "report.zip"}


def _edited(reports, tmp_path, old: str, new: str) -> Path:
    html = reports["html"].read_text()
    assert old in html
    path = tmp_path / "report.html"
    path.write_text(html.replace(old, new))
    return path


def _before_body_end(reports, tmp_path, markup: str) -> Path:
    """The report with `markup` added at the end of its body (the last "</body>": the embedded libraries hold one)."""
    html = reports["html"].read_text()
    end = html.rindex("</body>")
    path = tmp_path / "report.html"
    path.write_text(html[:end] + markup + "\n" + html[end:])
    return path


def test_a_clean_report_passes_with_its_entries_and_a_screenshot(reports, tmp_path):
    shot = tmp_path / "shots" / "report.png"
    check = check_report(reports["html"], EXPECTED, screenshot=shot)
    assert check.ok, check.summary()
    assert check.entries == {"Figures": {"Plots": ["out/figure.png"]}, "Tables": {"Other": ["out/table.csv"]}}
    assert check.figures == ["Figures: out/figure.png"]
    assert check.screenshot == shot and shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 5_000


def test_the_zip_form_is_checked_too(reports):
    check = check_report(reports["zip"], EXPECTED)
    assert check.ok, check.summary()
    assert check.report == reports["zip"] and check.figures == ["Figures: out/figure.png"]


def test_a_javascript_exception_is_reported(reports, tmp_path):
    page = _before_body_end(reports, tmp_path, '<script>throw new Error("fwbench-test-exception")</script>')
    check = check_report(page, EXPECTED)
    assert not check.ok and any("fwbench-test-exception" in e for e in check.errors), check.summary()
    assert not check.missing, "the rest of the page is still checked"


def test_a_console_error_is_reported(reports, tmp_path):
    page = _before_body_end(reports, tmp_path, '<script>console.error("fwbench-test-console")</script>')
    check = check_report(page, EXPECTED)
    assert not check.ok and any("fwbench-test-console" in e for e in check.errors), check.summary()


def test_a_resource_that_fails_to_load_is_reported(reports, tmp_path):
    page = _before_body_end(reports, tmp_path, '<img src="fwbench-no-such-file.png">')
    check = check_report(page, EXPECTED)
    assert not check.ok and any("fwbench-no-such-file.png" in e for e in check.errors), check.summary()


def test_a_figure_that_does_not_decode_is_reported(reports, tmp_path):
    figure = base64.b64encode(_png()).decode()
    page = _edited(reports, tmp_path, figure, base64.b64encode(b"not a PNG at all").decode())
    check = check_report(page, EXPECTED)
    assert not check.ok and check.figures == []
    assert any("Figures: out/figure.png" in e and "did not load" in e for e in check.errors), check.summary()


def test_missing_entries_and_categories_are_reported(reports):
    check = check_report(reports["html"], {"Figures": ["figure.png", "absent.png"], "Nowhere": ["table.csv"]})
    assert not check.ok and not check.errors
    assert check.missing == ["Figures: absent.png", "Nowhere: table.csv"]


def test_an_entry_without_description_is_reported(reports, tmp_path):
    page = _edited(reports, tmp_path, FIGURE_CAPTION, "")
    check = check_report(page, EXPECTED)
    assert not check.ok and check.uncaptioned == ["Figures: out/figure.png"], check.summary()


def test_a_page_that_never_renders_is_reported(tmp_path):
    page = tmp_path / "blank.html"
    page.write_text("<!doctype html><html><body><div id='app'></div><p>no report here</p></body></html>")
    check = check_report(page, EXPECTED, timeout_s=3)
    assert not check.ok and any("did not render" in e for e in check.errors)
    assert check.missing == ["Figures: figure.png", "Tables: table.csv"] and check.entries == {}


def test_no_browser_no_file_or_no_page_is_an_error_not_a_result(tmp_path, monkeypatch):
    """What stops the check before a browser starts (this module's fast test: no report is built, no browser runs)."""
    import zipfile

    with pytest.raises(ReportCheckError, match="no report at .*absent.html"):
        check_report(tmp_path / "absent.html")
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("report/other.html", "<html></html>")
    with pytest.raises(ReportCheckError, match=r"empty.zip holds no \*/report.html"):
        check_report(empty)
    page = tmp_path / "report.html"
    page.write_text("<!doctype html><html></html>")
    monkeypatch.setenv("FWBENCH_CHROMIUM", str(tmp_path / "no-chromium"))
    with pytest.raises(ReportCheckError, match="FWBENCH_CHROMIUM=.*no-chromium is not an executable file"):
        check_report(page)
