"""A section's detail, set apart for an appendix: the body of the paper keeps a suite's text and its figure, and the
full tables go after the references, so that the body stays within its 8 pages (issue 56) without a generator
writing two sections.

A generator writes its section as one text and puts `DETAIL_MARK` on a line of its own before the floats that are
detail; `split_detail` cuts the text there, and the writer puts each part in a file of its own (the paper `\\input`s
the first in the body, the second in the appendices). A section without the mark has no detail.
"""

from __future__ import annotations

DETAIL_MARK = "% fwbench: what follows is this section's detail, set in an appendix"


def split_detail(text: str, heading: str, label: str) -> tuple[str, str]:
    """(body, detail): the text before the mark, and what follows it under an appendix heading of its own with
    `label` (an empty string when nothing follows)."""
    body, mark, detail = text.partition(DETAIL_MARK + "\n")
    if not mark or not detail.strip():
        return body if mark else text, ""
    return body.rstrip() + "\n", f"\\section{{{heading}}}\n\\label{{{label}}}\n\n{detail.lstrip()}"
