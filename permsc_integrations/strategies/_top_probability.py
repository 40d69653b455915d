"""Each item's chance of the top k, for a ranking whose strategy gave none (a fixed plan):
the list model (:func:`~permsc_integrations.strategies._frontier.fit_list`) fitted to the
finished samples. The ranker calls :func:`top_probability` once a request's samples are in.

Example:
    >>> from permsc_integrations.results import ParseStatus, Sample
    >>> answer = Sample((0, 1, 2), (2, 1, 0), "[3] > [2] > [1]", ParseStatus.OK)
    >>> p = top_probability((2, 1, 0), [answer] * 4, 1)
    >>> p[2] > p[1] >= p[0]
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from permsc_integrations.results import Sample
from permsc_integrations.strategies._frontier import Answer, fit_list

__all__ = ["top_probability", "along", "FIT_LIMIT"]

FIT_LIMIT = 200
"""The most items a fixed plan's list model is fitted over, for ``top_probability``: the
top ``FIT_LIMIT`` of its order, from the answers that showed only them (the items below get
0). 100 items, m = 20: 0.1-0.5 s of CPU in a worker thread (docs/benchmarks.md
"top-probability"); the fit grows with the cube of the items."""


def top_probability(
    order: Sequence[int],
    samples: Sequence[Sample],
    k: int,
    given: Sequence[float | None] = (),
) -> tuple[float | None, ...]:
    """Each item's probability of the top ``k`` (``given``: the strategy's own; else the
    list model of the good ``samples`` that showed only the top :data:`FIT_LIMIT` items of
    ``order``, 0 for the items below), ``None`` for an item no good sample showed, and
    non-increasing along ``order`` (:func:`along`)."""
    good = [s for s in samples if s.ok]
    p = given or _fitted(order, good, k)
    return along(order, p, {i for s in good for i in s.permutation})


def along(
    order: Sequence[int], p: Sequence[float | None], seen: set[int]
) -> tuple[float | None, ...]:
    """``p`` with ``None`` for the items not ``seen`` and the rest made non-increasing along
    ``order`` (pooled adjacent violators: a run that rises is replaced by its mean).

    >>> along([0, 1, 2], [0.5, 0.9, 0.1], {0, 1, 2})
    (0.7, 0.7, 0.1)
    >>> along([0, 1, 2], [0.9, 0.8, 0.1], {0, 1})
    (0.9, 0.8, None)
    """
    kept = [i for i in order if i in seen and p[i] is not None]
    pools: list[list[float]] = []  # [sum, count] of each run
    for i in kept:
        pools.append([float(p[i] or 0.0), 1.0])
        while len(pools) > 1 and pools[-2][0] * pools[-1][1] < pools[-1][0] * pools[-2][1]:
            total, count = pools.pop()
            pools[-1][0] += total
            pools[-1][1] += count
    fitted = [total / count for total, count in pools for _ in range(int(count))]
    out: list[float | None] = [None] * len(p)
    for i, value in zip(kept, fitted, strict=True):
        out[i] = value
    return tuple(out)


def _fitted(order: Sequence[int], samples: Sequence[Sample], k: int) -> tuple[float, ...]:
    """Each item's probability of the top ``k`` under the list model of the ``samples``
    that showed only the top :data:`FIT_LIMIT` items of ``order`` (their input order is the
    first stage); 0 for the items below."""
    kept = sorted(order[:FIT_LIMIT])
    at = {item: j for j, item in enumerate(kept)}
    answers = [
        Answer(tuple(at[i] for i in s.permutation), tuple(at[i] for i in s.ranking))
        for s in samples
        if all(i in at for i in s.permutation)
    ]
    p = fit_list(len(kept), answers).top_probabilities(k)
    out = [0.0] * len(order)
    for item, j in at.items():
        out[item] = float(p[j])
    return tuple(out)
