"""``relevance_score`` from a PSC result, and documents cut to ``max_tokens_per_doc``.

A document's score is the share of its pairwise comparisons it won: over every successful
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

from collections.abc import Sequence
from typing import Any

__all__ = ["relevance_scores", "cut_words", "order_results"]


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
    n = len(result.order)
    shares = _win_shares(result, n)
    scores = [0.0] * n
    ceiling = 1.0
    for item in result.order:
        share = shares[item]
        ceiling = min(ceiling, round(share if share is not None else ceiling, digits))
        scores[item] = ceiling
    return tuple(scores)


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
