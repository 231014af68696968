"""Every float the analysis writes has a caption of at most three lines that says what the reader sees
(fwbench.analysis.common.latex.CAPTION_CHARS of rendered text for its environment), and a note under it, inside
the same float, that explains every mark its table carries: issue 56's rule, which the paper check
(fwbench.analysis.paper.structure_check) holds the PDF to, checked here on each section built from the small fake
frames the sections' own tests use. No subprocess, no LaTeX."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from fwbench.analysis.common.latex import CAPTION_CHARS, figure_float, float_note, table_float
from fwbench.analysis.failures.report import failures_table
from fwbench.analysis.fairness import ledger as lg
from fwbench.analysis.inference.ratios import write_speedups
from fwbench.analysis.inference.tables import inference_table, ratios_table
from fwbench.analysis.inference.tidy import read_tidy, write_tidy
from fwbench.analysis.micro import analysis as micro_analysis
from fwbench.analysis.paper.failures import failure_summary
from fwbench.analysis.paper.micro_section import micro_section
from fwbench.analysis.paper.profile_section import profile_section
from fwbench.analysis.paper.published_section import published_section
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.profile.tables import op_profile_table
from fwbench.analysis.published.matching import compare
from fwbench.analysis.published.sources import read_sources
from fwbench.analysis.time import study_time
from fwbench.analysis.training.epochs import write_training_tables
from fwbench.analysis.training.reference import read_published
from tests import test_deviations, test_ledger, test_micro_analysis, test_profile_analysis, test_published
from tests.conftest import REPO
from tests.test_multi_framework_analysis import PUBLISHED, THREE, _inference, _training_results, _write
from tests.test_study_time import _job, _processes

SOURCES = REPO / "reference" / "sources.yaml"

_FLOAT = re.compile(r"\\begin\{(table\*?|figure\*?)\}(.*?)\\end\{\1\}", re.S)
_NOTE = r"\par\smallskip\parbox{\linewidth}"
# What a command prints, where the caption's length depends on it: a \ref its number (a Roman or Arabic numeral of
# about three characters), a symbol one character; any other command prints its argument, or nothing.
_PRINTS = {"ref": "III", "times": "x", "le": "<", "dagger": "+", "ddagger": "+", "ast": "*", "S": "S", "Delta": "D"}
# A mark set as a superscript in a table: $^{a}$, $^a$, $^\dagger$, $^{\S}$.
_MARK = re.compile(r"\$\^(\{\\?[A-Za-z]+\}|\\[A-Za-z]+|[A-Za-z])\$")


def _argument(text: str, start: int) -> tuple[str, int]:
    """The brace-balanced argument that opens at text[start] ("{"), and the index after it."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0) if text[index - 1] != "\\" else 0
        if depth == 0:
            return text[start + 1 : index], index + 1
    raise ValueError(f"unbalanced braces after {text[start : start + 40]!r}")


def _caption(body: str) -> str:
    start = body.index(r"\caption{") + len(r"\caption")
    return _argument(body, start)[0]


def rendered(latex: str) -> str:
    """The text a piece of LaTeX prints, closely enough to count its characters: a \\ref as a three-character
    number, a symbol as one character, a macro of the paper's (\\fwbNum...{}) as two digits, every other command
    by its argument; escapes as the character they print, ~ as a space, math as its letters."""
    text = re.sub(r"\\ref\{[^}]*\}", _PRINTS["ref"], latex)
    text = re.sub(r"\\fwb[A-Za-z]+(\{\})?", "00", text)
    text = re.sub(r"\\([%&_#$])", r"\1", text)
    text = text.replace("~", " ").replace("--", "-").replace("``", '"').replace("''", '"')
    text = re.sub(r"\\([A-Za-z]+)\*?", lambda m: _PRINTS.get(m.group(1), ""), text)
    text = re.sub(r"[{}$^]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def floats(text: str) -> list[tuple[str, str]]:
    """(environment, body) of every table and figure in `text`."""
    return [(match.group(1), match.group(2)) for match in _FLOAT.finditer(text)]


def _label(body: str) -> str:
    found = re.search(r"\\label\{([^}]+)\}", body)
    return found.group(1) if found else "(no label)"


def _marks(latex: str) -> set[str]:
    """The superscript marks in `latex`, each as its letter or command ($^{a}$ and $^a$ alike: "a")."""
    return {mark.strip("{}").lstrip("\\") for mark in _MARK.findall(latex)}


def caption_problems(text: str) -> list[str]:
    """Every float of `text` whose caption is longer than three lines at its width, or whose table carries a mark
    that its note does not explain."""
    problems = []
    for environment, body in floats(text):
        name, caption = _label(body), _caption(body)
        budget = CAPTION_CHARS[environment]
        if len(rendered(caption)) > budget:
            problems.append(f"{name}: a caption of {len(rendered(caption))} characters, over {budget}")
        table, _, note = body.partition(_NOTE)
        unexplained = _marks(table.replace(caption, "")) - _marks(note)
        if unexplained:
            problems.append(f"{name}: marks {sorted(unexplained)} with no word in the note")
    return problems


def _assert_short(text: str, labels: set[str]) -> None:
    found = {_label(body) for _, body in floats(text)}
    assert labels <= found, f"expected {sorted(labels - found)} among the floats"
    assert caption_problems(text) == []


# --------------------------------------------------------------------------------------------------------------------
# The check itself


def test_the_rendered_text_counts_what_prints():
    assert (
        rendered(r"Ratios to PT [95\% CI], see Table~\ref{tab:inference}.") == "Ratios to PT [95% CI], see Table III."
    )
    assert rendered(r"\texttt{small\_cnn}: 1.5$\times$ ($^{d}$: \fwbNumPairsDeviating{} ratios)") == (
        "small_cnn: 1.5x (d: 00 ratios)"
    )
    assert rendered(r"\emph{This study}: ``no interval''") == 'This study: "no interval"'


def test_an_over_long_caption_or_an_unexplained_mark_fails_the_check():
    """The negative control: a caption as long as the throughput table's was (14 lines) fails at either width, one
    at the budget passes, one a character over fails, and a mark with no word for it in the note fails however
    short the caption."""
    sentence = "Each framework's throughput ratio to PyTorch with its 95\\% CI, in the modes its column names. "
    for wide in (True, False):
        text = "\n".join(table_float(sentence * 12, "tab:long", r"1.5$^{a}$ \\", [r"$^{a}$: marked."], wide=wide))
        [problem] = caption_problems(text)
        assert problem.startswith("tab:long: a caption of") and "over" in problem
    for wide, environment in ((True, "table*"), (False, "table")):
        at_budget = "x" * CAPTION_CHARS[environment]
        assert caption_problems("\n".join(table_float(at_budget, "tab:ok", "1.5 \\\\", wide=wide))) == []
        assert caption_problems("\n".join(table_float(at_budget + "x", "tab:over", "1.5 \\\\", wide=wide)))
    # a one-column table's caption of 230 characters sets four lines in IEEEtran's small capitals
    assert caption_problems("\n".join(table_float("x" * 230, "tab:column", "1.5 \\\\", wide=False)))
    assert caption_problems("\n".join(figure_float("g", "x" * (CAPTION_CHARS["figure"] + 1), "fig:over")))
    unexplained = "\n".join(table_float("Short.", "tab:mark", r"1.5$^{a}$ & failed$^\dagger$ \\", ["$^{a}$: one."]))
    assert caption_problems(unexplained) == ["tab:mark: marks ['dagger'] with no word in the note"]


def test_a_float_without_notes_has_no_note_and_a_note_is_never_below_7_pt():
    assert float_note([]) == "" and float_note(["", "  "]) == ""
    assert _NOTE not in "\n".join(table_float("Short.", "tab:x", "1 \\\\"))
    note = float_note(["One.", "Two."])
    assert note == r"\par\smallskip\parbox{\linewidth}{\footnotesize\raggedright One. Two.}"
    assert r"\tiny" not in note


# --------------------------------------------------------------------------------------------------------------------
# Every generated float


def test_inference_tables(tmp_path):
    results = [_inference(framework, batch) for batch in (1, 8) for framework in THREE]
    paths = _write(tmp_path, results)
    frame, ratios = write_tidy(paths, tmp_path / "i.csv"), write_speedups(paths, tmp_path / "s.csv")
    text = inference_table(frame, THREE, ratios)
    _assert_short(text, {"tab:inference", "tab:inference-latency"})
    throughput, latency = (body for _, body in floats(text))
    assert _caption(throughput) == (
        r"Inference throughput (img/s) per model, precision and batch size, and each framework's throughput ratio to "
        r"PyTorch (PT) with its 95\% CI."
    )
    note = throughput.partition(_NOTE)[2]
    for words in ("Throughput: batch size over the median step", "PT for PyTorch", "Ratios in bold", "$^n$:"):
        assert words in note, words
    assert "Latency: the p50 of the timed steps" in latency.partition(_NOTE)[2]


def test_the_bodys_ratio_table_is_a_column_wide(tmp_path):
    """Table tab:ratios: one column-wide float (table, not table*) with each ratio above its interval, bold where
    resolved, its marks beside the ratio; nothing at all for a study without a ratio to PyTorch."""
    results = [_inference(framework, batch) for batch in (1, 8) for framework in THREE]
    paths = _write(tmp_path, results)
    ratios = write_speedups(paths, tmp_path / "s.csv")
    text = ratios_table(THREE, ratios)
    _assert_short(text, {"tab:ratios"})
    [(kind, body)] = floats(text)
    assert kind == "table" and r"\begin{tabular}{lrrr}" in body, "Model, BS and two ratio columns, no Prec."
    assert body.count(r"\begin{tabular}[t]{@{}r@{}}") == len(ratios), "every ratio stacked over its interval"
    assert r"\\{\scriptsize[" in body and "Throughputs: Table~\\ref{tab:inference}." in body
    assert ratios_table(["jax", "tensorflow"], ratios) == "", "without PyTorch, no ratio column"
    assert ratios_table(THREE, ratios.iloc[0:0]) == ""


def test_inference_tables_with_failures_deviations_and_out_of_memory(tmp_path):
    paths = test_deviations._write(tmp_path, test_deviations._inference_results())
    frame, ratios = write_tidy(paths, tmp_path / "i.csv"), write_speedups(paths, tmp_path / "s.csv")
    text = inference_table(frame, ["torch", "jax"], ratios)
    assert r"$^{d}$" in text.split(_NOTE)[0], "a deviating cell is marked"
    _assert_short(text, {"tab:inference", "tab:inference-latency"})
    _assert_short(failures_table(frame, summary=failure_summary(frame)), {"tab:failures", "tab:largest_batch"})


def test_training_section(tmp_path):
    paths = _write(tmp_path, _training_results(), "train")
    write_training_tables(paths, tmp_path / "training.csv", tmp_path / "step0.csv")
    frame, agreement = read_tidy(tmp_path / "training.csv"), read_tidy(tmp_path / "step0.csv")
    section = training_section(frame, agreement, published=read_published(PUBLISHED))
    _assert_short(section, {"fig:training", "tab:training", "tab:training-accuracy", "tab:l4", "tab:step0"})
    bodies = {_label(body): body for _, body in floats(section)}
    assert r"$^\ast$" in bodies["tab:step0"].partition(_NOTE)[0], "a flagged step-0 pair"
    assert "missing$^{b}$" in bodies["tab:l4"] and r"$^{b}$: tensorflow on the CPU" in bodies["tab:l4"]
    l4 = _caption(bodies["tab:l4"])
    assert "small CNN" in l4 and "small_cnn" not in l4, "the model by its display name"
    assert "lighter shade" in bodies["fig:training"].partition(r"\caption")[0], "the figure's note under it"


@pytest.mark.parametrize("trials", [1, 3])
def test_micro_section(tmp_path, trials):
    paths = test_micro_analysis._study(tmp_path, failed={("torch", 256): "out of memory"}, trials=trials)
    analysis = micro_analysis.analyse_micro(
        paths, test_micro_analysis.REFERENCE_CSV, resamples=test_micro_analysis.RESAMPLES
    )
    section = micro_section(analysis)
    _assert_short(section, {"fig:micro", "tab:micro", "tab:micro-transfer", "tab:micro-crossover"})
    assert r"failed$^\dagger$" in section.split(_NOTE)[1], "the failed cell is marked, and explained"


# Every source the repository ships (its name and device are in each table's caption), and one of the tests'.
SHIPPED = {source.key: {"source": source.source, "device": source.device} for source in read_sources(SOURCES)}


@pytest.mark.parametrize("named", [{}, *SHIPPED.values()], ids=["test source", *SHIPPED])
def test_published_section(tmp_path, named):
    rows = [
        test_published._published_row("resnet50", "pytorch", 1, 500.0),
        test_published._published_row("resnet50", "jax", 1, 750.0),
    ]
    sources = test_published._sources(tmp_path, rows, precision="default", **named)
    # only compiled PyTorch here, on a GPU: another mode ($^\ddagger$) and another arithmetic ($^\S$) than published
    inference = pd.DataFrame(
        [
            test_published._gpu_cell("torch", "resnet50", 1, 160.0, "fp32") | {"mode": "compile"},
            test_published._gpu_cell("jax", "resnet50", 1, 100.0, "fp32") | {"mode": "jit"},
        ]
    )
    ratio = test_published._ratio("resnet50", 1, 0.625, 0.6, 0.65)
    speedups = pd.DataFrame([ratio | {"numerator_mode": "jit", "denominator_mode": "compile"}])
    matched = compare(sources, inference=inference, speedups=speedups, training=None, image_size=224)
    text = published_section(matched, sources, "published_vs_reproduced")
    _assert_short(text, {"tab:published-gpu-inference", "fig:published"})
    table = text.split(_NOTE)[0]
    assert {"ddagger", "S", "ast"} <= _marks(table), "every mark the note must explain is in the table"


def test_profile_section():
    results = test_profile_analysis._study()
    section = profile_section(op_profile_table(results, test_profile_analysis._tidy(results)), pd.DataFrame())
    _assert_short(section, {"fig:profile", "tab:profile"})
    assert "Conv.: convolution" in section.split(_NOTE)[-1]


def test_ledger_study_time_tables():
    rows = lg.ledger(test_ledger.CELLS, test_ledger._parity(errors={"jax": 1.0}), test_ledger.INFERENCE)
    _assert_short(lg.ledger_table(rows), {"tab:ledger"})
    phases = {"framework_import_s": 0.6, "load_s": 1.0, "compile_s": 20.0, "step0_s": 3.0, "timed_s": 30.0}
    summary = study_time.breakdown(
        [_job("training_cell", 0, 63)], _processes([("training", "jax", 62.0, phases)]), latex_s=4.0
    )
    table = study_time.latex_table(summary, latex_pending=True)
    _assert_short(table, {"tab:study-time"})
    assert "shares of the time before the LaTeX build" in table.split(_NOTE)[1]
