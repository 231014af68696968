"""The paper as a reader sees it (fwbench.analysis.paper.pdf_check): every check's failure path on a synthetic log or a
tiny LaTeX document built here, a clean document passing, and the generated tables fitting the page at 8 pt."""

from __future__ import annotations

import math
import shutil
import subprocess

import pandas as pd
import pytest

from fwbench.analysis.common.latex import literal
from fwbench.analysis.failures.report import failures_table
from fwbench.analysis.inference.tables import inference_table
from fwbench.analysis.paper import pdf_check
from fwbench.analysis.paper.failures import failure_summary
from fwbench.analysis.paper.pdf_check import Problem
from fwbench.analysis.setup.tables import environment_table

needs_latex = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("latexmk", "pdflatex", "pdftotext", "pdftoppm", "pdfinfo")),
    reason="needs LaTeX and poppler-utils (setup.sh installs them)",
)

# The paper's preamble (report/paper.tex): what the generated tables are set in.
PREAMBLE = r"""\documentclass[conference]{IEEEtran}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{array}
\usepackage[hidelinks]{hyperref}
\newcommand{\fwbNumSettingsDiffer}{0}
\newcommand{\fwbNumPairsDeviating}{1}
\newcommand{\fwbNumPairsExcludedDeviating}{1}
\newcommand{\fwbNumRatiosRefused}{4}
\newcommand{\fwbNumRatiosNodeDiffer}{4}
\begin{document}
"""
TEXT = "A paragraph of body text, long enough to wrap over a couple of lines in a column of the page. " * 4


def _build(tmp_path, body: str, name: str = "doc"):
    """latexmk a document of `body` in tmp_path: (pdf, log, tex)."""
    tex = tmp_path / f"{name}.tex"
    tex.write_text(PREAMBLE + body + "\n\\end{document}\n")
    subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", tex.name],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    )
    return tmp_path / f"{name}.pdf", tmp_path / f"{name}.log", tex


def _check(tmp_path, pdf, log, tex, search_path=()):
    return pdf_check.check_paper(
        pdf=pdf, log=log, main_tex=tex, search_path=list(search_path), pages_dir=tmp_path / "pages"
    )


def _problems(report, check):
    return [Problem(**p) for p in report["problems"] if p["check"] == check]


# --------------------------------------------------------------------------------------------------------------------
# The log

SYNTHETIC_LOG = "\n".join(
    [
        "This is pdfTeX, Version 3.141592653-2.6-1.40.24 (preloaded format=pdflatex)",
        "(/work/report/paper.tex",
        "(/work/results/tables/inference.tex",
        r"Overfull \hbox (12.3pt too wide) in paragraph at lines 33--53",
        " [][] ",
        " []",
        "",
        ")",
        r"Overfull \hbox (1.5pt too wide) in paragraph at lines 60--61",
        r"\T1/lmr/m/n/10 a line that sticks out a little (by less than the tolerance",
        " []",
        "",
        r"Overfull \vbox (25.0pt too high) has occurred while \output is active []",
        "",
        # TeX breaks its log lines at 79 characters: the warning continues on the next line
        "LaTeX Warning: Reference `tab:inference-latency' on page 4 undefined on input li",
        "ne 12.",
        "",
        "LaTeX Warning: Citation `knuth84' on page 2 undefined on input line 7.",
        "",
        "LaTeX Warning: Float too large for page by 44.5pt on input line 80.",
        "",
        "LaTeX Warning: There were undefined references.",
        ")",
    ]
)


def test_log_problems_name_overfull_boxes_undefined_references_and_large_floats():
    problems = pdf_check.log_problems(SYNTHETIC_LOG)
    checks = [p.check for p in problems]
    assert checks == ["overfull_box", "overfull_box", "undefined_reference", "undefined_citation", "float_too_large"]
    wide, high = problems[0], problems[1]
    assert "12.3 pt too wide" in wide.message and "lines 33--53" in wide.message
    assert wide.where == "log line 4 (inference.tex)", "the file TeX was reading"
    assert "25 pt too high" in high.message and "(paper.tex, after inference.tex)" in high.where
    assert problems[2].where == "tab:inference-latency (page 4)", "a warning broken over two log lines is read whole"
    assert problems[3].where == "knuth84 (page 2)"
    assert "44.5pt" in problems[4].message
    # the 1.5 pt box is within the default 2 pt tolerance; a stricter tolerance reports it
    assert sum(p.check == "overfull_box" for p in pdf_check.log_problems(SYNTHETIC_LOG, tolerance_pt=1)) == 3


def test_a_summary_warning_alone_still_counts():
    problems = pdf_check.log_problems("LaTeX Warning: There were undefined references.\n")
    assert [p.check for p in problems] == ["undefined_reference"]
    assert pdf_check.log_problems("LaTeX Warning: Label(s) may have changed. Rerun to get cross-references right.")


# --------------------------------------------------------------------------------------------------------------------
# The sources


def test_floats_in_generated_inputs_must_be_referenced(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tmp_path / "paper.tex").write_text(
        "\\input{macros}\nAs Table~\\ref{tab:a} and Fig.~\\ref{fig:b} show. % Table~\\ref{tab:c} in a comment\n"
        "\\input{section}\n\\begin{figure}\\caption{b}\\label{fig:b}\\end{figure}\n"
    )
    (tables / "macros.tex").write_text("\\newcommand{\\x}{1}\n")
    (tables / "section.tex").write_text(
        "\\begin{table*}[t]\\caption{a}\\label{tab:a}\\end{table*}\n"
        "\\begin{table}[t]\\caption{c, see Table~\\ref{tab:c}}\\label{tab:c}\\end{table}\n"
        "\\begin{table}[t]\\caption{d}\\label{tab:d}\\end{table}\n"
        "\\begin{figure*}[t]\\caption{no label}\\end{figure*}\n"
        "Table~\\ref{tab:d} refers to d from the generated text.\n"
    )
    sources = pdf_check.read_sources(tmp_path / "paper.tex", [tables])
    assert [p.split("/")[-1] for p in sources] == ["paper.tex", "macros.tex", "section.tex"]
    problems = pdf_check.unreferenced_floats(sources)
    assert [(p.where, p.message) for p in problems] == [
        ("section.tex: tab:c", "the table is never referenced"),  # only from its own caption and a comment
        ("section.tex", "a figure* without a \\label"),
    ]


def test_an_unescaped_percent_in_a_generated_input_is_named(tmp_path):
    """The main file may comment; a generated input's % after text is a value left unescaped (it cut the ledger's
    sentence at "10%"). An escaped \\% and a % that ends its line (the space-suppressing idiom) drop nothing."""
    tables = tmp_path / "tables"
    tables.mkdir()
    (tmp_path / "paper.tex").write_text("Text. % a comment of the author's\n\\input{section}\n")
    (tables / "section.tex").write_text(
        "% a header line\nIQR at most 10\\% of the median.\n\\newcommand{\\x}{1}%\n"
        "1 did not (not noisy (IQR at most 10% of the median)); 1 could not be measured.\n"
    )
    sources = pdf_check.read_sources(tmp_path / "paper.tex", [tables])
    problems = pdf_check.stray_percents(tmp_path / "paper.tex", sources)
    assert [(p.check, p.where) for p in problems] == [("stray_percent", "section.tex:4")]
    assert "of the median)); 1 could not" in problems[0].message


def test_text_problems_find_question_marks_and_unexpanded_macros():
    pages = ["Clean text, 3.5 ms (n = 10).", "See Table ?? for details.", r"It took \fwbStudyWall s", "fwbNumCells"]
    problems = pdf_check.text_problems(pages)
    assert [(p.where, p.message.split(" in ")[0]) for p in problems] == [
        ("page 2", "an undefined reference '??'"),
        ("page 3", r"an unexpanded macro '\fwbStudyWall'"),
        ("page 4", "an unexpanded macro 'fwbNumCells'"),
    ]


def test_the_error_names_every_problem():
    report = {"pdf": "paper.pdf", "problems": [{"check": "overfull_box", "where": "log line 3", "message": "x"}]}
    error = pdf_check.PaperCheckError(report, "results/logs/report/paper_check.log")
    assert "paper.pdf has 1 problem(s)" in error.terminal_message
    assert "- overfull_box: log line 3: x" in error.terminal_message and "paper_check.log" in error.terminal_message


# --------------------------------------------------------------------------------------------------------------------
# Built documents


@needs_latex
def test_a_clean_document_passes(tmp_path):
    body = rf"""
\title{{A clean paper}}
\maketitle
\section{{Results}}
{TEXT} Table~\ref{{tab:clean}} has numbers with note marks, Fig.~\ref{{fig:box}} a box.
\begin{{table}}[t]
\centering
\caption{{A table at 8 pt with superscript marks ($^w$, $^\dagger$) and a 7 pt interval}}
\label{{tab:clean}}
\footnotesize
\begin{{tabular}}{{lrr}}
\toprule
\textbf{{Model}} & \textbf{{img/s}} & \textbf{{Ratio}} \\
\midrule
small\_cnn & 1{{,}}234$^{{n}}$ & 1.5$\times$ {{\scriptsize[1.2, 1.8]}}$^{{w}}$ \\
resnet50 & failed$^\dagger$ & --- \\
\bottomrule
\end{{tabular}}
\end{{table}}
\begin{{figure}}[t]
\centering
\fbox{{A figure}}
\caption{{A box}}
\label{{fig:box}}
\end{{figure}}
{TEXT}
"""
    pdf, log, tex = _build(tmp_path, body)
    report = _check(tmp_path, pdf, log, tex)
    assert report["problems"] == [], report["problems"]
    assert report["pages"] == 1 and report["images"] == [str(tmp_path / "pages" / "page-1.png")]
    assert (tmp_path / "pages" / "page-1.png").stat().st_size > 0


@needs_latex
def test_a_broken_document_reports_each_problem(tmp_path):
    body = rf"""
\section{{Results}}
{TEXT} As Table~\ref{{tab:tiny}} and Table~\ref{{tab:missing}} show, the wall time was
\texttt{{\textbackslash fwbWall}}.
\begin{{table}}[t]
\centering
\caption{{A table in tiny}}
\label{{tab:tiny}}
\tiny
\begin{{tabular}}{{lr}}
\toprule
small\_cnn & 1.00 \\
\bottomrule
\end{{tabular}}
\end{{table}}
\begin{{table}}[t]
\centering
\caption{{A table nobody refers to, wider than its column}}
\label{{tab:lonely}}
\footnotesize
\begin{{tabular}}{{llll}}
a very long cell of text & another very long cell & and a third long one & and a fourth \\
\end{{tabular}}
\end{{table}}
{TEXT}
\clearpage
\null
\clearpage
{TEXT}
"""
    pdf, log, tex = _build(tmp_path, body)
    report = _check(tmp_path, pdf, log, tex)
    by_check = {p["check"] for p in report["problems"]}
    assert by_check == {
        "undefined_reference",
        "unexpanded",
        "overfull_box",
        "unreferenced_float",
        "small_text",
        "blank_page",
    }, report["problems"]
    assert _problems(report, "undefined_reference")[0].where == "tab:missing (page 1)"
    unexpanded = [p.message for p in _problems(report, "unexpanded")]
    assert any("'??'" in m for m in unexpanded) and any(r"'\fwbWall'" in m for m in unexpanded)
    [lonely] = _problems(report, "unreferenced_float")
    assert lonely.where == "doc.tex: tab:lonely"
    [tiny] = _problems(report, "small_text")
    assert tiny.where == "page 1, TABLE I" and "below 7 pt, the smallest 4.9" in tiny.message, tiny
    [overfull] = _problems(report, "overfull_box")
    assert "too wide" in overfull.message
    [blank] = _problems(report, "blank_page")
    assert blank.where == "page 2"
    assert report["pages"] == 3 and len(report["images"]) == 3


def _frame() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A three-framework tidy table and its ratios at their widest: the longest model name, a failed cell, every
    mark, a deviating pair, a refused ratio and one across nodes, two precisions."""
    rows, ratios = [], []
    for model in ("mobilenet_v3_small", "efficientnet_b0"):
        for precision in ("fp32", "bf16"):
            for batch in (1, 256):
                for framework in ("torch", "jax", "tensorflow"):
                    failed = framework == "tensorflow" and batch == 256 and model == "efficientnet_b0"
                    rows.append(
                        {
                            "suite": "inference",
                            "framework": framework,
                            "model": model,
                            "precision": precision,
                            "batch_size": batch,
                            "status": "failed" if failed else "ok",
                            "reason": "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                            "25165824 bytes. " * 3
                            if failed
                            else None,
                            "failure_kind": "device_oom" if failed else None,
                            "workarounds_tried": None,
                            "deviations": "xla_autotune_off+triton_gemm_off"
                            if framework == "jax" and batch == 1
                            else None,
                            "deviation_detail": "xla_autotune_off: compiler failure matched /[Aa]utotun/ ('Autotun')"
                            if framework == "jax" and batch == 1
                            else None,
                            "deviation_first_failure": "compiler" if framework == "jax" and batch == 1 else None,
                            "throughput_img_s": 12345.6 / (1 + batch),
                            "latency_p50_ms": 123.456,
                            "compile_s": math.nan if framework == "torch" else 12.345,
                            "mfu": 0.012345,
                            "noisy": True,
                            "ci_not_reached": True,
                            "settings_differ": "True",
                        }
                    )
                for framework in ("jax", "tensorflow"):
                    # at batch 1, TensorFlow's ratio is refused (another GPU model) and JAX's crosses nodes
                    refused = framework == "tensorflow" and batch == 1
                    ratios.append(
                        {
                            "numerator": framework,
                            "model": model,
                            "precision": precision,
                            "batch_size": batch,
                            "ratio": math.nan if refused else 0.0123456,
                            "ci_low": math.nan if refused else 0.0111111,
                            "ci_high": math.nan if refused else 0.0133333,
                            "resolved": "False",
                            "ci_scope": None if refused else "within_process",
                            "deviation_differs": "True",
                            "refused": "device models differ: torch NVIDIA A100-SXM4-80GB, tensorflow NVIDIA H100"
                            if refused
                            else None,
                            "node_differs": framework == "jax" and batch == 1,
                            "node_detail": "nodes differ: torch gpu01, jax gpu02" if framework == "jax" else None,
                        }
                    )
    return pd.DataFrame(rows), pd.DataFrame(ratios)


# The environment table at its widest: a GPU machine's names and settings are whatever the machine reports (seen
# here: "Intel(R) Xeon(R) Processor" with the TensorFlow threads row made the plain two-column table 26 pt too wide).
WIDE_ENVIRONMENT = {
    "CPU": "AMD EPYC 9654 96-Core Processor with a long marketing name (R)",
    "Device": "NVIDIA H100 80GB HBM3 (GPU-3f2a9c1e-7b4d-4e8a-9c1f-2d3e4f5a6b7c)",
    "PyTorch": "2.14.1+cu130",
    "TensorFlow threads (intra-op / inter-op)": "2 / 2",
    "XLA_FLAGS": "--xla_gpu_autotune_level=0,--xla_gpu_enable_triton_gemm=false,--xla_gpu_deterministic_ops=true",
    "fwbench commit": "adaa70659311 (uncommitted changes)",
}


@needs_latex
def test_the_generated_tables_fit_the_page_at_8_pt(tmp_path):
    """The inference tables (three frameworks), the failures table, the environment table and the largest-batch
    table, at their widest, in the paper's document class: nothing overfull, nothing below 7 pt, nothing scaled."""
    frame, ratios = _frame()
    (tmp_path / "inference.tex").write_text(inference_table(frame, ["torch", "jax", "tensorflow"], ratios))
    (tmp_path / "failures.tex").write_text(failures_table(frame, summary=failure_summary(frame)))
    (tmp_path / "environment.tex").write_text(environment_table(WIDE_ENVIRONMENT))
    body = rf"""
\section{{Results}}
{TEXT} Tables~\ref{{tab:inference}}, \ref{{tab:inference-latency}} and~\ref{{tab:environment}} give the numbers.
\begin{{table}}[t]
\caption{{Machine and software}}
\label{{tab:environment}}
\footnotesize
\input{{environment}}
\end{{table}}
\input{{inference}}
\section{{Failures}}
\label{{sec:failures}}
\input{{failures}}
{TEXT}
"""
    pdf, log, tex = _build(tmp_path, body)
    report = _check(tmp_path, pdf, log, tex)
    assert report["problems"] == [], report["problems"]
    text = (tmp_path / "inference.tex").read_text() + (tmp_path / "failures.tex").read_text()
    assert text.count(r"---$^{r}$") == 4 and r"$^{u}$$^{d}$$^{x}$" not in text and r"$^{w}$$^{d}$$^{x}$" in text
    assert r"$^{r}$: no ratio" in text and r"$^{x}$: the ratio's two cells" in text, "both marks explained"
    assert "adjustbox" not in text and "resizebox" not in text and r"\tiny" not in text


def test_flags_print_as_typed():
    """A command-line flag in generated text keeps both hyphens (LaTeX would set "--" as an en dash), and a wrapped
    environment value may break after its separators."""
    assert literal("--xla_gpu_autotune_level=0 and ---") == r"-{}-xla\_gpu\_autotune\_level=0 and -{}-{}-"
    assert environment_table({"XLA_FLAGS": "--a=1,--b=2", "Missing": None}).count(r"\allowbreak{}") == 3
    assert r"Missing & --- \\" in environment_table({"Missing": None})
