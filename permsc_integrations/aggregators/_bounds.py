"""Lower bounds on the Kemeny objective that need no LP solver: pairs, then packed cycles.

Every ranking pays ``min(W[i, j], W[j, i])`` for each pair (the *pairs bound*). On top of
that, a cycle of strict majorities ``a -> b -> ... -> a`` cannot be followed all the way
round: some ranking order reverses one of its edges and pays that edge's margin
``W[u, v] - W[v, u]``. Cycles packed so that no edge's margin is used more than once add
up to a valid bound (a feasible dual of the cycle LP). Cycles are looked for through the
edges that a good order reverses (every cycle has one): triangles first (O(k) numpy work
each), then 4-cycles where few items qualify, then shortest longer cycles by breadth-first
search (O(k^2) each). Sparse inputs need the longer ones: there most pairs never met and
triangles are rare. Memory is O(k^2).

Example:
    >>> import numpy as np
    >>> W = np.array([[0, 2, 1], [1, 0, 2], [2, 1, 0]])  # a 3-cycle of 2:1 majorities
    >>> pairs_bound(W), cycle_packing(W, [0, 1, 2]).value
    (3, 1)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["pairs_bound", "cycle_packing", "Packing"]

_SQUARE_SEARCH = 1 << 15  # largest successor x predecessor grid searched for one 4-cycle


@dataclass(frozen=True, slots=True)
class Packing:
    """``value``: the bound above the pairs bound; ``triangles``: 3-cycle rows ``(i < j < l)``
    that the packed cycles use (a 4-cycle as two triangles), worth giving an LP first;
    ``complete``: False when the deadline cut the search short (the value still holds)."""

    value: int
    triangles: np.ndarray
    complete: bool


def pairs_bound(W: np.ndarray) -> int:
    """The disagreements no ranking avoids: the minority of every pair."""
    return int(np.minimum(W, W.T)[np.triu_indices(W.shape[0], 1)].sum())


def _reversed_edges(R: np.ndarray, order: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Strict-majority edges ``u -> v`` that ``order`` reverses, largest margin first."""
    pos = np.empty(R.shape[0], dtype=np.intp)
    pos[np.asarray(order, dtype=np.intp)] = np.arange(R.shape[0])
    u, v = np.nonzero((R > 0) & (pos[:, None] > pos[None, :]))
    first = np.argsort(-R[u, v], kind="stable")
    return u[first], v[first]


def _late(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _triangles(
    R: np.ndarray,
    edges: tuple[np.ndarray, np.ndarray],
    deadline: float | None,
    found: list[tuple[int, ...]],
) -> tuple[int, bool]:
    """Pack 3-cycles ``a -> b -> x -> a`` through each reversed edge ``a -> b``."""
    total = 0
    for a, b in zip(edges[0].tolist(), edges[1].tolist(), strict=True):
        while R[a, b] > 0:
            if _late(deadline):
                return total, False
            room = np.minimum(R[b], R[:, a])
            x = int(np.argmax(room))
            amount = min(int(room[x]), int(R[a, b]))
            if amount <= 0:
                break
            R[a, b] -= amount
            R[b, x] -= amount
            R[x, a] -= amount
            total += amount
            found.append((a, b, x))
    return total, True


def _squares(
    R: np.ndarray,
    edges: tuple[np.ndarray, np.ndarray],
    deadline: float | None,
    found: list[tuple[int, ...]],
) -> tuple[int, bool]:
    """Pack 4-cycles ``a -> b -> x -> y -> a`` where the search grid is small (sparse)."""
    total = 0
    for a, b in zip(edges[0].tolist(), edges[1].tolist(), strict=True):
        while R[a, b] > 0:
            if _late(deadline):
                return total, False
            xs, ys = np.flatnonzero(R[b] > 0), np.flatnonzero(R[:, a] > 0)
            if len(xs) * len(ys) == 0 or len(xs) * len(ys) > _SQUARE_SEARCH:
                break
            room = np.minimum(np.minimum(R[b, xs][:, None], R[np.ix_(xs, ys)]), R[ys, a])
            i, j = divmod(int(np.argmax(room)), len(ys))
            amount = min(int(room[i, j]), int(R[a, b]))
            if amount <= 0:
                break
            x, y = int(xs[i]), int(ys[j])
            for s, t in ((a, b), (b, x), (x, y), (y, a)):
                R[s, t] -= amount
            total += amount
            found += [(a, b, x), (a, x, y)]  # the chord a-x splits it into two triangles
    return total, True


def _path(R: np.ndarray, src: int, dst: int) -> list[int] | None:
    """A shortest path ``src -> ... -> dst`` over edges with margin left (numpy BFS)."""
    parent = np.full(R.shape[0], -1, dtype=np.intp)
    parent[src] = src
    frontier = np.array([src])
    while len(frontier) and parent[dst] < 0:
        step = R[frontier] > 0
        step[:, parent >= 0] = False
        reached = np.flatnonzero(step.any(0))
        parent[reached] = frontier[step[:, reached].argmax(0)]
        frontier = reached
    if parent[dst] < 0:
        return None
    path = [dst]
    while path[-1] != src:
        path.append(int(parent[path[-1]]))
    return path[::-1]


def _longer(
    R: np.ndarray,
    edges: tuple[np.ndarray, np.ndarray],
    deadline: float | None,
    found: list[tuple[int, ...]],
) -> tuple[int, bool]:
    """Pack shortest cycles ``a -> b -> ... -> a`` (4 edges or more once triangles are out)."""
    total = 0
    for a, b in zip(edges[0].tolist(), edges[1].tolist(), strict=True):
        while R[a, b] > 0:
            if _late(deadline):
                return total, False
            path = _path(R, b, a)
            if path is None:
                break
            cycle = list(zip([a, *path[:-1]], path, strict=True))  # a -> b, then the path
            amount = min(int(R[s, t]) for s, t in cycle)
            for s, t in cycle:
                R[s, t] -= amount
            total += amount
            found += [(a, s, t) for s, t in cycle[1:-1]]  # fan of chords from a
    return total, True


def cycle_packing(W: np.ndarray, order: Sequence[int], *, deadline: float | None = None) -> Packing:
    """Pack strict-majority cycles through the edges ``order`` reverses (see the module).

    ``pairs_bound(W) + cycle_packing(W, order).value`` is a lower bound on every ranking's
    objective; the search stops at ``deadline`` (a ``time.perf_counter()`` value).
    """
    R = np.maximum(W - W.T, 0).astype(np.int64)
    edges = _reversed_edges(R, order)
    found: list[tuple[int, ...]] = []
    value, complete = 0, True
    for search in (_triangles, _squares, _longer):
        if complete:
            more, complete = search(R, edges, deadline, found)
            value += more
    triangles = np.unique(np.sort(np.array(found, dtype=np.intp).reshape(-1, 3), axis=1), axis=0)
    return Packing(value, triangles, complete)
