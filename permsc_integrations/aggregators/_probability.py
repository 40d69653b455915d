"""Aggregators over first-token probabilities: each item's mean (log) probability.

In first-token scoring (``scoring="first_token"``) every sample gives each item it showed a
probability: its label's share of the answer's first token, renormalised over the labels of
that prompt. Averaging an item's probability over the shuffles marginalises over the
positions it was shown at, which is what PSC's shuffles are for; the rank aggregators see only
each sample's order and throw the margins away.

- ``mean_probability``: the mean of an item's probabilities over the samples that showed it;
  its score is that mean, in [0, 1] (with every item in every sample of a window of ``n``,
  the scores sum to 1 and ``1 / n`` is chance).
- ``mean_log_probability``: the mean of their logs (a geometric mean, floored at 1e-9): one
  confident shuffle weighs less, one near-zero weighs more; its score is the geometric mean,
  in [0, 1].

Both need the probabilities (``probabilities=``: per ranking, ``{item: probability}``); the
engine passes them in first-token mode and a generated ranking has none (ConfigurationError).
Ties break by item index; an item no sample showed goes last.

Example:
    >>> probs = [{0: 0.2, 1: 0.5, 2: 0.3}, {0: 0.6, 1: 0.3, 2: 0.1}]
    >>> mean_probability([[1, 2, 0], [0, 1, 2]], n_items=3, probabilities=probs)
    [0, 1, 2]
    >>> [round(s, 2) for s in mean_probability.item_scores(probs, n_items=3)]
    [0.4, 0.4, 0.2]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from permsc_integrations.errors import ConfigurationError

__all__ = ["mean_probability", "mean_log_probability", "FLOOR"]

FLOOR = 1e-9
"""The smallest probability a log is taken of."""

Probabilities = Sequence[Mapping[int, float]]


def _means(
    probabilities: Probabilities | None, n_items: int, transform: Callable[[float], float]
) -> list[float | None]:
    if probabilities is None:
        raise ConfigurationError(
            "this aggregator reads first-token probabilities: use it with scoring='first_token'"
        )
    total, seen = [0.0] * n_items, [0] * n_items
    for sample in probabilities:
        for item, p in sample.items():
            total[item] += transform(p)
            seen[item] += 1
    return [total[i] / seen[i] if seen[i] else None for i in range(n_items)]


def _order(scores: Sequence[float | None]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))


class _ProbabilityAggregator:
    """An aggregator callable with ``item_scores`` (the result's relevance scores)."""

    uses_probabilities = True

    def __init__(
        self, name: str, transform: Callable[[float], float], back: Callable[[float], float]
    ):
        self.__name__ = name
        self._transform, self._back = transform, back

    def item_scores(self, probabilities: Probabilities | None, *, n_items: int) -> list[float]:
        """Each item's score in [0, 1] (0 for an item no sample showed)."""
        means = _means(probabilities, n_items, self._transform)
        return [0.0 if m is None else self._back(m) for m in means]

    def __call__(
        self,
        rankings: Sequence[Sequence[int]],
        *,
        n_items: int,
        probabilities: Probabilities | None = None,
        **_: object,
    ) -> list[int]:
        if probabilities is not None and len(probabilities) != len(rankings):
            raise ConfigurationError(
                f"{len(probabilities)} probability maps for {len(rankings)} rankings"
            )
        return _order(_means(probabilities, n_items, self._transform))

    def __repr__(self) -> str:
        return f"<aggregator {self.__name__}>"


mean_probability = _ProbabilityAggregator("mean_probability", float, float)
mean_log_probability = _ProbabilityAggregator(
    "mean_log_probability", lambda p: math.log(max(p, FLOOR)), math.exp
)
