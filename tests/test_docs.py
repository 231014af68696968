"""The README and docs/ as a reader meets them: the README fits 300 lines and opens with the two commands, every
relative link and anchor resolves, the docs index lists every page, the project has a LICENSE and a CITATION.cff,
and the README's result block is what benchmarks/readme_results.py makes of a study's tables.

Fast: reads files only; the result block is made from hand-built cell results (the skeleton of
tests/test_analysis.py), no workflow run."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
import yaml

import fwbench
from fwbench.analysis.inference.ratios import write_ratio_tables
from fwbench.analysis.inference.tidy import write_tidy
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.io import atomic_write_json
from tests.conftest import benchmark_script
from tests.test_mode_analysis import _cell as mode_analysis_cell
from tests.test_multi_framework_analysis import _training

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
# The two commands of the README's first section; .ci/run runs the second.
STUDY_COMMAND = (
    'bash setup.sh && .venv/bin/snakemake --cores all --resources gpu=1 && echo "$PWD/results/report/paper.pdf"'
)
TEST_COMMAND = "bash setup.sh && .venv/bin/python -m pytest"
MAX_README_LINES = 300


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), REPO / "config" / "README.md"]


# --- reading markdown as GitHub renders it --------------------------------------------------------------------------

FENCE = re.compile(r"^( {0,3})(```|~~~).*?^\1\2[^\n]*$", flags=re.S | re.M)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", flags=re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", flags=re.I)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", flags=re.M)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where a bracket is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    body = prose(text)
    return LINK.findall(body) + HTML_LINK.findall(body)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text (code spans, emphasis and link targets dropped) in lower
    case, every character that is not a letter, digit, space, hyphen or underscore removed, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis markers, not underscores inside words
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file, repeated headings numbered as GitHub numbers them (-1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for _, heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        out.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return out


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in links(path.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("//"):
            continue  # http:, https:, mailto:: not checked here
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        shown = f"{path.relative_to(REPO)}: {target}"
        if not resolved.exists():
            problems.append(f"{shown} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{shown} (no heading with that anchor in {resolved.relative_to(REPO)})")
    return problems


def first_section(text: str) -> str:
    """The README's text before its first second-level heading: what the first screen shows."""
    match = re.search(r"^## ", text, flags=re.M)
    return text[: match.start()] if match else text


def code_lines(text: str) -> list[str]:
    """The non-empty lines of the fenced code blocks in `text`."""
    lines = []
    for block in FENCE.finditer(text):
        body = block.group(0).splitlines()[1:-1]
        lines += [line.strip() for line in body if line.strip()]
    return lines


# --- the pages -------------------------------------------------------------------------------------------------


def test_the_readme_fits_300_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_the_first_section_holds_exactly_the_two_commands():
    assert code_lines(first_section(README.read_text())) == [STUDY_COMMAND, TEST_COMMAND]
    assert TEST_COMMAND in (REPO / ".ci" / "run").read_text(), ".ci/run runs the README's test command"


def test_the_first_section_says_what_has_run_on_a_gpu():
    first = first_section(README.read_text()).lower()
    assert "gpu" in first and "fake" in first, (
        "the first screen says that no GPU has run it and how GPU paths are tested"
    )


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    assert path.is_file()
    assert broken_links(path) == []


def test_the_docs_index_lists_every_page():
    index = DOCS / "README.md"
    listed = {Path(target.partition("#")[0]).name for target in links(index.read_text())}
    pages = {page.name for page in DOCS.glob("*.md")} - {"README.md"}
    assert pages - listed == set(), "pages docs/README.md does not list"
    for page in ("gpus.md", "slurm.md"):
        assert page in listed, f"the index lists {page}"


def test_the_readme_links_the_docs_index_and_each_topic_page():
    targets = {target.partition("#")[0] for target in links(README.read_text())}
    for page in (
        "docs/README.md",
        "docs/install.md",
        "docs/elsewhere.md",
        "docs/gpus.md",
        "docs/slurm.md",
        "config/README.md",
        "LICENSE",
        "CITATION.cff",
    ):
        assert page in targets, f"README.md links {page}"


def test_license_and_citation():
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert str(citation["version"]) == fwbench.__version__
    assert citation["license"] == "Apache-2.0"
    assert citation["title"] and citation["message"]
    assert citation["authors"] == [{"name": "fwbench contributors"}]


def test_the_link_checker_catches_what_it_should(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "# A page\n\n## Running on GPUs\n\n## `mode_scope` keys\n\n## Same\n\n## Same\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/page.md#running-on-gpus) [ok](docs/page.md#mode_scope-keys) [ok](docs/page.md#same-1)\n"
        "[ok](#top) [web](https://example.org/x) `[code](missing.md)`\n\n# Top\n\n"
        "```\n[in a block](missing.md)\n```\n"
        '[gone](docs/missing.md) [anchor](docs/page.md#running-on-a-gpu) <img src="docs/none.png">\n'
    )
    assert [problem.split(" (")[0] for problem in broken_links(readme)] == [
        "README.md: docs/missing.md",
        "README.md: docs/page.md#running-on-a-gpu",
        "README.md: docs/none.png",
    ]


# --- the README's result block -------------------------------------------------------------------------------------


def _load_script():
    return benchmark_script("readme_results")


# Per-round factors over eager PyTorch (tests.test_mode_analysis builds the cells). small_cnn: PyTorch compiled in
# both batch sizes (2x eager at batch 1), JAX 1.5x eager (0.75x compiled: resolved), TensorFlow failed at batch 8.
# resnet50: eager PyTorch only, so its ratios stand against eager PyTorch; JAX's rounds scatter around PyTorch's (not
# resolved).
FACTORS = {
    ("torch", "compile", "small_cnn", 1): [2.0, 2.1, 1.9],
    ("torch", "compile", "small_cnn", 8): [1.2, 1.25, 1.15],
    ("jax", "jit", "small_cnn", 1): [1.5, 1.55, 1.45],
    ("jax", "jit", "small_cnn", 8): [0.5, 0.52, 0.49],
    ("tensorflow", "xla", "small_cnn", 1): [0.5, 0.49, 0.51],
    ("jax", "jit", "resnet50", 1): [1.3, 0.8, 1.05],
    ("tensorflow", "xla", "resnet50", 1): [0.9, 0.88, 0.91],
}
STARTED = datetime(2026, 11, 25, 9, 30, tzinfo=UTC).timestamp()


def _cell(framework: str, mode: str, model: str, batch: int) -> dict:
    return mode_analysis_cell(framework, mode, batch, model, factors=FACTORS)


@pytest.fixture
def study(tmp_path):
    """A results folder with the tables a study writes: small_cnn at batch 1 and 8 in PyTorch eager and compiled,
    JAX and TensorFlow (which failed at batch 8); resnet50 at batch 1 without compiled PyTorch; the small CNN
    trained in each framework; the study's time summary and the paper's LaTeX timing."""
    results = tmp_path / "results"
    cells = [
        _cell(framework, mode, "small_cnn", batch)
        for batch in (1, 8)
        for framework, mode in (("torch", "eager"), ("torch", "compile"), ("jax", "jit"), ("tensorflow", "xla"))
    ]
    cells += [_cell(f, m, "resnet50", 1) for f, m in (("torch", "eager"), ("jax", "jit"), ("tensorflow", "xla"))]
    paths = []
    for index, result in enumerate(cells):
        paths.append(results / "cells" / f"cell{index}.json")
        atomic_write_json(paths[-1], result)
    tables = results / "tables"
    write_tidy(paths, tables / "inference.csv")
    write_ratio_tables(paths, tables / "speedups.csv", tables / "mode_gains.csv")
    training = []
    for index, framework in enumerate(("torch", "jax", "tensorflow")):
        training.append(results / "cells" / f"training{index}.json")
        atomic_write_json(training[-1], _training(framework))
    write_training_tables(training, tables / "training.csv", tables / "training_step0.csv")
    atomic_write_json(tables / "study_time.json", {"started_at": STARTED, "wall_s": 790.0, "runs": 1})
    (results / "report" / "build").mkdir(parents=True)
    (results / "report" / "build" / "latex_time.tex").write_text(
        "\\newcommand{\\fwbLatexSeconds}{12.0}\n\\newcommand{\\fwbStudyWallToPdfSeconds}{802}\n"
    )
    return results


def _rows(block: str) -> dict[tuple[str, str], list[str]]:
    """(model, batch) -> the cells of the block's table rows."""
    rows = {}
    for line in block.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("model", "---") and not cells[0].startswith("---"):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_the_result_block_is_made_from_the_study_tables(study):
    script = _load_script()
    made = script.blocks(study)
    block = made["results"]
    ratios = pd.read_csv(study / "tables" / "speedups.csv")
    header = next(line for line in block.splitlines() if line.startswith("| model"))
    assert header == (
        "| model | batch | PyTorch img/s | JAX / PyTorch [95% CI] | TensorFlow / PyTorch [95% CI] "
        "| PyTorch compiled / eager [95% CI] |"
    )
    rows = _rows(block)
    assert list(rows) == [("resnet50", "1"), ("small_cnn", "1"), ("small_cnn", "8")]

    assert set(ratios["multiplicity"]) == {"holm"}

    def expected(framework, model, batch):
        row = ratios[(ratios.numerator == framework) & (ratios.model == model) & (ratios.batch_size == batch)].iloc[0]
        text = f"{row.ratio:.2f} [{row.ci_low:.2f}, {row.ci_high:.2f}]"
        return f"**{text}**" if row.resolved_adjusted else text

    # resnet50: eager PyTorch only, so both ratios stand against it and say so; no gain without a compiled cell
    assert rows[("resnet50", "1")] == [
        "103 (eager)",
        expected("jax", "resnet50", 1) + " vs eager",
        expected("tensorflow", "resnet50", 1) + " vs eager",
        "—",
    ]
    assert not rows[("resnet50", "1")][1].startswith("**"), "JAX's scattered rounds are not resolved"
    # small_cnn: against compiled PyTorch, whose throughput the row shows; TensorFlow failed at batch 8
    batch1, batch8 = rows[("small_cnn", "1")], rows[("small_cnn", "8")]
    assert batch1[0] == "205 (compiled)" and batch8[0] == "487 (compiled)"
    assert batch1[1] == expected("jax", "small_cnn", 1) == "**0.75 [0.72, 0.78]**"
    assert batch1[2] == expected("tensorflow", "small_cnn", 1)
    assert batch8[1] == expected("jax", "small_cnn", 8) and batch8[1].startswith("**0.4")
    assert batch8[2] == "failed"
    assert batch1[3].startswith("**2.00 [") and batch8[3].startswith("**1.20 [")

    first = block.splitlines()[0]
    assert first.startswith(
        "Measured 2026-11-25 at commit `abc` on Test CPU (CPU only, 2 threads per cell); fp32 at 32 px"
    )
    assert "study wall time 13 min 22 s from the first job to the PDF" in first
    assert "4 of 5 ratios resolved; 1 of 11 inference cells failed" in block
    assert "**Bold**: resolved after Holm's adjustment within each framework pair." in block
    assert '"vs eager": the study has no compiled PyTorch cell' in block
    assert "Training, last epoch: small_cnn (batch 32, 2 epochs): PyTorch 500 img/s, top-1 60%; JAX 500" in block

    # the summary is the paper's abstract in Markdown (tests/test_abstract.py), then when, where and how long
    findings, measured = made["summary"].split("\n\n")
    assert findings.startswith("Against PyTorch, JAX was slower on two of three CNN comparisons and unresolved on one")
    assert "PyTorch was compiled for the small CNN, eager otherwise." in findings
    assert "Of 11 cells, 1 failed; the others ran in FP32 on a Test CPU (2 threads per process)." in findings
    assert measured == "Measured 2026-11-25 at commit `abc`; study wall time 13 min 22 s from the first job to the PDF."


def test_the_result_block_replaces_the_marked_text_only(study, tmp_path, capsys):
    script = _load_script()
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n<!-- summary:begin -->\nold summary\n<!-- summary:end -->\n\nText.\n\n"
        "<!-- results:begin -->\nold table\n<!-- results:end -->\n\nAfter.\n"
    )
    assert script.main([str(study), "--write", str(readme)]) == 0
    text = readme.read_text()
    assert "old summary" not in text and "old table" not in text
    assert text.startswith("# Title\n\n<!-- summary:begin -->\nAgainst PyTorch, JAX was slower")
    assert "\n<!-- summary:end -->\n\nText.\n\n<!-- results:begin -->\nMeasured 2026-11-25" in text
    assert text.endswith("<!-- results:end -->\n\nAfter.\n")
    assert script.main([str(study), "--write", str(readme)]) == 0
    assert readme.read_text() == text, "a second write changes nothing"
    printed = capsys.readouterr().out
    assert "| small_cnn | 1 | 205 (compiled) |" in printed

    readme.write_text("# No markers\n")
    with pytest.raises(SystemExit, match="results:begin"):
        script.main([str(study), "--write", str(readme)])


def test_the_result_block_bolds_the_adjusted_verdicts(study):
    """A ratio whose own interval excludes 1 but whose adjusted test does not is not bold, and the counts say so."""
    script = _load_script()
    before = script.blocks(study)["results"]
    path = study / "tables" / "speedups.csv"
    ratios = pd.read_csv(path)
    ratios.loc[ratios.index[ratios["resolved_adjusted"]][0], "resolved_adjusted"] = False
    ratios.to_csv(path, index=False)
    made = script.blocks(study)
    assert before.count("**") - made["results"].count("**") == 2, "one ratio fewer in bold"
    assert "3 of 5 ratios resolved (1 more excludes 1 by its own CI only)" in made["results"]
    assert "TensorFlow was slower on one of two CNN comparisons and unresolved on one" in made["summary"]


def test_the_readme_result_block_names_its_date_commit_and_machine():
    text = README.read_text()
    for name in ("summary", "results"):
        match = re.search(rf"<!-- {name}:begin -->\n(.*?)\n<!-- {name}:end -->", text, flags=re.S)
        assert match, f"README.md has the {name} markers"
        block = match.group(1)
        assert re.search(r"^Measured \d{4}-\d{2}-\d{2} at commits? `[0-9a-f]{7}`", block, flags=re.M), (
            "its date and commit"
        )
        assert re.search(r" on .+ \(CPU only|\(host CPU | on (an? .+ CPU|one .+ GPU)\b", block), "the machine it ran on"
        assert re.search(r"[Ss]tudy wall time:? \d+ min \d\d s", block), "the study's wall time"


def test_a_restored_run_reports_the_time_where_it_was_measured(study):
    """A study measured on a GPU host and written up here: its wall time is the archive's, kept by the restore
    (results/restored-from.json), not the time from the host's first job to this machine's PDF."""
    script = _load_script()
    results = study
    atomic_write_json(
        results / "restored-from.json",
        {"archive": "gone.tar.xz", "restored_at": "2026-11-27T21:58:11+00:00", "measured_time": {"wall_s": 665.7}},
    )
    _, wall = script.when_and_how_long(results, None)
    assert wall == (
        "11 min 06 s from the first job to the last table on the machine that measured it (its paper written "
        "elsewhere, from its archive)"
    )
    atomic_write_json(results / "restored-from.json", {"archive": "gone.tar.xz", "restored_at": "x"})
    assert script.when_and_how_long(results, None)[1] == "not recorded where it was measured (restored from an archive)"
