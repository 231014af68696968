"""The order of the trials within each round of a comparison group: a Williams design, and the check of balance.

Every trial is a fresh process, but what ran just before it can still matter (a warm page cache, a CPU's clocks
after torch.compile's code generation, a GPU's temperature): a carry-over effect. A ratio between two frameworks is
confounded with position and carry-over unless each variant of the group runs in each position equally often and
is immediately preceded by each other variant equally often. A Williams design (Williams 1949) is the smallest
design with both properties: n rounds for an even number n of variants, 2n for an odd one (a Latin square and its
mirror image). Two variants: AB, BA. Three: ABC, BCA, CAB, CBA, ACB, BAC. Four: ABDC, BCAD, CDBA, DACB.

With fewer rounds than the design needs (or a count that is not a multiple of it), the rounds take the design's
rows in turn and the result says the design is incomplete; `balance` measures, from the orders that ran, what is
still balanced. The design's labels are permuted by a seed derived from the group (`group_seed`), recorded with
the design: a complete design stays balanced, and an incomplete one does not always leave the same variant (the
last one configured) out of the first position in every group of a study.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

DESIGN = "williams"


def williams(n: int) -> list[list[int]]:
    """The rows of a Williams design for n variants (labels 0..n-1): n rows for even n, 2n for odd n. The first row
    is 0, 1, n-1, 2, n-2, ...; row i adds i to every label (mod n); for odd n the mirror images of those rows follow.
    The first n rows are a Latin square, so position balance holds after n rounds whatever n."""
    if n < 1:
        raise ValueError("a design needs at least one variant")
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    rows = [[(label + i) % n for label in first] for i in range(n)]
    if n % 2 and n > 1:
        rows += [row[::-1] for row in rows]
    return rows


def rounds_needed(n: int) -> int:
    """Rounds of a balanced (Williams) design for n variants: n if n is even (or 1), 2n if odd."""
    return len(williams(n))


def group_seed(labels: Sequence[str]) -> int:
    """A seed from a group's cell labels: the same group gets the same order whenever it reruns, and different
    groups of a study get different permutations of the design's labels."""
    digest = hashlib.sha256("\n".join(labels).encode("utf-8")).hexdigest()
    return int(digest[:8], 16)


@dataclass(frozen=True)
class Design:
    """The planned order of a group's rounds. `variants`: the group's variants as given (its cells' order);
    `rows[k]`: round k+1's order as indices into `variants`; `needed`: rounds of one balanced design;
    `relabelling[d]`: the variant index that design label d stands for (from `seed`; identity without one)."""

    variants: tuple[str, ...]
    rows: tuple[tuple[int, ...], ...]
    needed: int
    seed: int | None
    relabelling: tuple[int, ...]

    @property
    def complete(self) -> bool:
        """Whether the rounds are whole balanced designs (a multiple of `needed`)."""
        return len(self.rows) > 0 and len(self.rows) % self.needed == 0

    def names(self, round_index: int) -> list[str]:
        return [self.variants[i] for i in self.rows[round_index]]

    def record(self) -> dict[str, Any]:
        """What a result records of the plan (provenance.group.order)."""
        return {
            "design": DESIGN,
            "variants": list(self.variants),
            "rounds": len(self.rows),
            "rounds_needed": self.needed,
            "complete": self.complete,
            "seed": self.seed,
            "relabelling": list(self.relabelling),
            "rows": [self.names(k) for k in range(len(self.rows))],
        }


def design(variants: Sequence[str], rounds: int, seed: int | None = None) -> Design:
    """The Williams design's rows for `variants` over `rounds` rounds (the design's rows in turn, from the first
    again after a whole design), its labels permuted by `seed` (None: design label d is variant d)."""
    variants = tuple(variants)
    if len(set(variants)) != len(variants):
        raise ValueError(f"a group's variants must be distinct: {variants}")
    base = williams(len(variants))
    relabelling = (
        tuple(range(len(variants)))
        if seed is None
        else tuple(int(i) for i in np.random.default_rng(seed).permutation(len(variants)))
    )
    rows = tuple(tuple(relabelling[label] for label in base[k % len(base)]) for k in range(rounds))
    return Design(variants, rows, len(base), seed, relabelling)


@dataclass(frozen=True)
class Balance:
    """How often each variant took each position and followed each other variant, over the rounds that ran.
    `positions[v][p]`: rounds in which v ran at (0-based) position p; `carry[(a, b)]`: rounds in which b ran
    immediately after a (a != b, both among `variants`)."""

    variants: tuple[str, ...]
    rounds: int
    positions: dict[str, Counter]
    carry: Counter

    def first(self, variant: str) -> int:
        return self.positions[variant][0]

    @property
    def positions_balanced(self) -> bool:
        """Each variant in each position equally often."""
        width = max((p for counts in self.positions.values() for p in counts), default=-1) + 1
        return all(len({self.positions[v][p] for v in self.variants}) <= 1 for p in range(width))

    @property
    def first_balanced(self) -> bool:
        return len({self.first(v) for v in self.variants}) <= 1

    @property
    def carry_balanced(self) -> bool:
        """Each variant immediately preceded by each other variant equally often."""
        return len({self.carry[pair] for pair in self.pairs()}) <= 1

    @property
    def balanced(self) -> bool:
        return self.positions_balanced and self.carry_balanced

    def pairs(self) -> list[tuple[str, str]]:
        return [(a, b) for a in self.variants for b in self.variants if a != b]

    def problems(self) -> list[str]:
        """What is unbalanced, in words ("torch/compile never first", "carry-over unbalanced (...)"); empty when
        balanced."""
        out = []
        if not self.first_balanced:
            never = [v for v in self.variants if self.first(v) == 0]
            if never:
                out.append(f"{_words(never)} never first")
            else:
                most, *rest = sorted(self.variants, key=self.first, reverse=True)
                counts = ", ".join(f"{v} in {self.first(v)}" for v in rest)
                out.append(f"first position unequal: {most} in {self.first(most)} of {self.rounds} rounds, {counts}")
        elif not self.positions_balanced:
            out.append("later positions unbalanced")
        if not self.carry_balanced:
            pairs = self.pairs()
            never = [pair for pair in pairs if self.carry[pair] == 0]
            if len(pairs) == 2:  # two variants: say which order ran more often
                (a, b), (c, d) = pairs
                detail = f"{a} then {b} in {self.carry[(a, b)]} rounds, {c} then {d} in {self.carry[(c, d)]}"
            elif never:
                detail = f"{len(never)} of {len(pairs)} ordered pairs never adjacent"
            else:
                counts = [self.carry[pair] for pair in pairs]
                detail = f"ordered pairs adjacent {min(counts)} to {max(counts)} times"
            out.append(f"carry-over unbalanced ({detail})")
        return out


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def balance(sequences: Sequence[Sequence[str]], variants: Sequence[str] | None = None) -> Balance:
    """Position and carry-over counts of the rounds that ran (`sequences[k]`: round k's variants in the order they
    ran), over `variants` (default: every variant that ran). Variants outside `variants` (a cell that failed and
    left) still occupy their positions and break the adjacency of the ones around them."""
    variants = tuple(variants) if variants is not None else tuple(dict.fromkeys(v for s in sequences for v in s))
    positions: dict[str, Counter] = {v: Counter() for v in variants}
    carry: Counter = Counter()
    for sequence in sequences:
        for position, variant in enumerate(sequence):
            if variant in positions:
                positions[variant][position] += 1
        for a, b in pairwise(sequence):
            if a in positions and b in positions:
                carry[(a, b)] += 1
    return Balance(variants, len(sequences), positions, carry)
