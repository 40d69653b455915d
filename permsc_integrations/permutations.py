"""Input orders for permutation self-consistency, and mapping answers back.

A *permutation* ``perm`` shown to the model means prompt position ``p`` holds original item
``perm[p]``. The model answers in prompt positions; :func:`to_original` maps that answer back
to original item indices. Everything here is pure and deterministic from the seed.

Example:
    >>> perms = sample_permutations(4, 3, seed=0, include_identity=True)
    >>> perms[0], len(perms), sorted(perms[1])
    ((0, 1, 2, 3), 3, [0, 1, 2, 3])
    >>> to_original((0, 2), (3, 1, 0, 2))  # answer "[1] > [3]" on the shuffled prompt
    (3, 0)
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

from permsc_integrations._checks import at_least, integer
from permsc_integrations.errors import InvalidRankingError

__all__ = ["sample_permutations", "to_original", "invert", "distinct_permutations"]


def sample_permutations(
    n: int, m: int, *, seed: int, include_identity: bool = False
) -> list[tuple[int, ...]]:
    """``m`` input orders of ``n`` items, each drawn uniformly at random from ``seed``.

    The draws are independent (a permutation can repeat when ``n!`` is small). With
    ``include_identity`` the first order is the original one, followed by the first ``m - 1``
    shuffles of the same seed.
    The same ``(n, m, seed)`` always gives the same orders, on every platform.

    >>> sample_permutations(3, 2, seed=7) == sample_permutations(3, 2, seed=7)
    True
    """
    at_least(0)("n", n)
    at_least(0)("m", m)
    integer("seed", seed)
    rng = random.Random(seed)
    identity = tuple(range(n))
    perms: list[tuple[int, ...]] = []
    if include_identity and m > 0:
        perms.append(identity)
    while len(perms) < m:
        order = list(identity)
        rng.shuffle(order)
        perms.append(tuple(order))
    return perms


def distinct_count(n: int, m: int) -> int:
    """How many distinct orders of ``n`` items :func:`distinct_permutations` gives for ``m``:
    ``min(m, n!)``.

    >>> distinct_count(3, 20), distinct_count(10, 20)
    (6, 20)
    """
    at_least(0)("n", n)
    at_least(0)("m", m)
    if n > 20:  # 20! > any m
        return m
    return min(m, math.factorial(n))


def distinct_permutations(
    n: int, m: int, *, seed: int, include_identity: bool = False
) -> list[tuple[int, ...]]:
    """Up to ``m`` input orders of ``n`` items, none repeated: all ``n!`` of them (in a
    seeded order) when ``n! <= m``, else ``m`` uniform draws without repetition.

    A model asked the same prompt twice answers the same (at temperature 0, or from a
    cache), so a repeated order is a call that adds nothing. Each order is still equally
    likely to be drawn at each place of the sequence, so what PSC aggregates is unchanged in
    expectation; the sequence is deterministic from ``seed`` and a shorter ``m`` is a prefix
    of a longer one (adaptive waves stop on a prefix). With ``include_identity`` the original
    order comes first.

    >>> perms = distinct_permutations(3, 20, seed=0, include_identity=True)
    >>> perms[0], len(perms)
    ((0, 1, 2), 6)
    >>> len(set(distinct_permutations(3, 20, seed=1)))
    6
    >>> distinct_permutations(6, 4, seed=2) == distinct_permutations(6, 9, seed=2)[:4]
    True
    """
    count = distinct_count(n, m)
    integer("seed", seed)
    rng = random.Random(seed)
    identity = tuple(range(n))
    if n <= 5:  # at most 120 orders: enumerate them, shuffled
        return _enumerated(identity, count, rng, include_identity)
    return _drawn(identity, count, rng, include_identity)


def _enumerated(
    identity: tuple[int, ...], count: int, rng: random.Random, include_identity: bool
) -> list[tuple[int, ...]]:
    """The first ``count`` of every order, shuffled (the identity first, if included)."""
    every = list(itertools.permutations(identity))
    rng.shuffle(every)
    if include_identity:
        every.remove(identity)
        every.insert(0, identity)
    return every[:count]


def _drawn(
    identity: tuple[int, ...], count: int, rng: random.Random, include_identity: bool
) -> list[tuple[int, ...]]:
    """``count`` uniform draws, a repeated one drawn again (the identity first, if included)."""
    perms: list[tuple[int, ...]] = [identity] if include_identity and count else []
    seen = set(perms)
    while len(perms) < count:
        order = list(identity)
        rng.shuffle(order)
        if (drawn := tuple(order)) not in seen:
            seen.add(drawn)
            perms.append(drawn)
    return perms


def _check_permutation(permutation: Sequence[int]) -> None:
    if sorted(permutation) != list(range(len(permutation))):
        raise InvalidRankingError(
            f"not a permutation of 0..{len(permutation) - 1}: {list(permutation)}; "
            "pass the order exactly as it was shown to the model"
        )


def cut_blocks(order: Sequence[int], size: int) -> list[tuple[int, ...]]:
    """``order`` cut into the fewest blocks of at most ``size`` items, as equal as can be.

    >>> cut_blocks(range(10), 4)
    [(0, 1, 2, 3), (4, 5, 6), (7, 8, 9)]
    """
    order = list(order)
    count = max(1, -(-len(order) // size))
    base, extra = divmod(len(order), count)
    blocks, at = [], 0
    for b in range(count):
        width = base + (b < extra)
        blocks.append(tuple(order[at : at + width]))
        at += width
    return blocks


def to_original(positions: Sequence[int], permutation: Sequence[int]) -> tuple[int, ...]:
    """Map a ranking in prompt ``positions`` (0-based) to original item indices.

    ``permutation[p]`` is the original item shown at position ``p``; partial rankings stay
    partial.

    >>> to_original([1, 0], [2, 0, 1])
    (0, 2)
    """
    _check_permutation(permutation)
    n = len(permutation)
    bad = [p for p in positions if not 0 <= p < n]
    if bad:
        raise InvalidRankingError(
            f"prompt positions {bad} are outside 0..{n - 1}; parse the answer with "
            "n_items equal to the number of items shown"
        )
    return tuple(permutation[p] for p in positions)


def invert(permutation: Sequence[int]) -> tuple[int, ...]:
    """The inverse permutation: ``invert(perm)[item]`` is the prompt position of ``item``.

    >>> invert((2, 0, 1))
    (1, 2, 0)
    """
    _check_permutation(permutation)
    inverse = [0] * len(permutation)
    for position, item in enumerate(permutation):
        inverse[item] = position
    return tuple(inverse)
