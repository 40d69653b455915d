"""When to stop: the top k (or the whole order) certified up to an indifference zone.

The posterior of the list model (:class:`~.model.ListFit`) orders
the items by their mean utility. A pair of neighbours ``(a, b)`` in that order is *settled*
when, with probability at least ``confidence``, ``a`` is not worse than ``b`` by more than
the zone: ``P(u_a - u_b > -zone) >= confidence``. The zone is a share of a spread of the
utilities, so it means the same for a sharp model and a noisy one: pairs whose difference
is small next to how much the items that matter differ are near even, and graded relevance
makes many of them (equal grades). With ``top_k``, the items that matter are the contenders
near the k-th place (the top ``2k`` by posterior mean, at least :data:`CONTENDERS`): their
spread, never wider than the whole list's (``tau``, which the model fits), where the
posterior resolves it (:data:`RESOLVED`; a tie cluster at the top, or the first rounds'
vague posterior, keeps the whole list's spread). On a list graded 0-10 the whole list's
spread is many grades wide, and a zone scaled to it settled neighbouring grades at the cut
as ties (issue 39; docs/benchmarks.md "fine-grades"). Without ``top_k``, the whole list's
spread. A settled pair that the posterior does not order at the confidence
(``P(u_a > u_b) < confidence``) is a *tie*; the result says which. With ``top_k``, only the
pairs inside the top k and the one across the cut count (the order of the tail is ignored);
without it, every neighbour pair.

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

from permsc_integrations.strategies._frontier.model import ListFit
from permsc_integrations.strategies._levels import CONFIDENCE, ZONE

__all__ = ["CONTENDERS", "RESOLVED", "zone_width", "unsettled", "ties"]

CONTENDERS = 10  # with top_k: the spread of the top max(2k, CONTENDERS) sets the zone (untuned)
RESOLVED = 1.5  # ... where it is this many of their posterior sds: benchmarks/fine_grades.py


def _pairs(fit: ListFit, top_k: int | None) -> list[tuple[int, int]]:
    order = fit.order()
    end = len(order) - 1 if top_k is None else min(top_k, len(order) - 1)
    return [(order[r], order[r + 1]) for r in range(end)]


def zone_width(fit: ListFit, *, top_k: int | None = None, zone: float = ZONE) -> float:
    """The indifference zone in utility units: ``zone`` times the spread (sd) of the
    contenders' posterior means (the top ``max(2 top_k, CONTENDERS)``), at most ``zone``
    times the whole list's ``tau``; where that spread is under :data:`RESOLVED` of their
    posterior sds (a tie cluster, or too little evidence yet: nothing resolved near the cut)
    and without ``top_k``, ``zone * tau``.

    >>> import numpy as np
    >>> from permsc_integrations.strategies._frontier.model import ListFit
    >>> def fit(means, sd):
    ...     n = len(means)
    ...     return ListFit(np.array(means), np.eye(n) * sd**2, np.zeros(4), 0.0, 1.0,
    ...                    np.ones(n, dtype=bool))
    >>> fine = fit(np.arange(40.0)[::-1] / 10, 0.1)  # a step a place, resolved
    >>> round(zone_width(fine), 3), round(zone_width(fine, top_k=5), 3)
    (0.5, 0.144)
    >>> round(zone_width(fit(np.arange(40.0)[::-1] / 10, 1.0), top_k=5), 3)  # unresolved
    0.5
    """
    if top_k is None:
        return zone * fit.tau
    top = np.argsort(-fit.mean, kind="stable")[: max(2 * top_k, CONTENDERS)]
    spread = float(np.std(fit.mean[top]))
    noise = float(np.sqrt(np.mean(np.diag(fit.cov)[top])))
    if spread < RESOLVED * noise:  # a tie cluster: nothing near the cut to resolve
        return zone * fit.tau
    return zone * min(fit.tau, spread)


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
    margin = -zone_width(fit, top_k=top_k, zone=zone)
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
