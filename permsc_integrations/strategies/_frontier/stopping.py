"""When to stop: the top k (or the whole order) certified up to an indifference zone.

The posterior of the list model (:class:`~.model.ListFit`) orders
the items by their mean utility. A pair of neighbours ``(a, b)`` in that order is *settled*
when, with probability at least ``confidence``, ``a`` is not worse than ``b`` by more than
the zone: ``P(u_a - u_b > -zone) >= confidence``. The zone is a share of the utilities'
spread (``tau``, which the model fits), so it means the same for a sharp model and a noisy
one: pairs whose difference is small next to how much the list's items differ are near even,
and graded relevance makes many of them (equal grades). A settled pair that the posterior
does not order at the confidence (``P(u_a > u_b) < confidence``) is a *tie*; the result says
which. With ``top_k``, only the pairs inside the top k and the one across the cut count (the
order of the tail is ignored); without it, every neighbour pair.

Example:
    >>> import numpy as np
    >>> from permsc_integrations.strategies._frontier.model import ListFit
    >>> fit = ListFit(np.array([3.0, 1.0, 0.9, 0.0]), np.eye(4) * 0.01, np.zeros(4), 0.0, 1.0,
    ...               np.ones(4, dtype=bool))
    >>> unsettled(fit, top_k=2), ties(fit, top_k=3)
    ([], [(1, 2)])
"""

from __future__ import annotations

import numpy as np

from permsc_integrations.strategies._adaptive import CONFIDENCE
from permsc_integrations.strategies._frontier.model import ListFit

__all__ = ["ZONE", "CONFIDENCE", "unsettled", "ties"]

ZONE = 0.5  # the indifference zone, a share of the utilities' spread (benchmarks/frontier_sim.py)


def _pairs(fit: ListFit, top_k: int | None) -> list[tuple[int, int]]:
    order = fit.order()
    end = len(order) - 1 if top_k is None else min(top_k, len(order) - 1)
    return [(order[r], order[r + 1]) for r in range(end)]


def unsettled(
    fit: ListFit,
    *,
    top_k: int | None = None,
    zone: float = ZONE,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> list[tuple[int, int]]:
    """The neighbour pairs (of the top ``top_k`` and across its cut, or all) not yet
    settled: nothing left means stop."""
    draws = fit.draws(seed=seed)
    margin = -zone * fit.tau
    return [
        (a, b)
        for a, b in _pairs(fit, top_k)
        if np.mean(draws[:, a] - draws[:, b] > margin) < confidence
    ]


def ties(
    fit: ListFit, *, top_k: int | None = None, confidence: float = CONFIDENCE, seed: int = 0
) -> list[tuple[int, int]]:
    """The neighbour pairs inside the top ``top_k`` (or all) whose order the posterior does
    not establish at ``confidence``: near even, settled as ties (when :func:`unsettled` has
    nothing left)."""
    draws = fit.draws(seed=seed)
    inside = _pairs(fit, None if top_k is None else max(top_k - 1, 0))
    return [(a, b) for a, b in inside if np.mean(draws[:, a] > draws[:, b]) < confidence]
