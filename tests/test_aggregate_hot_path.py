"""The aggregation hot path's shortcuts give what the plain definitions give, on any input.

Each shortcut (input checks in C loops, cached pair indices, one counting pass for few items,
no sort for a strict order, ``listed`` read off the pair counts) is compared with the
straightforward formula it replaced, on random full and partial rankings and on bad input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from permsc_integrations import aggregate
from permsc_integrations.aggregators import _validate
from permsc_integrations.aggregators._pairwise import (
    condorcet_blocks,
    kendall_cost,
    listed,
    pairwise_counts,
)
from permsc_integrations.errors import InvalidRankingError


@st.composite
def rankings(draw: st.DrawFn, max_n: int = 80) -> tuple[list[list[int]], int]:
    """m rankings of n items, each full, a prefix, or a random subset (partial answers)."""
    n = draw(st.integers(1, max_n))
    out = []
    for _ in range(draw(st.integers(0, 8))):
        perm = draw(st.permutations(range(n)))
        out.append(list(perm[: draw(st.integers(0, n))]))
    return out, n


def naive_counts(rankings: Sequence[Sequence[int]], n: int) -> np.ndarray:
    W = np.zeros((n, n), dtype=np.int64)
    for r in rankings:
        for a, i in enumerate(r):
            for j in r[a + 1 :]:
                W[i, j] += 1
    return W


def reference_validate(rankings, n_items):  # the checks as written before the shortcuts
    clean = [[int(i) for i in r] for r in rankings]
    seen_max = max((max(r) for r in clean if r), default=-1)
    n = seen_max + 1 if n_items is None else int(n_items)
    if n <= 0:
        raise InvalidRankingError(
            "nothing to aggregate: no items in any ranking and n_items not given"
        )
    for k, r in enumerate(clean):
        if len(set(r)) != len(r):
            raise InvalidRankingError(f"ranking {k} lists an item twice: {r}")
        bad = [i for i in r if i < 0 or i >= n]
        if bad:
            raise InvalidRankingError(f"ranking {k} has indices outside 0..{n - 1}: {bad}")
    return clean, n


def outcome(fn, *args):
    try:
        return fn(*args)
    except InvalidRankingError as exc:
        return str(exc)


@settings(max_examples=150, deadline=None)
@given(case=rankings())
def test_pair_counts_cost_and_listing_match_their_definitions(
    case: tuple[list[list[int]], int],
) -> None:
    rs, n = case
    W = pairwise_counts(rs, n)
    assert (W == naive_counts(rs, n)).all()
    assert listed(rs, W).tolist() == [any(i in r for r in rs) for i in range(n)]
    order = np.random.default_rng(n).permutation(n).tolist()
    assert kendall_cost(order, W) == sum(
        int(W[b, a]) for x, a in enumerate(order) for b in order[x + 1 :]
    )


@settings(max_examples=150, deadline=None)
@given(case=rankings(max_n=30))
def test_condorcet_blocks_are_the_strict_majority_order_in_index_order(
    case: tuple[list[list[int]], int],
) -> None:
    rs, n = case
    W = pairwise_counts(rs, n)
    items = np.flatnonzero(listed(rs, W))
    blocks = condorcet_blocks(W, items)
    assert sorted(np.concatenate(blocks).tolist()) == sorted(items.tolist())
    for x, block in enumerate(blocks):
        assert block.tolist() == sorted(block.tolist())
        for later in blocks[x + 1 :]:  # every pair across two blocks: a strict majority
            assert (W[np.ix_(block, later)] > W[np.ix_(later, block)].T).all()


@settings(max_examples=300, deadline=None)
@given(
    rs=st.lists(st.lists(st.integers(-2, 12), max_size=8), max_size=5),
    n_items=st.none() | st.integers(-1, 12),
)
def test_input_checks_accept_and_refuse_exactly_as_before(rs, n_items) -> None:
    assert outcome(_validate, rs, n_items) == outcome(reference_validate, rs, n_items)


def test_the_first_bad_ranking_is_the_one_named() -> None:
    with pytest.raises(InvalidRankingError, match=r"ranking 1 lists an item twice: \[2, 2\]"):
        aggregate([[0, 1], [2, 2], [0, 9]], n_items=5)
    with pytest.raises(InvalidRankingError, match=r"ranking 2 has indices outside 0..4: \[9\]"):
        aggregate([[0, 1], [2], [0, 9]], n_items=5)
