"""The template environment of the generated prose (fwbench.analysis.paper.templates): a value a template asks for and
is not handed is an error naming the template, its line and the variable, never an empty gap in the paper; the
filters write numbers, ratios, ranges and intervals alike in LaTeX and Markdown; strings are LaTeX-escaped for the
LaTeX target only."""

from __future__ import annotations

import pytest

from fwbench.analysis.paper.headline import Machine
from fwbench.analysis.paper.templates import TEMPLATES, TemplateValueError, environment, render, sig, target_of


def test_a_value_the_template_was_not_handed_is_an_error_naming_template_line_and_variable(tmp_path):
    (tmp_path / "broken.tex.j2").write_text("<# a comment #>\nRatio << ratio|times >> on << models|join_words >>.\n")
    assert (
        render("broken.tex.j2", {"ratio": 1.5, "models": ["a", "b"]}, folder=tmp_path)
        == "Ratio 1.5$\\times$ on a and b."
    )
    with pytest.raises(TemplateValueError, match=r"broken\.tex\.j2 \(broken\.tex\.j2, line 2\): 'models' is undefined"):
        render("broken.tex.j2", {"ratio": 1.5}, folder=tmp_path)


def test_a_missing_attribute_in_a_shared_template_names_where_it_was_asked_for(tmp_path):
    (tmp_path / "shared.j2").write_text(
        "<% macro where(m) %>\non << m.name >> with << m.cores >> cores\n<% endmacro %>\n"
    )
    (tmp_path / "page.md.j2").write_text('<% import "shared.j2" as s %>\nRan << s.where(machine) >>.\n')
    with pytest.raises(TemplateValueError, match=r"page\.md\.j2 \(shared\.j2, line 2\): .*has no attribute 'cores'"):
        render("page.md.j2", {"machine": Machine("CPU", "AMD EPYC", 2)}, folder=tmp_path)


def test_the_shipped_templates_refuse_to_render_without_their_study():
    for name in ("abstract.tex.j2", "summary.md.j2"):
        assert (TEMPLATES / name).is_file()
        with pytest.raises(TemplateValueError, match="'study' is undefined"):
            render(name, {})


def test_numbers_to_two_or_three_significant_figures():
    assert sig(0.25107) == "0.25" and sig(1.417) == "1.4" and sig(405.47) == "410" and sig(98.97) == "99"
    assert sig(1.04) == "1.04" and sig(0.996) == "0.996", "a ratio that is not 1 never prints as 1.0"
    assert sig(1.0) == "1.0"
    assert sig(405.47, 3) == "405" and sig(12345.0) == "12{,}000" and sig(12345.0, target="md") == "12,000"
    assert sig(None) == "---" and sig(None, target="md") == "—"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("tex", "1.5$\\times$ (0.25--1.4$\\times$) [1.4, 1.6] a, b and c; five of 12; an AMD EPYC; 95\\%"),
        ("md", "1.5× (0.25–1.4×) [1.4, 1.6] a, b and c; five of 12; an AMD EPYC; 95%"),
    ],
)
def test_filters_write_each_target_its_own_markup(target, expected):
    template = environment(target).from_string(
        "<< r|times >> (<< low|span(high) >>) << (1.4, 1.6)|interval >> << items|join_words >>; "
        "<< 5|spell >> of << 12|spell >>; << 'AMD EPYC'|article >>; 95<< percent >>"
    )
    assert template.render(r=1.5, low=0.2511, high=1.417, items=["a", "b", "c"]) == expected


def test_the_target_is_the_templates_name():
    assert target_of("abstract.tex.j2") == "tex" and target_of("summary.md.j2") == "md"
    with pytest.raises(ValueError, match="tex.j2 or .md.j2"):
        target_of("findings.j2")
