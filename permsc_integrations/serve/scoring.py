"""``relevance_score`` from a PSC result, and documents cut to ``max_tokens_per_doc``.

Two scales (:data:`SCALES`, a model's ``relevance_score`` setting; docs/scores.md): the
pairwise win share (the default) and, opted in, ``top_probability``: each document's
probability of the top k under the list model of every answer
(``RankingResult.top_probability``, calibrated on the simulated judge: docs/benchmarks.md
"calibration"), likewise made non-increasing along the order.

A document's win share is the share of its pairwise comparisons it won: over every successful
permuted sample that ranked it, the fraction of the other documents of that sample placed
below it, averaged. 1.0: every sample put it above everything it was shown with; 0.5: a coin
toss. Scores are then made non-increasing along the PSC (consensus) order, each lowered to
the one before it where needed, so sorting by score never contradicts the consensus (a
document outvoted pairwise can still stand higher in the Kemeny ranking; it then ties).

Example:
    >>> from permsc_integrations import RankingResult, Sample, WindowResult
    >>> from permsc_integrations.results import ParseStatus
    >>> samples = tuple(Sample((0, 1, 2), r, "", ParseStatus.OK) for r in [(2, 0, 1), (2, 1, 0)])
    >>> window = WindowResult(0, (0, 1, 2), (2, 0, 1), samples, 1.0)
    >>> relevance_scores(RankingResult((2, 0, 1), (0.67, 0.33, 1.0), (window,)))
    (0.25, 0.25, 1.0)
    >>> cut_words("one two  three four", 2)
    'one two'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["relevance_scores", "top_probability_scores", "SCALES", "cut_words", "order_results"]


def _win_shares(result: Any, n: int) -> list[float | None]:
    won, seen = [0.0] * n, [0] * n
    for sample in result.samples:
        ranking = [i for i in sample.ranking if 0 <= i < n] if sample.ok else []
        k = len(ranking)
        for place, item in enumerate(ranking):
            if k > 1:
                won[item] += (k - 1 - place) / (k - 1)
                seen[item] += 1
    return [won[i] / seen[i] if seen[i] else None for i in range(n)]


def relevance_scores(result: Any, digits: int = 4) -> tuple[float, ...]:
    """One score in [0, 1] per item (indexed like the items), non-increasing along
    ``result.order``; an item no sample compared (a single item) scores as its neighbour
    above it, or 1.0 at the top."""
    return _along(result.order, _win_shares(result, len(result.order)), digits)


def top_probability_scores(result: Any, digits: int = 4) -> tuple[float, ...]:
    """Each item's ``result.top_probability`` (its chance of the top k), non-increasing along
    ``result.order``; a result without one (no k: see docs/scores.md) scores 0.

    >>> from permsc_integrations import RankingResult
    >>> top_probability_scores(RankingResult((1, 0, 2), (), top_probability=(0.5, 0.9, 0.6)))
    (0.5, 0.9, 0.5)
    """
    chances = result.top_probability or (0.0,) * len(result.order)
    return _along(result.order, list(chances), digits)


def _along(order: Sequence[int], values: Sequence[float | None], digits: int) -> tuple[float, ...]:
    """``values`` rounded, each lowered to the one above it along ``order`` where higher (a
    missing one takes the one above it, 1.0 at the top)."""
    scores = [0.0] * len(order)
    ceiling = 1.0
    for item in order:
        value = values[item]
        ceiling = min(ceiling, round(value if value is not None else ceiling, digits))
        scores[item] = ceiling
    return tuple(scores)


SCALES: dict[str, Callable[[Any], tuple[float, ...]]] = {
    "win_share": relevance_scores,
    "top_probability": top_probability_scores,
}
"""A served model's ``relevance_score`` scale, by its name in the configuration."""


def cut_words(text: str, limit: int | None) -> str:
    """``text`` cut to its first ``limit`` whitespace-separated words (unchanged if shorter
    or ``limit`` is None)."""
    if limit is None:
        return text
    words = text.split(maxsplit=min(limit, len(text)))  # a huge limit overflows maxsplit
    return text if len(words) <= limit else " ".join(words[:limit])


def order_results(
    order: Sequence[int], scores: Sequence[float], top_n: int | None
) -> list[tuple[int, float]]:
    """``(index, score)`` pairs, best first, cut to ``top_n``."""
    chosen = order if top_n is None else order[:top_n]
    return [(i, scores[i]) for i in chosen]
