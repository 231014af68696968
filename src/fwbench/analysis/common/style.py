"""The paper's figure style, written out: what seaborn's `set_theme(context="paper", style="whitegrid",
font_scale=...)` sets (its "deep" palette and colour codes included), without importing seaborn.

Why: every figure job is a fresh process, and importing seaborn imports scipy.stats. On the 2-core Zen 3 VM that was
1.1 s of the 2.4 s a figure job spent importing, in nine jobs of every study's report and in every whole-workflow
test. Only the throughput figure draws with seaborn (`sns.lineplot`), and it imports seaborn where it draws.

The values are seaborn 0.13's (`seaborn.rcmod`: `plotting_context`, `axes_style`, `set_palette`,
`set_color_codes`), computed as it computes them so that the floats are the same;
`tests/test_figure_style.py` checks that `paper_theme` leaves matplotlib as `sns.set_theme` does, key by key, for
every font scale the figures use. One key is left out: seaborn sets `image.cmap` to "rocket", a colormap of its own
that exists only once seaborn is imported; no figure draws with a colormap.
"""

from __future__ import annotations

import matplotlib as mpl
from cycler import cycler

# seaborn's "notebook" sizes, which the "paper" context scales by 0.8 (fonts then by font_scale)
_FONT_SIZES = {
    "font.size": 12,
    "axes.labelsize": 12,
    "axes.titlesize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "legend.title_fontsize": 12,
}
_LINE_SIZES = {
    "axes.linewidth": 1.25,
    "grid.linewidth": 1,
    "lines.linewidth": 1.5,
    "lines.markersize": 6,
    "patch.linewidth": 1,
    "xtick.major.width": 1.25,
    "ytick.major.width": 1.25,
    "xtick.minor.width": 1,
    "ytick.minor.width": 1,
    "xtick.major.size": 6,
    "ytick.major.size": 6,
    "xtick.minor.size": 4,
    "ytick.minor.size": 4,
}
PAPER_SCALING = 0.8

# seaborn's "whitegrid" style, with its font family "sans-serif"
WHITEGRID = {
    "figure.facecolor": "white",
    "axes.labelcolor": ".15",
    "xtick.direction": "out",
    "ytick.direction": "out",
    "xtick.color": ".15",
    "ytick.color": ".15",
    "axes.axisbelow": True,
    "grid.linestyle": "-",
    "text.color": ".15",
    "font.family": "sans-serif",
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "w",
    "patch.force_edgecolor": True,
    "xtick.top": False,
    "ytick.right": False,
    "axes.grid": True,
    "axes.facecolor": "white",
    "axes.edgecolor": ".8",
    "grid.color": ".8",
    "axes.spines.left": True,
    "axes.spines.bottom": True,
    "axes.spines.right": True,
    "axes.spines.top": True,
    "xtick.bottom": False,
    "ytick.left": False,
}

# seaborn's "deep" palette: the colour cycle; its first six and a near-black are the colour codes "bgrmyck"
DEEP = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD")
DEEP6 = tuple(DEEP[i] for i in (0, 2, 3, 4, 8, 9))  # seaborn's "deep6": blue, green, red, purple, yellow, cyan
NEAR_BLACK = (0.1, 0.1, 0.1)


def paper_context(font_scale: float) -> dict[str, float]:
    """seaborn's `plotting_context("paper", font_scale)`: every size scaled by 0.8, the fonts then by font_scale."""
    scaled = {key: value * PAPER_SCALING for key, value in {**_LINE_SIZES, **_FONT_SIZES}.items()}
    return {**scaled, **{key: scaled[key] * font_scale for key in _FONT_SIZES}}


def paper_theme(font_scale: float) -> None:
    """Set the paper's figure style for the figures drawn next (see the module docstring)."""
    mpl.rcParams.update(paper_context(font_scale))
    mpl.rcParams.update(WHITEGRID)
    mpl.rcParams["axes.prop_cycle"] = cycler("color", [mpl.colors.to_rgb(colour) for colour in DEEP])
    for code, colour in zip("bgrmyck", [*DEEP6, NEAR_BLACK], strict=True):
        mpl.colors.colorConverter.colors[code] = mpl.colors.colorConverter.to_rgb(colour)
