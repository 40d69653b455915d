"""``relevance_score`` from a PSC result, and documents cut to ``max_tokens_per_doc``.

Two scales (:data:`SCALES`, a model's ``relevance_score`` setting; docs/scores.md): the
pairwise win share (the default) and, opted in, ``top_probability``: each document's
probability of the top k under the list model of every answer
(``RankingResult.top_probability``, calibrated on the simulated judge: docs/benchmarks.md
"calibration"), made strictly decreasing along the order (no two tie). A document the model
never saw (:func:`shown`) scores 0 on either scale (a few 1e-5 on the second) and is marked
``shown: false`` in the answers (docs/scores.md).

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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from permsc_integrations.results import RankingResult

__all__ = [
    "relevance_scores",
    "top_probability_scores",
    "shown",
    "SCALES",
    "cut_words",
    "order_results",
    "Scored",
    "score_documents",
]


def _win_shares(result: RankingResult, n: int) -> list[float | None]:
    won, seen = [0.0] * n, [0] * n
    for sample in result.samples:
        ranking = [i for i in sample.ranking if 0 <= i < n] if sample.ok else []
        k = len(ranking)
        for place, item in enumerate(ranking):
            if k > 1:
                won[item] += (k - 1 - place) / (k - 1)
                seen[item] += 1
    return [won[i] / seen[i] if seen[i] else None for i in range(n)]


def shown(result: RankingResult) -> tuple[bool, ...]:
    """Per item: was it ever shown to the model? Not the items past ``result.head`` (a
    ``max_calls`` below one pass ranks the first ``head``; the rest follow in the order
    sent), nor those whose ``top_probability`` is None (never in a prompt).

    >>> from permsc_integrations import RankingResult
    >>> shown(RankingResult((1, 0, 2), (), head=2))
    (True, True, False)
    """
    n = len(result.order)
    head = result.head if isinstance(result.head, int) else n
    chances = result.top_probability or (0.0,) * n
    return tuple(k < head and chances[k] is not None for k in range(n))


def relevance_scores(result: RankingResult, digits: int = 4) -> tuple[float, ...]:
    """One score in [0, 1] per item (indexed like the items), non-increasing along
    ``result.order``; an item no sample compared (a single item) scores as its neighbour
    above it, or 1.0 at the top; an item never shown to the model (:func:`shown`) 0.0."""
    shares = _win_shares(result, len(result.order))
    seen = shown(result)
    return _along(result.order, [v if seen[i] else 0.0 for i, v in enumerate(shares)], digits)


def top_probability_scores(result: RankingResult, digits: int = 4) -> tuple[float, ...]:
    """Each item's ``result.top_probability`` (its chance of the top k), made strictly
    decreasing along ``result.order``: rounded to ``digits``, lowered to the one above where
    higher, then blended 1e-4 with the rank score, so that no two tie (the top k, all near
    1.0, among them) and each moves by less than 1e-4. An item never shown to the model
    (:func:`shown`), or every item of a result without a k (docs/scores.md), starts at 0.

    >>> from permsc_integrations import RankingResult
    >>> top_probability_scores(RankingResult((1, 0, 2), (), top_probability=(1.0, 1.0, 0.6)))
    (0.9999667, 1.0, 0.5999733)
    """
    n = len(result.order)
    seen = shown(result)
    chances = result.top_probability or (0.0,) * n
    values = [chances[i] if seen[i] and chances[i] is not None else 0.0 for i in range(n)]
    along = _along(result.order, values, digits)
    scores, fine = [0.0] * n, digits + 2 + math.ceil(math.log10(max(n, 2)))  # 1% of a step
    for rank, item in enumerate(result.order):
        scores[item] = round((1 - _TIE) * along[item] + _TIE * (n - rank) / n, fine)
    return tuple(scores)


_TIE = 1e-4  # the rank score's share in top_probability_scores: breaks ties, moves < 1e-4


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


SCALES: dict[str, Callable[[RankingResult], tuple[float, ...]]] = {
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


@dataclass(frozen=True)
class Scored:
    """One document of an answer: its place in the request, its score on the model's scale,
    whether the model ever saw it, its chance of the top k (None: not known, or never shown)."""

    index: int
    relevance_score: float
    shown: bool
    top_probability: float | None


def score_documents(
    result: RankingResult,
    kept: Sequence[int],
    n: int,
    scale: Callable[[RankingResult], tuple[float, ...]],
) -> list[Scored]:
    """All ``n`` documents best first: ``result`` ranked those ``kept`` (its item ``k`` is
    document ``kept[k]``), scored on ``scale``; the others (blank ones) follow in the order
    sent, score 0, never shown.

    >>> from permsc_integrations import RankingResult
    >>> [(d.index, d.shown) for d in score_documents(RankingResult((1, 0), ()), [0, 2], 3,
    ...                                              relevance_scores)]
    [(2, True), (0, True), (1, False)]
    """
    scores, seen = scale(result), shown(result)
    chances = result.top_probability or (None,) * len(kept)
    ranked = [
        Scored(kept[k], scores[k], seen[k], chances[k] if seen[k] else None) for k in result.order
    ]
    blank = sorted(set(range(n)) - set(kept))
    return ranked + [Scored(i, 0.0, False, None) for i in blank]


def order_results(
    order: Sequence[int], scores: Sequence[float], top_n: int | None
) -> list[tuple[int, float]]:
    """``(index, score)`` pairs, best first, cut to ``top_n``."""
    chosen = order if top_n is None else order[:top_n]
    return [(i, scores[i]) for i in chosen]
