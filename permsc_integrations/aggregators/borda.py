"""Borda count for partial rankings: the share of its pairwise comparisons an item wins.

In each ranking an item beats the items listed after it and loses to those listed before
it; an item missing from a ranking takes no part in it (no guessed position). The score is
``wins / (wins + losses)`` over all rankings, so an item is not rewarded for being listed
more often or in longer lists. On full rankings every item has the same number of
comparisons and the order is the classic Borda count's. An item listed but never compared
(alone in every ranking that lists it) scores 1/2; items absent everywhere go last. Ties
break by item index.

Example:
    >>> borda([[0, 1, 2], [1, 0, 2], [1, 2, 0]], n_items=3)
    [1, 0, 2]
    >>> borda([[3, 0, 1], [0, 1], [0, 1], [0, 1]], n_items=4)  # 3 is listed once, first
    [3, 0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._pairwise import listed

__all__ = ["borda", "borda_scores"]


def borda_scores(rankings: Sequence[Sequence[int]], n_items: int) -> np.ndarray:
    """Per item, the share of its comparisons it wins (1/2 with none)."""
    wins = np.zeros(n_items)
    games = np.zeros(n_items)
    for r in rankings:
        if len(r) > 1:
            idx = np.asarray(r, dtype=np.intp)
            wins[idx] += np.arange(len(r) - 1, -1, -1)
            games[idx] += len(r) - 1
    return np.divide(wins, games, out=np.full(n_items, 0.5), where=games > 0)


def borda(rankings: Sequence[Sequence[int]], *, n_items: int, **_: Any) -> list[int]:
    """Items by Borda score, best first; ties by index, absent items last."""
    scores = borda_scores(rankings, n_items)
    scores[~listed(rankings, n_items)] = -np.inf
    return np.argsort(-scores, kind="stable").tolist()
