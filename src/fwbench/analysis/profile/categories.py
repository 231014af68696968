"""The operation categories as this section shows them: their order and labels (the capture's own,
fwbench.trackers.op_profile.categories.CATEGORIES, so the figure, tables and prose name exactly what the reduction
wrote), the label inside a sentence, and one fixed colour each.

The colour of a category is this section's own: the same in every panel and every study, so a reader compares bars
by colour without reading the legend twice. A key the capture does not know (a category added later, or a result
written by another version) is shown as recorded, after the known ones, never dropped."""

from __future__ import annotations

from collections.abc import Iterable

from fwbench.trackers.op_profile.categories import CATEGORIES as CATEGORY_LABELS

# The keys in the contract's order (the order of every stacked bar, legend and table).
CATEGORIES: tuple[str, ...] = tuple(CATEGORY_LABELS)

# Paul Tol's qualitative colours (distinguishable under the common colour-vision deficiencies), grey for "other".
CATEGORY_COLOURS: dict[str, str] = {
    "convolution": "#4477AA",
    "matmul": "#EE6677",
    "attention": "#AA3377",
    "normalization": "#CCBB44",
    "elementwise": "#66CCEE",
    "pooling_reduction": "#228833",
    "data_movement": "#EE7733",
    "other": "#BBBBBB",
}
UNKNOWN_COLOUR = "#555555"


# Short labels for the section's table, where two categories share a row with four numbers (its note spells
# them out).
SHORT_LABELS: dict[str, str] = {
    "convolution": "Conv.",
    "matmul": "Matmul/dense",
    "attention": "Attention",
    "normalization": "Norm.",
    "elementwise": "Elementwise",
    "pooling_reduction": "Pool./reduce",
    "data_movement": "Data movement",
    "other": "Overhead/other",
}


def short_label(key: str) -> str:
    return SHORT_LABELS.get(str(key), category_label(key))


def category_label(key: str) -> str:
    """A category's label ("Data movement and layout"); a key the contract does not know is shown as recorded, so a
    category added by the capture is never hidden."""
    return CATEGORY_LABELS.get(str(key), str(key))


def category_phrase(key: str) -> str:
    """A category inside a sentence: its label starting in lower case ("data movement and layout")."""
    text = category_label(key)
    return text[:1].lower() + text[1:]


def category_colour(key: str) -> str:
    return CATEGORY_COLOURS.get(str(key), UNKNOWN_COLOUR)


def ordered_categories(keys: Iterable[str]) -> list[str]:
    """The distinct keys in the contract's order, any key it does not know after them in the order first seen."""
    distinct = list(dict.fromkeys(str(key) for key in keys))
    known = [key for key in CATEGORIES if key in distinct]
    return known + [key for key in distinct if key not in CATEGORY_LABELS]


def category_rank(key: str) -> int:
    return CATEGORIES.index(key) if key in CATEGORIES else len(CATEGORIES)
