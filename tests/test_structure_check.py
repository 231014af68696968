"""The paper's shape (fwbench.analysis.paper.structure_check, issue 56): every check passing and failing on synthetic
aux text, page text and text lines, and all of them on a tiny IEEEtran document built here, through the entry the
workflow's paper_check rule calls."""

from __future__ import annotations

from fwbench.analysis.common.names import identifiers
from fwbench.analysis.paper import structure_check
from fwbench.analysis.paper.structure_check import Line, captions
from tests.test_pdf_check import TEXT, _build, needs_latex

# --------------------------------------------------------------------------------------------------------------------
# The abstract


def test_an_abstract_of_150_words_passes_and_one_of_151_fails():
    assert structure_check.abstract_words("word " * 150) == []
    [problem] = structure_check.abstract_words("word " * 151)
    assert problem.check == "abstract_words" and "151 words, over the limit of 150" in problem.message


def test_abstract_words_are_counted_as_a_reader_counts_them():
    # comments and markup are not words, a number or a bracket is one: 11 words as printed
    text = "% generated\nJAX is faster on ViT-B/16 at batch~1 (1.64$\\times$ [1.54, 1.75]).\\footnote{}"
    assert structure_check.abstract_words(text, limit=11) == []
    assert "11 words, over the limit of 10" in structure_check.abstract_words(text, limit=10)[0].message


def test_a_sentence_of_35_words_passes_and_one_of_36_fails():
    """Headings and labels are not sentences; a number's full stop ("0.50", "Fig. 3") does not end one."""
    fine = "\\paragraph{Inference} " + "word " * 33 + "at 0.50$\\times$. Fig. 3 shows it. Then " + "word " * 34 + "."
    assert structure_check.long_sentences(fine, "conclusions.tex") == []
    assert [structure_check.words(s) for s in structure_check.sentences(fine)] == [35, 4, 35]
    [problem] = structure_check.long_sentences(fine + " Then " + "word " * 35 + ".", "conclusions.tex")
    assert problem.check == "long_sentences" and problem.where == "conclusions.tex"
    assert "a sentence of 36 words, over 35: 'Then word word" in problem.message


def test_a_lists_items_are_read_one_by_one():
    items = " ".join(rf"\item control {i} " + "word " * 20 + ";" for i in range(3))
    text = rf"Of the 22 controls, 15 held. Three did not: \begin{{itemize}} {items} \end{{itemize}} One more."
    assert structure_check.long_sentences(text, "conclusions.tex") == []
    assert len(structure_check.sentences(text)) == 6
    flat = text.replace("\\begin{itemize}", "").replace("\\end{itemize}", "").replace("\\item", "")
    assert len(structure_check.long_sentences(flat, "conclusions.tex")) == 1, "the same words run on: one long sentence"


def test_figures_tables_and_inputs_are_not_a_sections_prose():
    """A generated section holds its figure (a caption is measured in lines by its own check) and a table; neither is
    read as a sentence, nor is a file the section inputs."""
    caption = "the throughput " * 20
    cells = " & ".join(["1.5 [1.4, 1.6]"] * 12)
    text = (
        "Fig. 2 shows it. \\begin{figure}[t] \\centering \\includegraphics{x} \\caption{" + caption + "}\\end{figure} "
        "\\begin{table}[t] \\begin{tabular}{ll} " + cells + " \\\\ \\end{tabular} \\end{table} \\input{ratios} Done."
    )
    assert structure_check.sentences(text) == ["Fig. 2 shows it.", "Done."]
    assert structure_check.long_sentences(text, "training_section.tex") == []
    # negative control: the same caption as running text is one sentence of 40 words
    [problem] = structure_check.long_sentences(caption + ".", "training_section.tex")
    assert "a sentence of 40 words" in problem.message


def test_every_generated_section_is_held_to_the_sentence_limit(tmp_path):
    """The paper check reads each generated section it finds (GENERATED_PROSE) and names the one with a long sentence;
    a section the paper does not have is not a problem."""
    run_on = "and then the ratio " * 9 + "."
    (tmp_path / "micro_section.tex").write_text("The crossover is at batch 16. " + run_on)
    (tmp_path / "training_section.tex").write_text("Every cell completed.")
    found = [tmp_path / name for name in structure_check.GENERATED_PROSE]
    problems = [p for f in found if f.is_file() for p in structure_check.long_sentences(f.read_text(), f.name)]
    assert [p.where for p in problems] == ["micro_section.tex"]
    assert {"inference_results.tex", "published_section.tex", "conclusions.tex"} <= set(structure_check.GENERATED_PROSE)


# --------------------------------------------------------------------------------------------------------------------
# Pages, from the aux file

# As pdflatex writes them: with hyperref five fields, the number itself in braces; without it two.
AUX = r"""\relax
\newlabel{fig:headline}{{1}{2}{Each framework's throughput over {PyTorch}'s}{figure.1}{}}
\newlabel{sec:verdicts}{{\mbox  {II-}0g}{2}{Verdicts}{paragraph.2.0.0.7}{}}
\newlabel{sec:body-end}{{\mbox  {XII-}0g}{8}{Conclusions}{section.12}{}}
\newlabel{tab:plain}{{IV}{11}}
"""


def test_label_pages_are_read_with_and_without_hyperref():
    assert structure_check.label_page(AUX, "fig:headline") == "2"
    assert structure_check.label_page(AUX, "sec:body-end") == "8"
    assert structure_check.label_page(AUX, "tab:plain") == "11"
    assert structure_check.label_page(AUX, "sec:missing") is None


def test_a_body_of_8_pages_passes_and_one_of_9_fails():
    assert structure_check.body_pages(AUX) == []
    [problem] = structure_check.body_pages(AUX.replace("{8}{Conclusions}", "{9}{Conclusions}"))
    assert problem.check == "body_pages" and problem.where == "page 9"
    assert "ends on page 9, over the limit of 8" in problem.message


def test_a_paper_without_the_end_of_its_body_fails():
    [problem] = structure_check.body_pages(AUX.replace("sec:body-end", "sec:conclusions"))
    assert problem.where == "sec:body-end" and r"no \label{sec:body-end}" in problem.message


def test_the_headline_figure_on_page_2_passes_and_on_page_3_fails():
    assert structure_check.headline_page(AUX) == []
    [late] = structure_check.headline_page(AUX.replace("{{1}{2}", "{{1}{3}"))
    assert late.check == "headline_page" and late.where == "page 3"
    [missing] = structure_check.headline_page(AUX, label="fig:nowhere")
    assert r"no \label{fig:nowhere}" in missing.message


# --------------------------------------------------------------------------------------------------------------------
# Identifiers in the prose


def test_the_registered_identifiers_are_the_models_with_display_names():
    assert {"resnet50", "vit_b_16", "small_cnn", "mobilenet_v3_small", "efficientnet_b0"} <= identifiers()


def test_display_names_pass_and_identifiers_in_the_body_fail_however_the_pdf_spells_them():
    names = {"resnet50", "vit_b_16", "small_cnn"}
    clean = ["ResNet-50 and ViT-B/16 at batch 32; the small CNN", "myresnet50 resnet500 vit_b_160 (not identifiers)"]
    assert structure_check.identifiers_in_prose(clean, names, body_last_page=2) == []
    pages = [
        "JAX is faster on vit_b_16 at batch 1.",  # T1: the underscore as typed
        "Table: small cnn, resnet50\nand vit b 16",  # OT1 draws \_ as a rule: spaces in the text
        "Appendix: small_cnn and resnet50 in the appendix are exempt.",
    ]
    problems = structure_check.identifiers_in_prose(pages, names, body_last_page=2)
    assert [(p.where, p.message.split("'")[1]) for p in problems] == [
        ("page 1", "vit_b_16"),
        ("page 2", "small_cnn"),
        ("page 2", "resnet50"),
        ("page 2", "vit_b_16"),
    ]
    assert problems[0].check == "identifier_in_prose" and "faster on vit_b_16 at batch 1" in problems[0].message
    # without the end of the body marked, every page is the body
    assert len(structure_check.identifiers_in_prose(pages, names, body_last_page=None)) == 6


# --------------------------------------------------------------------------------------------------------------------
# Captions (PDF coordinates: y grows upwards; a caption's lines 9 pt apart at 8 pt, body text 12 pt apart at 10 pt)


def _column(x0: float, top: float, texts: list[str], size: float = 8.0, step: float = 9.0) -> list[Line]:
    return [Line(text, x0, x0 + 250, top - i * step, top - i * step + size, size) for i, text in enumerate(texts)]


def test_a_figure_caption_is_its_lines_down_its_column_at_its_size():
    left = _column(50, 700, ["Fig. 1. A caption that runs", "over four lines", "of its column", "and on."])
    left += _column(
        50, 640, ["Body text after the figure, at 10 pt,", "Fig. 2. opens this line of a paragraph."], 10, 12
    )
    right = _column(310, 700, ["Fig. 3. Beside it, two lines", "of the other column."])
    right += _column(310, 660, ["TABLE IV"])
    right += [Line("Loader: images/s with no consumer, and how long the", 325, 550, 651, 659, 8.0)]
    right += [Line("consumer waited per batch", 381, 493, 642, 650, 8.0)]
    right += _column(330, 620, ["Batch img/s wait", "32 33,057 0.871", "64 30,000 0.900"])  # after the gap: the table
    found = {caption.label: caption.lines for caption in captions(left + right, page=4)}
    assert found == {
        "Fig. 1": ("Fig. 1. A caption that runs", "over four lines", "of its column", "and on."),
        "Fig. 3": ("Fig. 3. Beside it, two lines", "of the other column."),
        "TABLE IV": ("Loader: images/s with no consumer, and how long the", "consumer waited per batch"),
    }
    [problem] = structure_check.caption_problems(captions(left + right, page=4))
    assert problem.check == "long_caption" and problem.where == "page 4, Fig. 1"
    assert "a caption of 4 lines, over the limit of 3: 'Fig. 1. A caption that runs over four" in problem.message
    assert structure_check.caption_problems(captions(left + right, page=4), max_lines=4) == []


def test_a_long_table_caption_fails():
    lines = _column(310, 660, ["TABLE IX", "One", "two", "three", "four lines of caption"])
    [problem] = structure_check.caption_problems(captions(lines, page=8))
    assert problem.where == "page 8, TABLE IX" and "4 lines" in problem.message


# --------------------------------------------------------------------------------------------------------------------
# A built document

ABSTRACT_TEXT = "We compare three frameworks on identical models, weights and input bytes, each in a fresh process."
LONG_CAPTION = (
    "A figure caption long enough to run over four lines of a column: it says what the figure shows, then how its "
    "intervals were made, then which markers are resolved, then what its scale is, and then it goes on about its "
    "colours and the dashed and dotted lines"
)


@needs_latex
def test_a_built_paper_is_checked_for_its_shape(tmp_path):
    (tmp_path / "abstract.tex").write_text(f"% generated\n{ABSTRACT_TEXT}\n")
    body = rf"""
\title{{A paper}}
\maketitle
\begin{{abstract}}
\input{{abstract}}
\end{{abstract}}
\section{{Results}}
{TEXT} Fig.~\ref{{fig:headline}} shows the ratios, Fig.~\ref{{fig:long}} more; Tables~\ref{{tab:short}}
and~\ref{{tab:long}} the numbers. The model resnet50 is an identifier in the prose.
\begin{{figure}}[t]
\centering
\fbox{{The headline}}
\caption{{The headline figure, one line}}
\label{{fig:headline}}
\end{{figure}}
\begin{{figure}}[t]
\centering
\fbox{{Another figure}}
\caption{{{LONG_CAPTION}}}
\label{{fig:long}}
\end{{figure}}
\begin{{table}}[b]
\centering
\caption{{A table caption that takes two lines of the column in small capitals}}
\label{{tab:short}}
\begin{{tabular}}{{lr}}
\toprule
Model & img/s \\
\midrule
ResNet-50 & 1.00 \\
\bottomrule
\end{{tabular}}
\end{{table}}
{TEXT}
\label{{sec:body-end}}
\clearpage
\appendix
\section{{Method}}
{TEXT} In the appendix small\_cnn and resnet50 are allowed. Table~\ref{{tab:long}} has a long caption.
\begin{{table}}[h]
\centering
\caption{{A table caption in small capitals long enough to take four lines of the column, which is more than a
caption should say: what the table shows, and how its numbers were made, belongs in the text}}
\label{{tab:long}}
\begin{{tabular}}{{lr}}
\toprule
Model & img/s \\
\midrule
ViT-B/16 & 2.00 \\
\bottomrule
\end{{tabular}}
\end{{table}}
"""
    (tmp_path / "conclusions.tex").write_text("\\section{Conclusions} " + "word " * 36 + ". Short one.\n")
    pdf, log, tex = _build(tmp_path, body)
    report = structure_check.check_paper_and_structure(
        pdf=pdf, log=log, main_tex=tex, search_path=[], pages_dir=tmp_path / "pages"
    )
    assert (report["abstract_words"], report["body_pages"], report["headline_page"]) == (16, 1, 1), report
    assert report["pages"] == 2
    problems = {(p["check"], p["where"]): p["message"] for p in report["problems"]}
    assert report["longest_sentence"] == {"abstract.tex": 16, "conclusions.tex": 36}
    assert set(problems) == {
        ("long_sentences", "conclusions.tex"),
        ("identifier_in_prose", "page 1"),
        ("long_caption", "page 1, Fig. 2"),
        ("long_caption", "page 2, TABLE II"),
    }, report["problems"]
    assert "'resnet50' in '" in problems[("identifier_in_prose", "page 1")]
    assert "model resnet50 is an" in problems[("identifier_in_prose", "page 1")]
    assert "a caption of 4 lines" in problems[("long_caption", "page 1, Fig. 2")], problems
    assert "a caption of 4 lines" in problems[("long_caption", "page 2, TABLE II")], problems

    # the same paper against tighter limits fails each of the other checks
    tight = structure_check.structure_report(
        pdf=pdf,
        aux=tmp_path / "doc.aux",
        abstract_tex=tmp_path / "abstract.tex",
        max_abstract_words=15,
        max_body_pages=0,
        headline_last_page=0,
        max_caption_lines=4,
    )
    assert {p.check for p in tight["problems"]} == {
        "abstract_words",
        "body_pages",
        "headline_page",
        "identifier_in_prose",
    }, tight["problems"]
    # and a paper without its aux file or abstract has neither its body's end nor its abstract
    lost = structure_check.structure_report(pdf=pdf, aux=tmp_path / "none.aux", abstract_tex=None)
    assert lost["body_pages"] is None and lost["abstract_words"] is None
    assert {p.check for p in lost["problems"]} >= {"abstract_words", "body_pages", "headline_page"}
