"""Reciprocal rank fusion with partial-ranking semantics: ``1 / (k + rank)``, averaged over
the rankings an item appears in.

``rank`` is 1-based and ``k = 60`` (the paper's formula). A partial ranking of ``L`` of ``n``
items spreads its ranks over ``1..n`` (the ``j``-th of ``L`` gets rank
``1 + (j - 1) (n - 1) / (L - 1)``; a lone item is rank 1), and an item is scored by the mean
over the rankings that list it: a ranking that leaves an item out says nothing about it. On
full rankings this is the classic RRF order. (Summing instead, with omitted items adding 0,
collapses into counting how often an item is listed: on a 1.5B model's WordSort answers,
most of them partial, that fell *below* a single answer; docs/aggregation.md.) Ties break by
item index; items absent everywhere go last.

Example:
    >>> rrf([[0, 1, 2], [1, 0, 2], [1, 2, 0]], n_items=3)
    [1, 0, 2]
    >>> rrf([[2, 0], [1, 0, 2]], n_items=3)  # item 1 is listed once, first
    [1, 2, 0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from permsc_integrations.errors import ConfigurationError

__all__ = ["rrf", "rrf_scores", "spread_ranks"]


def spread_ranks(length: int, n_items: int) -> np.ndarray:
    """The 1-based ranks, on the scale of ``n_items``, of a ranking of ``length`` items.

    >>> spread_ranks(3, 5).tolist()
    [1.0, 3.0, 5.0]
    """
    if length <= 1:
        return np.ones(length)
    return 1.0 + np.arange(length) * (n_items - 1) / (length - 1)


def rrf_scores(rankings: Sequence[Sequence[int]], n_items: int, k: float = 60.0) -> np.ndarray:
    """Mean reciprocal-rank score per item over the rankings that list it (-inf if none)."""
    if k < 0:
        raise ConfigurationError(f"rrf k must be >= 0, got {k}")
    total, seen = np.zeros(n_items), np.zeros(n_items)
    for r in rankings:
        if r:
            items = np.asarray(r, dtype=np.intp)
            total[items] += 1.0 / (k + spread_ranks(len(r), n_items))
            seen[items] += 1
    return np.where(seen > 0, total / np.maximum(seen, 1), -np.inf)


def rrf(
    rankings: Sequence[Sequence[int]], *, n_items: int, k: float = 60.0, **_: object
) -> list[int]:
    """Items by RRF score, best first (``k`` defaults to 60 as in the paper)."""
    # rounded: equal scores reached through different sums must tie (then: by index)
    return np.argsort(-np.round(rrf_scores(rankings, n_items, k), 12), kind="stable").tolist()
