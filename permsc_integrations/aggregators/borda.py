"""Borda count with partial-ranking semantics: an item's normalised points, averaged over the
rankings that list it.

In a ranking of ``L`` items, the item at 0-based position ``r`` gets ``(L - 1 - r) / (L - 1)``
points, the share of the listed items it beats (a lone item gets 1: it was put first). An
item is scored by the mean over the rankings that list it: a ranking that leaves an item out
says nothing about it. On full rankings this is the classic Borda order. (Counting raw points
instead favours items that are listed often and in long answers; on a 1.5B model's partial
answers that lost 0.04 tau on WordSort; docs/aggregation.md.) Ties break by item index;
items absent everywhere go last.

Example:
    >>> borda([[0, 1, 2], [1, 0, 2], [1, 2, 0]], n_items=3)
    [1, 0, 2]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["borda", "borda_scores"]


def borda_scores(rankings: Sequence[Sequence[int]], n_items: int) -> np.ndarray:
    """Mean normalised points per item over the rankings that list it (-inf if none)."""
    total, seen = np.zeros(n_items), np.zeros(n_items)
    for r in rankings:
        if r:
            length = len(r)
            points = (length - 1 - np.arange(length)) / (length - 1) if length > 1 else [1.0]
            items = np.asarray(r, dtype=np.intp)
            total[items] += points
            seen[items] += 1
    return np.where(seen > 0, total / np.maximum(seen, 1), -np.inf)


def borda(rankings: Sequence[Sequence[int]], *, n_items: int, **_: object) -> list[int]:
    """Items by Borda points, best first; ties by index, absent items last."""
    # rounded: equal scores reached through different sums must tie (then: by index)
    return np.argsort(-np.round(borda_scores(rankings, n_items), 12), kind="stable").tolist()
