"""Exact Kemeny for small blocks: dynamic programming over subsets, vectorised by layer.

``cost[b, a]`` is what placing ``a`` before ``b`` costs; ``best_order`` minimises
``sum(cost[b, a] for a before b)`` in O(2^k k^2) numpy work (fast up to k of about 12).

Example:
    >>> import numpy as np
    >>> best_order(np.array([[0.0, 2.0, 2.0], [1.0, 0.0, 0.0], [1.0, 3.0, 0.0]]))
    [0, 2, 1]
"""

from __future__ import annotations

import numpy as np

__all__ = ["best_order"]

_LAYERS: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}


def _layers(k: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Popcount of every subset of ``k`` bits, and the subsets of each popcount."""
    if k not in _LAYERS:
        subsets = np.arange(1 << k)
        pop = np.zeros(1 << k, dtype=np.intp)
        for bit in range(k):
            pop += (subsets >> bit) & 1
        _LAYERS[k] = (pop, [np.flatnonzero(pop == p) for p in range(k + 1)])
    return _LAYERS[k]


def _subset_sums(cost: np.ndarray) -> np.ndarray:
    """``sums[v, S] = sum(cost[v, u] for u in S)`` for every subset ``S`` (bitmask)."""
    k = cost.shape[0]
    sums = np.zeros((k, 1), dtype=float)
    for u in range(k):
        sums = np.concatenate([sums, sums + cost[:, u : u + 1]], axis=1)
    return sums


def best_order(cost: np.ndarray) -> list[int]:
    """An order of ``range(k)`` minimising the pairwise cost (see the module docstring)."""
    k = cost.shape[0]
    if k <= 1:
        return list(range(k))
    _, layers = _layers(k)
    sums = _subset_sums(np.asarray(cost, dtype=float))
    dp = np.full(1 << k, np.inf)
    dp[0] = 0.0
    last = np.zeros(1 << k, dtype=np.intp)
    bits = np.arange(k)
    for p in range(1, k + 1):
        subsets = layers[p]
        inside = (subsets[:, None] >> bits) & 1 == 1  # (s, k)
        rest = subsets[:, None] ^ (1 << bits)  # subset without v, for each v
        cand = np.where(inside, dp[rest] + sums[bits, rest], np.inf)
        v = cand.argmin(1)
        dp[subsets] = cand[np.arange(len(subsets)), v]
        last[subsets] = v
    order, s = [], (1 << k) - 1
    while s:
        v = int(last[s])
        order.append(v)
        s ^= 1 << v
    return order[::-1]
