"""Kemeny at 100-1000 items: O(n^2) memory, every step stops at the deadline, honest bounds.

No wall-time assertions: deadlines are checked by what ran (a deadline already past leaves
the starting order untouched and the pairs bound unimproved), memory by tracemalloc.
"""

from __future__ import annotations

import importlib.util
import tracemalloc
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from permsc_integrations import aggregate
from permsc_integrations.aggregators._bounds import cycle_packing, pairs_bound
from permsc_integrations.aggregators._kemeny import kemeny_objective, kemeny_solve
from permsc_integrations.aggregators._local_search import insertion_refine
from permsc_integrations.aggregators._pairwise import (
    kendall_cost,
    majority_order,
    net_order,
    pairwise_counts,
    split_by_order,
)

has_highspy = importlib.util.find_spec("highspy") is not None
MiB = 2**20


def block_rankings(n: int, m: int, seed: int, size: int = 20, swaps: int = 2) -> list[list[int]]:
    """The "blocks" strategy's input: each of m shuffles cuts the n items into blocks of at
    most ``size``; each block comes back ranked by a hidden truth with a few local swaps."""
    rng = np.random.default_rng(seed)
    rank = rng.permutation(n)  # rank[i]: item i's place in the truth
    out = []
    for _ in range(m):
        for block in np.array_split(rng.permutation(n), -(-n // size)):
            r = sorted(block.tolist(), key=lambda i: rank[i])
            for _ in range(swaps):
                i = int(rng.integers(0, len(r)))
                j = min(len(r) - 1, i + int(rng.integers(1, 4)))
                r[i], r[j] = r[j], r[i]
            out.append(r)
    return out


def uniform(n: int, m: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.permutation(n).tolist() for _ in range(m)]


def peak_bytes(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_pairwise_counts_of_many_short_rankings_take_o_n2_memory() -> None:
    """600 blocks of 20 out of 600 items: the old code built a 600 x 600 x 600 array."""
    n, rankings = 600, block_rankings(600, 20, seed=1)
    assert peak_bytes(lambda: pairwise_counts(rankings, n)) < 32 * MiB  # 216 MiB before
    W = pairwise_counts(rankings, n)
    ref = np.zeros((n, n), dtype=np.int64)
    for r in rankings:
        for a, b in combinations(r, 2):
            ref[a, b] += 1
    assert (W == ref).all()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 9), seed=st.integers(0, 10**6), limit=st.sampled_from([1, 5, 10**6]))
def test_lazy_triangle_separation_finds_what_the_full_cube_finds(
    n: int, seed: int, limit: int
) -> None:
    from permsc_integrations.aggregators._lp import pair_matrix, violated_triangles

    rng = np.random.default_rng(seed)
    X = pair_matrix(rng.choice([0.0, 0.25, 0.5, 1.0], n * (n - 1) // 2), n)
    expected = {
        tuple(sorted(t))
        for t in combinations(range(n), 3)
        for a, b, c in [t, t[::-1]]
        if X[a, b] + X[b, c] + X[c, a] > 2 + 1e-6
    }
    found, complete = violated_triangles(X, limit, start=seed % n)
    got = {tuple(t) for t in found.tolist()}
    assert got <= expected and len(got) == min(limit, len(expected))
    assert complete or len(got) == limit


def test_lazy_triangle_separation_takes_o_k2_memory_and_stops_at_its_deadline() -> None:
    from permsc_integrations.aggregators._lp import pair_matrix, violated_triangles

    k = 300
    X = pair_matrix(np.random.default_rng(0).random(k * (k - 1) // 2), k)
    assert peak_bytes(lambda: violated_triangles(X, 1000)) < 16 * MiB  # 216 MiB before
    found, complete = violated_triangles(X, 1000, deadline=0.0)  # long past
    assert len(found) == 0 and not complete  # not a proof that nothing is violated


def test_insertion_search_stops_at_its_deadline_and_ends_at_a_local_optimum() -> None:
    W = pairwise_counts(uniform(40, 7, seed=2), 40)
    start = net_order(W).tolist()
    assert insertion_refine(start, W, deadline=0.0) == start
    best = insertion_refine(start, W)
    cost = kendall_cost(best, W)
    assert cost < kendall_cost(start, W)
    for p in range(40):  # no single move helps any more
        for q in range(40):
            moved = best[:p] + best[p + 1 :]
            moved.insert(q, best[p])
            assert kendall_cost(moved, W) >= cost


@pytest.mark.parametrize("rankings", [uniform(300, 20, seed=3), block_rankings(400, 10, seed=3)])
def test_a_deadline_already_past_stops_every_step(rankings: list[list[int]]) -> None:
    """time_limit=0: no local search move, no packed cycle, no LP: the start order's
    objective with the pairs bound, flagged. The old code ran its local search without a
    deadline (0.5 s and 2.7 s here) and returned its result. (``dp_max=1``: the subset DP
    of blocks up to ``dp_max`` items, 0.2 ms each at 10 items, runs even past the deadline.)"""
    n = 1 + max(max(r) for r in rankings)
    sol = kemeny_solve(rankings, n_items=n, time_limit=0, dp_max=1)
    W = pairwise_counts(rankings, n)
    assert not sol.exact and "(time)" in sol.method
    assert sol.lower_bound == pairs_bound(W)
    # the start order (every strict majority it can follow), its parts reordered
    assert sol.objective == kendall_cost(majority_order(W).tolist(), W)


@pytest.mark.parametrize(
    "rankings", [uniform(500, 20, seed=4), block_rankings(500, 10, seed=4)], ids=["full", "blocks"]
)
def test_kemeny_at_n500_takes_o_n2_memory(rankings: list[list[int]]) -> None:
    n = 500
    assert peak_bytes(lambda: kemeny_solve(rankings, n_items=n, time_limit=0.5)) < 24 * 8 * n * n


@pytest.mark.skipif(not has_highspy, reason="highspy not installed")
@pytest.mark.parametrize("seed", [5, 6])
def test_sparse_partial_rankings_an_approximate_answer_keeps_a_true_bound(seed: int) -> None:
    rankings = block_rankings(120, 5, seed=seed)
    rushed = kemeny_solve(rankings, n_items=120, time_limit=0.02)
    best = kemeny_solve(rankings, n_items=120, time_limit=60)
    assert best.exact
    assert rushed.lower_bound <= best.objective <= rushed.objective
    assert rushed.objective == kemeny_objective(rankings, rushed.order, 120)


def test_packed_cycles_bound_every_ranking() -> None:
    """The packing bound is below the objective of the optimum (brute force, 7 items)."""
    from itertools import permutations

    for seed in range(30):
        rankings = [r[: 3 + seed % 5] for r in uniform(7, 4, seed)]
        W = pairwise_counts(rankings, 7)
        best = min(kendall_cost(list(p), W) for p in permutations(range(7)))
        start = insertion_refine(net_order(W).tolist(), W)
        assert pairs_bound(W) + cycle_packing(W, start).value <= best


def test_parts_that_never_met_keep_index_order() -> None:
    """{3 > 2} and {1 > 0} never met: either order is optimal; index order decides."""
    W = pairwise_counts([[3, 2], [1, 0]], 4)
    assert [p.tolist() for p in split_by_order(W, [3, 2, 1, 0])] == [[3], [2], [1], [0]]
    for dp_max in (0, 10):  # through the parts, and through one exact block
        assert kemeny_solve([[3, 2], [1, 0]], n_items=4, dp_max=dp_max).order == (1, 0, 3, 2)


@pytest.mark.skipif(not has_highspy, reason="highspy not installed")
def test_sparse_llm_like_blocks_are_solved_exactly_at_n200() -> None:
    """The LP bound plus its rounding prove these optimal after a few LP rounds."""
    rankings = block_rankings(200, 20, seed=7, swaps=1)
    sol = kemeny_solve(rankings, n_items=200, time_limit=30)
    assert sol.exact and sol.gap == 0.0
    assert aggregate(rankings, n_items=200, time_limit=30) == list(sol.order)
