"""Reciprocal rank fusion, the paper's formula, averaged over the rankings that list an item.

``score(d) = mean over the rankings listing d of 1 / (k + rank)``, ``rank`` 1-based and
``k = 60``. On full rankings (every item in every ranking) this orders items exactly as the
paper's sum does. On partial rankings the mean keeps RRF about *where* an item is listed:
with the sum, being listed often outweighs being listed high (with ``k = 60`` two entries at
rank 20 beat one at rank 1). A ranking that omits ``d`` says nothing about it. Ties break by
item index; items absent everywhere go last.

Example:
    >>> rrf([[0, 1, 2], [1, 0, 2], [1, 2, 0]], n_items=3)
    [1, 0, 2]
    >>> rrf([[3, 0], [0, 1, 2], [0, 1, 2]], n_items=4)  # 3 is listed once, first
    [3, 0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigurationError

__all__ = ["rrf", "rrf_scores"]


def rrf_scores(rankings: Sequence[Sequence[int]], n_items: int, k: float = 60.0) -> np.ndarray:
    """Mean reciprocal-rank score per item over the rankings that list it (0 if none)."""
    if k < 0:
        raise ConfigurationError(f"rrf k must be >= 0, got {k}")
    total = np.zeros(n_items)
    count = np.zeros(n_items)
    for r in rankings:
        if r:
            idx = np.asarray(r, dtype=np.intp)
            total[idx] += 1.0 / (k + np.arange(1, len(r) + 1))
            count[idx] += 1
    return np.divide(total, count, out=np.zeros(n_items), where=count > 0)


def rrf(rankings: Sequence[Sequence[int]], *, n_items: int, k: float = 60.0, **_: Any) -> list[int]:
    """Items by RRF score, best first (``k`` defaults to 60 as in the paper)."""
    scores = rrf_scores(rankings, n_items, k)
    if k == 0:  # 1 / (0 + rank) is never 0: keep absent items last all the same
        scores[scores == 0] = -np.inf
    return np.argsort(-scores, kind="stable").tolist()
