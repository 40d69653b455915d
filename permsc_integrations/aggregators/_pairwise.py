"""Pairwise preference counts and the Condorcet block split shared by the aggregators.

``W[i, j]`` counts the rankings that place ``i`` before ``j``; a pair counts only in the
rankings where both items appear. The Kemeny objective of an order is the number of
(ranking, pair) disagreements: ``sum(W[b, a] for a before b)``.

Example:
    >>> W = pairwise_counts([[0, 1, 2], [1, 0]], 3)
    >>> W.tolist()
    [[0, 1, 1], [1, 0, 1], [0, 0, 0]]
    >>> kendall_cost([0, 1, 2], W)
    1
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import chain

import numpy as np

__all__ = [
    "positions",
    "pairwise_counts",
    "kendall_cost",
    "condorcet_blocks",
    "net_order",
    "majority_order",
    "split_by_order",
    "order_parts",
    "listed",
    "pair_indices",
]

_CHUNK = 1 << 22  # elements per temporary array while counting (a few MiB)
_SMALL = 64  # up to this many items, pair indices are cached
_PAIRS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def positions(rankings: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """An ``(m, n)`` int array: the 0-based position of each item per ranking, ``n`` if absent.

    >>> positions([[2, 0], [0, 1, 2]], 3).tolist()
    [[1, 3, 0], [0, 1, 2]]
    """
    m = len(rankings)
    sizes = [len(r) for r in rankings]
    dtype = np.int16 if n < 32000 else np.int32
    if m and min(sizes) == n:  # every ranking is full: one fancy-index scatter
        pos = np.empty((m, n), dtype=dtype)
        pos[np.arange(m)[:, None], np.asarray(rankings, dtype=np.intp)] = np.arange(n)
        return pos
    lengths = np.array(sizes, dtype=np.intp)
    total = int(lengths.sum())
    items = np.fromiter(chain.from_iterable(rankings), dtype=np.intp, count=total)
    starts = np.cumsum(lengths) - lengths
    pos = np.full((m, n), n, dtype=dtype)
    pos[np.repeat(np.arange(m), lengths), items] = np.arange(total) - np.repeat(starts, lengths)
    return pos


def listed(rankings: Sequence[Sequence[int]], W: np.ndarray) -> np.ndarray:
    """A boolean mask of the items that appear in at least one ranking (alone counts too);
    ``W`` is :func:`pairwise_counts` of the same rankings (it holds every item met in pairs).
    """
    seen = np.asarray(W.any(0) | W.any(1))
    for r in rankings:
        if len(r) == 1:
            seen[r[0]] = True
    return seen


def pairwise_counts(rankings: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """``W[i, j]`` = number of rankings with ``i`` before ``j`` (both present).

    Memory stays O(n^2) whatever the number of rankings: long rankings are compared by
    position a few at a time, short ones (partial rankings of a block of items) scatter
    their own pairs, grouped by length.
    """
    W = np.zeros((n, n), dtype=np.int64)
    long: list[Sequence[int]] = []
    short: list[Sequence[int]] = []
    if n <= _SMALL:  # few items: one pass by position is quickest (the hot path)
        long = [r for r in rankings if len(r) > 1]
    else:
        for r in rankings:
            if len(r) > 1:
                (long if 2 * len(r) >= n else short).append(r)
    if long:
        _count_by_position(long, n, W)
    if short:
        _count_by_pairs(short, n, W)
    return W


def _count_by_position(rankings: Sequence[Sequence[int]], n: int, W: np.ndarray) -> None:
    rows = max(1, _CHUNK // (n * n))
    for start in range(0, len(rankings), rows):
        pos = positions(rankings[start : start + rows], n)
        before = pos[:, :, None] < pos[:, None, :]
        if int(pos.max()) >= n:  # partial rankings: j must be present too
            before &= (pos < n)[:, None, :]
        W += before.sum(0, dtype=np.int64)


def _count_by_pairs(rankings: Sequence[Sequence[int]], n: int, W: np.ndarray) -> None:
    by_length: dict[int, list[Sequence[int]]] = {}
    for r in rankings:
        by_length.setdefault(len(r), []).append(r)
    flat = W.reshape(-1)  # a view: W is C-contiguous
    for length, group in by_length.items():
        first, second = pair_indices(length)
        rows = max(1, _CHUNK // len(first))
        for start in range(0, len(group), rows):
            items = np.asarray(group[start : start + rows], dtype=np.intp)
            pairs = (items[:, first] * n + items[:, second]).ravel()
            flat += np.bincount(pairs, minlength=n * n)


def pair_indices(k: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(k, 1)``, kept for small ``k`` (the hot path builds them often)."""
    if k > _SMALL:
        return np.triu_indices(k, 1)
    if k not in _PAIRS:
        _PAIRS[k] = np.triu_indices(k, 1)
    return _PAIRS[k]


def kendall_cost(order: Sequence[int], W: np.ndarray) -> int:
    """Kemeny objective of ``order`` (a full order of W's items): pairwise disagreements."""
    o = np.asarray(order, dtype=np.intp)
    if len(o) > _SMALL:
        return int(np.triu(W[o][:, o].T, 1).sum())
    first, second = pair_indices(len(o))
    return int(W[o[second], o[first]].sum())  # the same sum, without a k x k temporary


def net_order(W: np.ndarray, items: np.ndarray | None = None) -> np.ndarray:
    """``items`` (default all) sorted by net pairwise wins, best first; ties by index."""
    idx = np.arange(W.shape[0]) if items is None else np.sort(np.asarray(items, dtype=np.intp))
    sub = W[idx][:, idx]
    net = sub.sum(1) - sub.sum(0)
    return idx[np.argsort(-net, kind="stable")]


def majority_order(W: np.ndarray) -> np.ndarray:
    """All of ``W``'s items in an order that follows every strict majority it can: each
    next item is one that no remaining item beats (the best by net wins, then the lowest
    index), and where a cycle leaves none, the remaining item with the most net wins.

    Where the strict majorities form no cycle (consistent answers, however few pairs met)
    this order meets :func:`~._bounds.pairs_bound`, so it is optimal: the net-wins order can
    miss that on sparse partial rankings, where most pairs never met.

    >>> W = pairwise_counts([[3, 2], [2, 1], [1, 0]], 4)  # a chain no net count orders
    >>> majority_order(W).tolist(), net_order(W).tolist()
    ([3, 2, 1, 0], [3, 1, 2, 0])
    """
    k = W.shape[0]
    beats = (W > W.T).astype(np.int32)
    net = W.sum(1) - W.sum(0)
    beaten = beats.sum(0)  # by how many remaining items each item is beaten
    left = np.ones(k, dtype=bool)
    rank = np.lexsort((np.arange(k), -net))  # best net wins first, then index
    order = np.empty(k, dtype=np.intp)
    for at in range(k):
        free = rank[left[rank] & (beaten[rank] == 0)]
        pick = int(free[0]) if len(free) else int(rank[left[rank]][0])
        order[at] = pick
        left[pick] = False
        beaten -= beats[pick]
    return order


def condorcet_blocks(W: np.ndarray, items: np.ndarray) -> list[np.ndarray]:
    """Split ``items`` into blocks that a strict majority already orders, best block first.

    Blocks are the strongly connected parts of the weak-majority graph (an edge
    ``i -> j`` when ``W[i, j] >= W[j, i]``); every pair across two blocks is strictly
    ordered, so an optimal Kemeny ranking places the blocks in this order (the extended
    Condorcet criterion). Items inside a block are returned in index order.
    """
    items = np.sort(np.asarray(items, dtype=np.intp))
    k = len(items)
    if k <= 1:
        return [items]
    sub = W[items][:, items]
    strict = sub > sub.T
    weak_out = (sub >= sub.T).sum(1) - 1
    order = np.argsort(-weak_out, kind="stable")
    s = strict[order][:, order].astype(np.int32)
    col_prefix = s.cumsum(0)  # col_prefix[r, j] = wins of rows 0..r over column j
    suffix = col_prefix[:, ::-1].cumsum(1)[:, ::-1]  # suffix[r, c] = sum over j >= c
    cuts = np.arange(1, k)
    is_cut = suffix[cuts - 1, cuts] == cuts * (k - cuts)
    if is_cut.all():  # a strict order (the usual case on consistent answers): no sort needed
        return list(items[order].reshape(k, 1))
    block = np.concatenate(([0], np.cumsum(is_cut)))  # the block of each position of order
    ranked = items[order][np.lexsort((items[order], block))]  # by block, then by index
    bounds = [0, *cuts[is_cut].tolist(), k]
    return [ranked[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def split_by_order(W: np.ndarray, order: Sequence[int]) -> list[np.ndarray]:
    """Cut ``order`` into consecutive parts that can be solved one by one, in this order.

    A cut between two positions is safe when no item after it met an item before it and
    won at least as often (a strict majority or a tie): every pair across the cut is then
    ordered by a strict majority or was never compared, so keeping the parts in order
    costs nothing. On sparse inputs (partial rankings where most pairs never meet) this
    finds the independent parts that :func:`condorcet_blocks` cannot: there, a pair that
    never met ties, and ties join blocks.

    >>> W = pairwise_counts([[0, 1], [2, 3]], 4)
    >>> [p.tolist() for p in split_by_order(W, [0, 1, 2, 3])]
    [[0], [1], [2], [3]]
    """
    o = np.asarray(order, dtype=np.intp)
    k = len(o)
    if k <= 1:
        return [o]
    A = W[np.ix_(o, o)]
    back = np.tril((A >= A.T) & ((A + A.T) > 0), -1)  # back[t, s]: t (later) beats or ties s
    low = np.where(back.any(1), back.argmax(1), np.arange(k))  # earliest such s, per t
    reach = np.minimum.accumulate(low[::-1])[::-1]  # earliest s tied to any t >= c
    cuts = np.flatnonzero(reach[1:] >= np.arange(1, k)) + 1
    bounds = [0, *cuts.tolist(), k]
    return [o[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def order_parts(W: np.ndarray, parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Reorder parts from :func:`split_by_order`: every strict majority between two parts
    keeps them in order; where none does, the part holding the smaller index goes first.

    This is the index-order tie-break for parts that the data does not order.
    """
    count = len(parts)
    if count <= 1:
        return list(parts)
    flat = np.concatenate(parts)
    starts = np.cumsum([0, *(len(p) for p in parts[:-1])])
    sub = W[np.ix_(flat, flat)]
    strict = sub > sub.T
    before = np.logical_or.reduceat(np.logical_or.reduceat(strict, starts, 0), starts, 1)
    np.fill_diagonal(before, False)
    waiting = before.sum(0)
    key = [int(p.min()) for p in parts]
    ready = [(key[j], j) for j in np.flatnonzero(waiting == 0).tolist()]
    heapq.heapify(ready)
    out = []
    while ready:
        _, j = heapq.heappop(ready)
        out.append(parts[j])
        after = np.flatnonzero(before[j])
        waiting[after] -= 1
        for t in after[waiting[after] == 0].tolist():
            heapq.heappush(ready, (key[t], t))
    return out
