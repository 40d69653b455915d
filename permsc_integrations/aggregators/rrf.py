"""Reciprocal rank fusion, the paper's formula: ``score(d) = sum_samples 1 / (k + rank)``.

``rank`` is 1-based and ``k = 60``; a ranking that omits ``d`` adds nothing. Ties break by
item index; items absent everywhere (score 0) go last.

Example:
    >>> rrf([[0, 1, 2], [1, 0, 2], [1, 2, 0]], n_items=3)
    [1, 0, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigurationError

__all__ = ["rrf", "rrf_scores"]


def rrf_scores(rankings: Sequence[Sequence[int]], n_items: int, k: float = 60.0) -> np.ndarray:
    """Summed reciprocal-rank scores per item."""
    if k < 0:
        raise ConfigurationError(f"rrf k must be >= 0, got {k}")
    scores = np.zeros(n_items)
    for r in rankings:
        if r:
            scores[np.asarray(r, dtype=np.intp)] += 1.0 / (k + np.arange(1, len(r) + 1))
    return scores


def rrf(rankings: Sequence[Sequence[int]], *, n_items: int, k: float = 60.0, **_: Any) -> list[int]:
    """Items by RRF score, best first (``k`` defaults to 60 as in the paper)."""
    return np.argsort(-rrf_scores(rankings, n_items, k), kind="stable").tolist()
