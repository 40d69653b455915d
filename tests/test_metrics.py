"""Metrics against independent implementations: scipy's Kendall tau, trec_eval's nDCG."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from permsc_integrations.errors import InvalidRankingError
from permsc_integrations.metrics import (
    consensus_confidence,
    kendall_distance,
    kendall_tau,
    mean_ndcg_at_k,
    ndcg_at_k,
)

scipy_stats = pytest.importorskip("scipy.stats")


def _ranks(order: list[int]) -> list[int]:
    ranks = [0] * len(order)
    for pos, item in enumerate(order):
        ranks[item] = pos
    return ranks


@settings(max_examples=100, deadline=None)
@given(
    st.integers(2, 15).flatmap(
        lambda n: st.tuples(st.permutations(range(n)), st.permutations(range(n)))
    )
)
def test_kendall_tau_matches_scipy_on_full_rankings(pair: tuple[list[int], list[int]]) -> None:
    a, b = list(pair[0]), list(pair[1])
    expected = scipy_stats.kendalltau(_ranks(a), _ranks(b)).statistic
    assert kendall_tau(a, b) == pytest.approx(expected)
    n = len(a)
    assert kendall_distance(a, b) == round((1 - expected) * n * (n - 1) / 4)


@settings(max_examples=100, deadline=None)
@given(
    st.permutations(range(10)), st.permutations(range(10)), st.integers(0, 10), st.integers(0, 10)
)
def test_partial_rankings_use_only_shared_pairs(
    a: list[int], b: list[int], ka: int, kb: int
) -> None:
    pa, pb = list(a[:ka]), list(b[:kb])
    shared = [i for i in pa if i in pb]
    restricted_b = [i for i in pb if i in shared]
    assert kendall_distance(pa, pb) == kendall_distance(shared, restricted_b)
    tau = kendall_tau(pa, pb)
    assert math.isnan(tau) if len(shared) < 2 else -1.0 <= tau <= 1.0


def test_kendall_works_on_string_ids_and_rejects_duplicates() -> None:
    assert kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1.0
    with pytest.raises(InvalidRankingError, match="twice"):
        kendall_distance(["a", "a"], ["a"])


def test_consensus_confidence_is_the_mean_tau_to_the_consensus() -> None:
    samples = [[0, 1, 2, 3], [1, 0, 2, 3], [3], [3, 2, 1, 0]]
    taus = [kendall_tau(s, [0, 1, 2, 3]) for s in (samples[0], samples[1], samples[3])]
    assert consensus_confidence(samples, [0, 1, 2, 3]) == pytest.approx(sum(taus) / 3)
    assert consensus_confidence([[0, 1, 2]] * 4, [0, 1, 2]) == 1.0
    assert consensus_confidence([[1]], [0, 1]) == 0.0  # no pairwise information at all
    assert consensus_confidence([[0]], [0]) == 1.0


def test_ndcg_follows_trec_eval_definition() -> None:
    qrels = {"d1": 3, "d2": 0, "d3": 1, "d9": 2}  # d9 judged but never retrieved
    ranked = ["d2", "d1", "dx", "d3"]
    dcg = 3 / math.log2(3) + 1 / math.log2(5)
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(ranked, qrels, k=10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(ranked, qrels, k=1) == 0.0
    assert ndcg_at_k(ranked, {"d2": 0}) == 0.0  # nothing relevant: 0, as trec_eval reports


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_ndcg_matches_pytrec_eval(data: st.DataObject) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = {}, {}
    for q in range(data.draw(st.integers(1, 4))):
        docs = [f"d{i}" for i in range(data.draw(st.integers(1, 25)))]
        grades = data.draw(st.lists(st.integers(0, 3), min_size=len(docs), max_size=len(docs)))
        qrels[f"q{q}"] = dict(zip(docs, grades, strict=True))
        ranked = data.draw(st.permutations(docs + ["u1", "u2"]))
        run[f"q{q}"] = list(ranked)
    scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    ref = evaluator.evaluate(scored)
    for q in qrels:
        assert ndcg_at_k(run[q], qrels[q], 10) == pytest.approx(ref[q]["ndcg_cut_10"], abs=1e-9)
    assert mean_ndcg_at_k(run, qrels) == pytest.approx(
        sum(ref[q]["ndcg_cut_10"] for q in qrels) / len(qrels), abs=1e-9
    )


def test_mean_ndcg_counts_missing_queries_as_zero_and_rejects_empty_qrels() -> None:
    assert mean_ndcg_at_k({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"b": 2}}) == 0.5
    with pytest.raises(InvalidRankingError):
        mean_ndcg_at_k({}, {})
