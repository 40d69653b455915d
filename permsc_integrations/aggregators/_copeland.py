"""Copeland: pairwise majority wins (half a point per tie), as a share of the items met.

A pair counts only in the rankings where both items appear; a pair that never appears
together is no contest. The score is ``(wins + ties / 2) / opponents met``, so on partial
rankings an item is not rewarded for meeting more opponents; on full rankings everyone
meets everyone and the order is classic Copeland's. An item that met nobody scores 1/2;
items absent everywhere go last. Ties break by item index.

Example:
    >>> copeland([[0, 1, 2], [1, 2, 0], [2, 0, 1]], n_items=3)
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from permsc_integrations.aggregators._pairwise import listed, pairwise_counts

__all__ = ["copeland", "copeland_scores"]


def copeland_scores(W: np.ndarray) -> np.ndarray:
    """Wins plus half the ties over opponents met (1/2 if none), from pairwise counts ``W``."""
    met = (W + W.T) > 0
    points = ((W > W.T) & met).sum(1) + 0.5 * ((W == W.T) & met).sum(1)
    games = met.sum(1)
    return np.divide(points, games, out=np.full(W.shape[0], 0.5), where=games > 0)


def copeland(rankings: Sequence[Sequence[int]], *, n_items: int, **_: object) -> list[int]:
    """Items by Copeland score, best first; ties by index, absent items last."""
    W = pairwise_counts(rankings, n_items)
    scores = copeland_scores(W)
    scores[~listed(rankings, W)] = -np.inf
    return np.argsort(-scores, kind="stable").tolist()
