"""Kemeny as an LP/MIP over pair variables with lazily added 3-cycle rows (HiGHS in process).

One variable ``x[i, j]`` per unordered pair ``i < j`` (1 = ``i`` before ``j``). Transitivity
is ``0 <= x[i, j] + x[j, l] - x[i, l] <= 1`` for ``i < j < l``; those rows are added only
when the current solution violates them, found by a lazy scan, so neither the O(k^3) model
nor an O(k^3) array is ever built.

Example:
    >>> import numpy as np
    >>> lp = TriangleModel(np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 1.0, 0.0]]))
    >>> lp.solve(time_limit=1.0).integral
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from permsc_integrations.errors import MissingDependencyError

if TYPE_CHECKING:
    from highspy import Highs

__all__ = ["TriangleModel", "LPResult", "violated_triangles", "order_from_matrix", "pair_matrix"]

_TOL = 1e-6
IPM_FROM = 60  # blocks larger than this solve their LPs by interior point, no crossover
_POOL = 50  # candidates held per row wanted: the worst are chosen from up to 50 x limit


def _highspy():  # noqa: ANN202 - the module itself
    try:
        # lazy: a core dependency, but one a broken install can lack (the solvers fall back)
        import highspy
    except ImportError:
        raise MissingDependencyError(
            "highspy", "", purpose="exact Kemeny (LP/MIP)", install="pip install highspy"
        ) from None
    return highspy


def quiet_highs(hs: ModuleType) -> Highs:
    """A HiGHS instance that writes nothing to stdout, not even the licence banner.

    highspy's Python ``Highs()`` registers its callbacks in ``__init__``, which prints the
    banner once per process before ``output_flag`` can be switched off; the core class it
    extends prints nothing until told to, and has every method used here.
    """
    h = getattr(hs, "_Highs", hs.Highs)()
    h.setOptionValue("output_flag", False)
    return h


@dataclass(frozen=True, slots=True)
class LPResult:
    """One solve: ``x`` per pair (upper-triangle order), objective incl. offset, status."""

    x: np.ndarray
    objective: float
    optimal: bool
    integral: bool


def pair_matrix(x: np.ndarray, k: int) -> np.ndarray:
    """The ``k x k`` matrix ``X[a, b]`` = degree to which ``a`` comes before ``b``."""
    X = np.zeros((k, k))
    iu, ju = np.triu_indices(k, 1)
    X[iu, ju] = x
    X[ju, iu] = 1.0 - x
    return X


def _violated_from(X: np.ndarray, a: int) -> tuple[np.ndarray, np.ndarray]:
    """Violated 3-cycles ``(a, b, c)`` with ``a < b, c``, and how far each is violated."""
    after = a + 1 + np.flatnonzero(X[a, a + 1 :] > _TOL)  # b: a before b, a little at least
    before = a + 1 + np.flatnonzero(X[a + 1 :, a] > _TOL)  # c: c before a
    if len(after) == 0 or len(before) == 0:
        return np.empty((0, 3), dtype=np.intp), np.empty(0)
    T = X[a, after][:, None] + X[np.ix_(after, before)] + X[before, a][None, :]
    bi, ci = np.nonzero(T > 2.0 + _TOL)
    triples = np.stack([np.full(len(bi), a), after[bi], before[ci]], axis=1)
    return triples, T[bi, ci] - 2.0


def violated_triangles(
    X: np.ndarray, limit: int, *, start: int = 0, deadline: float | None = None
) -> tuple[np.ndarray, bool]:
    """Up to ``limit`` triples ``(i < j < l)`` whose 3-cycle row ``X`` violates, worst first.

    Lazy: scans one first item at a time (O(k^2) memory, never the O(k^3) cube), from
    ``start`` round to ``start - 1``, until it holds ``_POOL * limit`` candidates or passes
    ``deadline``. Returns the triples and whether the scan covered every item (so that an
    empty answer proves no row is violated).
    """
    k = X.shape[0]
    parts, excess, held, scanned = [], [], 0, 0
    while scanned < k and held < _POOL * limit:
        if deadline is not None and time.perf_counter() > deadline:
            break
        triples, over = _violated_from(X, (start + scanned) % k)
        parts.append(triples)
        excess.append(over)
        held, scanned = held + len(over), scanned + 1
    if held == 0:
        return np.empty((0, 3), dtype=np.intp), scanned == k
    a, b, c = np.concatenate(parts).T
    spread = (a * 7919 + b * 104729 + c * 1299709) % 1000003  # deterministic diversity
    pick = np.lexsort((spread, -np.round(np.concatenate(excess), 6)))[:limit]
    return np.sort(np.stack([a[pick], b[pick], c[pick]], axis=1), axis=1), scanned == k


def order_from_matrix(X: np.ndarray) -> list[int]:
    """The order of a transitive 0/1 precedence matrix (most wins first, ties by index)."""
    return np.argsort(-np.rint(X).sum(1), kind="stable").tolist()


class TriangleModel:
    """The pair-variable model of one block; ``cost[b, a]`` = price of ``a`` before ``b``."""

    def __init__(self, cost: np.ndarray) -> None:
        hs = _highspy()
        self._hs, self.k, self.cost = hs, cost.shape[0], cost
        iu, ju = np.triu_indices(self.k, 1)
        self.n_pairs = len(iu)
        self._pair = np.full((self.k, self.k), -1, dtype=np.int32)
        self._pair[iu, ju] = np.arange(self.n_pairs)
        self.offset = float(cost[iu, ju].sum())  # all x = 0: every j before i
        self.h = quiet_highs(hs)
        self.h.setOptionValue("threads", 1)
        if self.k > IPM_FROM:  # simplex stalls on big degenerate 3-cycle LPs; IPM does not
            self.h.setOptionValue("solver", "ipm")
            self.h.setOptionValue("run_crossover", "off")
        coef = (cost[ju, iu] - cost[iu, ju]).astype(float)
        n = self.n_pairs
        empty_i, empty_f = np.zeros(0, dtype=np.int32), np.zeros(0)
        self.h.addCols(n, coef, np.zeros(n), np.ones(n), 0, empty_i, empty_i, empty_f)
        self._triples: list[np.ndarray] = []
        self._keys = np.empty(0, dtype=np.intp)
        self.slowest_solve_s = 0.0  # the slowest LP solve so far: a MIP needs longer

    def add_triangles(self, triples: np.ndarray) -> None:
        """Add the ranged rows ``0 <= x_ij + x_jl - x_il <= 1`` (rows already in: skipped)."""
        triples = np.unique(np.asarray(triples, dtype=np.intp).reshape(-1, 3), axis=0)
        keys = (triples[:, 0] * self.k + triples[:, 1]) * self.k + triples[:, 2]
        fresh = ~np.isin(keys, self._keys)
        triples, t = triples[fresh], int(fresh.sum())
        if not t:
            return
        self._keys = np.concatenate([self._keys, keys[fresh]])
        i, j, h = triples[:, 0], triples[:, 1], triples[:, 2]
        idx = np.stack([self._pair[i, j], self._pair[j, h], self._pair[i, h]], axis=1).ravel()
        vals = np.tile([1.0, 1.0, -1.0], t)
        starts = np.arange(0, 3 * t, 3, dtype=np.int32)
        self.h.addRows(t, np.zeros(t), np.ones(t), 3 * t, starts, idx.astype(np.int32), vals)
        self._triples.append(np.asarray(triples, dtype=np.intp))

    def triples(self) -> np.ndarray:
        """Every 3-cycle row added so far, as ``(i, j, l)`` with ``i < j < l``."""
        return np.vstack(self._triples) if self._triples else np.empty((0, 3), dtype=np.intp)

    def make_integer(self) -> None:
        hs = self._hs
        self.h.setOptionValue("solver", "choose")
        kinds = np.full(self.n_pairs, int(hs.HighsVarType.kInteger), dtype=np.uint8)
        self.h.changeColsIntegrality(self.n_pairs, np.arange(self.n_pairs, dtype=np.int32), kinds)

    def solve(self, time_limit: float) -> LPResult:
        """Solve the current model (LP, or MIP after :meth:`make_integer`) within the limit."""
        # HiGHS measures time_limit on its own clock, which keeps running across run() calls
        self.h.setOptionValue("time_limit", self.h.getRunTime() + max(float(time_limit), 1e-3))
        started = time.perf_counter()
        self.h.run()
        self.slowest_solve_s = max(self.slowest_solve_s, time.perf_counter() - started)
        status = self.h.getModelStatus()
        optimal = status == self._hs.HighsModelStatus.kOptimal
        info = self.h.getInfo()
        has_x = optimal or int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
        x = np.asarray(self.h.getSolution().col_value) if has_x else np.zeros(0)
        integral = has_x and bool(np.all(np.minimum(x, 1.0 - x) < _TOL))
        objective = float("inf")
        if has_x:  # shaved a little: IPM without crossover must still give a safe bound
            objective = info.objective_function_value + self.offset
            objective -= 1e-7 * abs(objective)
        return LPResult(x=x, objective=objective, optimal=optimal, integral=integral)

    def bound(self) -> float:
        """The MIP dual bound (incl. offset) after an interrupted integer solve."""
        return float(self.h.getInfo().mip_dual_bound) + self.offset
