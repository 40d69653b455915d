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

from collections.abc import Sequence
from itertools import chain

import numpy as np

__all__ = ["positions", "pairwise_counts", "kendall_cost", "condorcet_blocks", "net_order"]


def positions(rankings: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """An ``(m, n)`` int array: the 0-based position of each item per ranking, ``n`` if absent.

    >>> positions([[2, 0], [0, 1, 2]], 3).tolist()
    [[1, 3, 0], [0, 1, 2]]
    """
    m = len(rankings)
    lengths = np.fromiter((len(r) for r in rankings), dtype=np.intp, count=m)
    dtype = np.int16 if n < 32000 else np.int32
    if m and int(lengths.min()) == n:  # every ranking is full: one fancy-index scatter
        pos = np.empty((m, n), dtype=dtype)
        pos[np.arange(m)[:, None], np.asarray(rankings, dtype=np.intp)] = np.arange(n)
        return pos
    total = int(lengths.sum())
    items = np.fromiter(chain.from_iterable(rankings), dtype=np.intp, count=total)
    starts = np.cumsum(lengths) - lengths
    pos = np.full((m, n), n, dtype=dtype)
    pos[np.repeat(np.arange(m), lengths), items] = np.arange(total) - np.repeat(starts, lengths)
    return pos


def pairwise_counts(rankings: Sequence[Sequence[int]], n: int) -> np.ndarray:
    """``W[i, j]`` = number of rankings with ``i`` before ``j`` (both present)."""
    if not rankings:
        return np.zeros((n, n), dtype=np.int64)
    pos = positions(rankings, n)
    before = pos[:, :, None] < pos[:, None, :]
    if int(pos.max()) >= n:  # partial rankings: j must be present too
        before &= (pos < n)[:, None, :]
    return before.sum(0, dtype=np.int64)


def kendall_cost(order: Sequence[int], W: np.ndarray) -> int:
    """Kemeny objective of ``order`` (a full order of W's items): pairwise disagreements."""
    o = np.asarray(order, dtype=np.intp)
    return int(np.triu(W[o][:, o].T, 1).sum())


def net_order(W: np.ndarray, items: np.ndarray | None = None) -> np.ndarray:
    """``items`` (default all) sorted by net pairwise wins, best first; ties by index."""
    idx = np.arange(W.shape[0]) if items is None else np.sort(np.asarray(items, dtype=np.intp))
    sub = W[idx][:, idx]
    net = sub.sum(1) - sub.sum(0)
    return idx[np.argsort(-net, kind="stable")]


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
    bounds = [0, *cuts[is_cut].tolist(), k]
    return [np.sort(items[order[a:b]]) for a, b in zip(bounds, bounds[1:], strict=False)]
