"""Copeland: one point per pairwise majority win, half a point per tie.

A pair counts only in the rankings where both items appear; a pair that never appears
together scores nothing. Ties break by item index; items absent everywhere go last.

Example:
    >>> copeland([[0, 1, 2], [1, 2, 0], [2, 0, 1]], n_items=3)
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._pairwise import pairwise_counts

__all__ = ["copeland", "copeland_scores"]


def copeland_scores(W: np.ndarray) -> np.ndarray:
    """Wins plus half the ties, from the pairwise count matrix ``W``."""
    met = (W + W.T) > 0
    return (W > W.T).sum(1) + 0.5 * ((W == W.T) & met).sum(1)


def copeland(rankings: Sequence[Sequence[int]], *, n_items: int, **_: Any) -> list[int]:
    """Items by Copeland score, best first; ties by index, absent items last."""
    W = pairwise_counts(rankings, n_items)
    scores = copeland_scores(W)
    seen = np.zeros(n_items, dtype=bool)
    for r in rankings:
        seen[np.asarray(r, dtype=np.intp)] = True
    scores[~seen] = -np.inf
    return np.argsort(-scores, kind="stable").tolist()
