"""Borda count with partial-ranking semantics: an item scores one point per item it beats.

In a ranking of length ``L`` the item at 0-based position ``r`` beats the ``L - 1 - r``
items listed after it; absent items score nothing there. On full rankings this is the
classic Borda count. Ties break by item index; items absent everywhere go last.

Example:
    >>> borda([[0, 1, 2], [1, 0, 2], [1, 2, 0]], n_items=3)
    [1, 0, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["borda", "borda_scores"]


def borda_scores(rankings: Sequence[Sequence[int]], n_items: int) -> np.ndarray:
    """Points per item: the number of (ranking, item) pairs it is listed ahead of."""
    scores = np.zeros(n_items, dtype=np.int64)
    for r in rankings:
        if r:
            scores[np.asarray(r, dtype=np.intp)] += np.arange(len(r) - 1, -1, -1)
    return scores


def borda(rankings: Sequence[Sequence[int]], *, n_items: int, **_: Any) -> list[int]:
    """Items by Borda points, best first; ties by index, absent items last."""
    scores = borda_scores(rankings, n_items).astype(float)
    seen = np.zeros(n_items, dtype=bool)
    for r in rankings:
        seen[np.asarray(r, dtype=np.intp)] = True
    scores[~seen] = -np.inf
    return np.argsort(-scores, kind="stable").tolist()
