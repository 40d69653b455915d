"""Ranking metrics: Kendall tau and distance (partial rankings), nDCG@k, consensus confidence.

Rankings are sequences of item ids, best first, possibly partial; the Kendall measures
use only the pairs both rankings contain.

Example:
    >>> round(kendall_tau([0, 1, 2, 3], [0, 1, 3, 2]), 4)
    0.6667
    >>> kendall_distance([0, 1, 2], [2, 1])
    1
    >>> round(ndcg_at_k(["a", "b"], {"b": 2, "c": 1}, k=10), 4)
    0.4796
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from permsc_integrations.errors import InvalidRankingError

__all__ = ["kendall_tau", "ndcg_at_k", "mean_ndcg_at_k"]


def _common_positions(
    a: Sequence[Hashable], b: Sequence[Hashable]
) -> tuple[np.ndarray, np.ndarray]:
    for name, r in (("a", a), ("b", b)):
        if len(set(r)) != len(r):
            raise InvalidRankingError(f"ranking {name} lists an item twice: {list(r)}")
    pos_b = {item: i for i, item in enumerate(b)}
    pairs = [(i, pos_b[item]) for i, item in enumerate(a) if item in pos_b]
    arr = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _concordance(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[int, int]:
    """(discordant, total) over the pairs of items both rankings contain."""
    pa, pb = _common_positions(a, b)
    k = len(pa)
    if k < 2:
        return 0, 0
    iu, ju = np.triu_indices(k, 1)
    disc = int(((pa[iu] - pa[ju]) * (pb[iu] - pb[ju]) < 0).sum())
    return disc, len(iu)


def kendall_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Number of pairs (both in ``a`` and ``b``) that the two rankings order differently."""
    return _concordance(a, b)[0]


def kendall_tau(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Kendall tau over the shared pairs, in [-1, 1]; ``nan`` when fewer than two are shared."""
    disc, total = _concordance(a, b)
    return float("nan") if total == 0 else 1.0 - 2.0 * disc / total


def consensus_confidence(rankings: Sequence[Sequence[int]], consensus: Sequence[int]) -> float:
    """Mean Kendall tau of each sample to the consensus, in [-1, 1].

    Samples sharing fewer than two items with the consensus carry no pairwise information
    and are skipped; with none left the answer is 1.0 for at most one item, else 0.0.

    >>> round(consensus_confidence([[0, 1, 2], [0, 2, 1]], [0, 1, 2]), 4)
    0.6667
    """
    taus = [t for r in rankings if not math.isnan(t := kendall_tau(r, consensus))]
    if not taus:
        return 1.0 if len(consensus) <= 1 else 0.0
    return float(sum(taus) / len(taus))


def ndcg_at_k(
    ranked_docids: Sequence[str], qrels_for_query: Mapping[str, int], k: int = 10
) -> float:
    """nDCG@k as trec_eval computes it: gain = grade, discount 1/log2(rank + 1), ideal
    from all judged documents of the query; unjudged documents gain 0."""
    dcg = sum(qrels_for_query.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked_docids[:k]))
    ideal = sorted((g for g in qrels_for_query.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def mean_ndcg_at_k(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], k: int = 10
) -> float:
    """Mean nDCG@k over the judged queries (a judged query missing from ``run`` scores 0).

    >>> mean_ndcg_at_k({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"b": 1}})
    0.5
    """
    if not qrels:
        raise InvalidRankingError("no judged queries: qrels is empty")
    return sum(ndcg_at_k(run.get(q, ()), judged, k) for q, judged in qrels.items()) / len(qrels)
