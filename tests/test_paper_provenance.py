"""The paper's title line names the code that measured the cells and, where another wrote the paper (results
restored with `fwbench restore --report-only`), that one too (fwbench.analysis.paper.inputs.written_up_at)."""

from __future__ import annotations

from fwbench.analysis.paper.inputs import written_up_at
from fwbench.analysis.setup.provenance import commit_label


def test_the_paper_names_the_writing_code_only_where_it_is_not_the_measuring_code():
    measured = commit_label({"commit": "e86603fc4251" + "0" * 28, "dirty": True})
    assert measured == "e86603fc4251 (dirty)"
    assert written_up_at(measured, measured) == ""
    assert (
        written_up_at(commit_label({"commit": "8457e5b4327b" + "1" * 28, "dirty": False}), measured) == "8457e5b4327b"
    )
    # outside a git checkout nothing is claimed
    assert commit_label({"commit": None, "missing_reason": "no git"}) is None and written_up_at(None, measured) == ""
