"""A section's detail set apart for an appendix (fwbench.analysis.common.detail): the body keeps the text before the
mark, the appendix gets what follows it under a heading of its own, and a section without the mark is all body."""

from __future__ import annotations

from fwbench.analysis.common.detail import DETAIL_MARK, split_detail


def test_the_text_after_the_mark_goes_to_the_appendix_under_its_own_heading():
    text = f"\\section{{Training}}\nText.\n{DETAIL_MARK}\n\\begin{{table*}}T\\end{{table*}}\n"
    body, detail = split_detail(text, "Training in full", "app:training")
    assert body == "\\section{Training}\nText.\n"
    assert detail == "\\section{Training in full}\n\\label{app:training}\n\n\\begin{table*}T\\end{table*}\n"
    assert DETAIL_MARK not in body + detail


def test_a_section_without_the_mark_or_with_nothing_after_it_has_no_detail():
    assert split_detail("\\section{Micro}\nNo suite.\n", "Micro in full", "app:micro") == (
        "\\section{Micro}\nNo suite.\n",
        "",
    )
    body, detail = split_detail(f"Text.\n{DETAIL_MARK}\n  \n", "X", "app:x")
    assert (body, detail) == ("Text.\n", "")


def test_a_mark_that_is_not_on_a_line_of_its_own_does_not_split():
    """Negative control: the mark must stand on its own line; quoted inside a sentence it is text."""
    text = f"Text {DETAIL_MARK} more.\n"
    assert split_detail(text, "X", "app:x") == (text, "")
