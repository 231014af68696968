"""The paper's figure style without seaborn (fwbench.analysis.common.style): the same matplotlib settings as
seaborn's set_theme, and the figure jobs' imports leave seaborn and scipy.stats out."""

from __future__ import annotations

import copy
import subprocess
import sys

import matplotlib as mpl
import pytest

from fwbench.analysis.common.style import paper_theme

# every font scale the figures use (grep "paper_theme(font_scale=" src/)
FONT_SCALES = (0.8, 0.9)
SEABORN_ONLY = {"image.cmap"}  # seaborn's own colormap, "rocket": the module docstring says why it is left out


def _settings() -> tuple[dict, dict]:
    return copy.deepcopy(dict(mpl.rcParams)), dict(mpl.colors.colorConverter.colors)


def _differing(seaborns: dict, ours: dict) -> set[str]:
    return {key for key in seaborns if key not in SEABORN_ONLY and seaborns[key] != ours[key]}


@pytest.fixture
def restored():
    """matplotlib's settings and colour codes as they were before the test, afterwards."""
    params, codes = _settings()
    yield
    mpl.rcParams.update(params)
    mpl.colors.colorConverter.colors.clear()
    mpl.colors.colorConverter.colors.update(codes)


@pytest.mark.parametrize("font_scale", FONT_SCALES)
@pytest.mark.parametrize("before", ["defaults", "the other scale"])
def test_paper_theme_sets_what_seaborns_set_theme_sets(font_scale, before, restored):
    """From matplotlib's defaults and after a figure drawn at another scale (figures share a process in tests):
    every setting and colour code equal, the one key seaborn alone can set aside."""
    import seaborn as sns

    def start():
        mpl.rcdefaults()
        if before == "the other scale":
            other = next(scale for scale in FONT_SCALES if scale != font_scale)
            sns.set_theme(context="paper", style="whitegrid", font_scale=other)
            mpl.rcParams["lines.linewidth"] = 3.0  # a figure's own change, which the theme must undo

    start()
    sns.set_theme(context="paper", style="whitegrid", font_scale=font_scale)
    seaborns, seaborns_codes = _settings()
    start()
    paper_theme(font_scale)
    ours, our_codes = _settings()
    differ = _differing(seaborns, ours)
    assert not differ, {key: (seaborns[key], ours[key]) for key in sorted(differ)}
    assert our_codes == seaborns_codes


def test_a_wrong_size_is_caught(restored):
    """Negative control: one size off in the written-out context is a difference the comparison reports."""
    import seaborn as sns

    mpl.rcdefaults()
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    seaborns, _ = _settings()
    mpl.rcdefaults()
    paper_theme(0.8)
    ours, _ = _settings()
    assert _differing(seaborns, ours) == {
        "font.size",
        "axes.labelsize",
        "axes.titlesize",
        "xtick.labelsize",
        "ytick.labelsize",
        "legend.fontsize",
        "legend.title_fontsize",
    }


def test_figure_jobs_do_not_import_seaborn_or_scipy_stats():
    """A fresh process importing what the report's figure scripts import (workflow/scripts) loads neither; the
    throughput figure imports seaborn where it draws."""
    from tests.conftest import REPO

    imports = set()
    for script in (REPO / "workflow" / "scripts").glob("*.py"):
        imports |= {line for line in script.read_text().splitlines() if line.startswith("from fwbench.analysis")}
    assert len(imports) > 10, imports
    code = "\n".join([*sorted(imports), "import sys", "print(sorted({'seaborn', 'scipy.stats'} & set(sys.modules)))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
