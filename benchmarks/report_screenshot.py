"""Checks a study's HTML report in headless Chromium and saves the screenshot the README shows.

    .venv/bin/snakemake --report results/report/report.html
    .venv/bin/python benchmarks/report_screenshot.py results/report/report.html docs/figures/report.png

It opens the report as a reader would (fwbench.workflow.report_check): the page must load without JavaScript errors or
failed loads, every category must list its entries with a description, every figure must decode, and the entries named
by --expect (by default the paper and the inference figure, which every study has) must be listed. The screenshot
shows the figure named by --show beside its description. Prints what the page lists; exits 1 if anything is wrong
(the screenshot is still written).
"""

from __future__ import annotations

import argparse
import sys

from fwbench.workflow.report_check import ReportCheckError, check_report

DEFAULT_EXPECTED = ("Paper=paper.pdf", "Inference=inference_throughput.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="the report: .html, or the .zip of `snakemake --report report.zip`")
    parser.add_argument("screenshot", help="where to save the PNG screenshot")
    parser.add_argument(
        "--expect",
        action="append",
        metavar="CATEGORY=NAME",
        help=f"an entry the category must list (repeatable; default: {' '.join(DEFAULT_EXPECTED)})",
    )
    parser.add_argument("--show", default="inference_throughput.png", help="the figure in the screenshot")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each step in the browser")
    args = parser.parse_args(argv)

    expected: dict[str, list[str]] = {}
    for item in args.expect or DEFAULT_EXPECTED:
        category, sep, name = item.partition("=")
        if not sep or not category or not name:
            parser.error(f"--expect {item!r}: expected CATEGORY=NAME")
        expected.setdefault(category, []).append(name)
    try:
        check = check_report(args.report, expected, screenshot=args.screenshot, show=args.show, timeout_s=args.timeout)
    except ReportCheckError as error:
        print(f"report_screenshot: {error}", file=sys.stderr)
        return 2
    print(check.summary())
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
