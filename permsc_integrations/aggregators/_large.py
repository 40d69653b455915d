"""One part too big for the subset DP: bounds, then the LP, then an integer step, to a deadline.

Every step is cut short at ``deadline``, and each leaves a ranking and a proven lower bound:
the start ranking (already refined by local search) against the pairs bound, the cycle
packing (:mod:`._bounds`), the LP over pair variables with lazily added 3-cycle rows
(:mod:`._lp`) when one LP solve fits in the time left, a rounding of the LP refined by
local search, and the integer step (HiGHS MIP or PuLP) when the LP is fractional.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from permsc_integrations.aggregators._bounds import cycle_packing, pairs_bound
from permsc_integrations.aggregators._local_search import insertion_refine
from permsc_integrations.aggregators._lp import (
    IPM_FROM,
    TriangleModel,
    order_from_matrix,
    pair_matrix,
    violated_triangles,
)
from permsc_integrations.aggregators._pairwise import kendall_cost
from permsc_integrations.aggregators._pulp import solve_pulp
from permsc_integrations.errors import MissingDependencyError

__all__ = ["Part", "solve_large", "perturbed", "LP_SECONDS_PER_PAIR"]

logger = logging.getLogger(__name__)

# One LP solve costs about this much per pair variable here (3e-6 s: 0.3-0.45 s at k = 500);
# the LP is not started when less than that is left, as it could not finish a single solve.
LP_SECONDS_PER_PAIR = 3e-6


@dataclass(frozen=True, slots=True)
class Part:
    """A solved part: ``order`` in local indices, its objective and proven lower bound."""

    order: list[int]
    objective: int
    lower_bound: float
    method: str

    @property
    def exact(self) -> bool:
        return self.objective <= math.ceil(self.lower_bound - 1e-6)


_BONUS: dict[int, np.ndarray] = {}


def perturbed(W: np.ndarray) -> np.ndarray:
    """``W`` minus a tie-break bonus (under one disagreement in total) for index order.

    The perturbed cost never exceeds the true one, so its LP bound stays a true bound.
    """
    k = W.shape[0]
    if k not in _BONUS:
        bonus = np.tril(np.ones((k, k)), -1) / (k * k)
        if k > 64:
            return W - bonus
        _BONUS[k] = bonus  # small blocks come often (the hot path): built once per size
    return W - _BONUS[k]


def _midway(deadline: float, share: float = 0.5) -> float:
    now = time.perf_counter()
    return now + share * max(0.0, deadline - now)


def solve_large(W: np.ndarray, start: list[int], deadline: float, solver: object) -> Part:
    """Best ranking of ``W``'s items found by ``deadline``, from ``start``, with its bound."""
    upper = kendall_cost(start, W)
    lower = float(pairs_bound(W))
    if upper <= lower:
        return Part(start, upper, lower, "bound")
    k = W.shape[0]
    lp_fits = deadline - time.perf_counter() > 2 * LP_SECONDS_PER_PAIR * k * (k - 1) / 2
    packing = cycle_packing(W, start, deadline=_midway(deadline, 0.3 if lp_fits else 1.0))
    lower += packing.value
    if upper <= lower:
        return Part(start, upper, lower, "bound")
    best = Part(start, upper, lower, "heuristic(time)")
    try:
        if deadline - time.perf_counter() < LP_SECONDS_PER_PAIR * k * (k - 1) / 2:
            return best  # not even one LP solve would finish: the packing is the bound
        model = TriangleModel(perturbed(W))
    except MissingDependencyError as exc:
        if isinstance(solver, str) and solver == "highs":
            logger.warning("Kemeny falls back to local search: %s", exc)
            return Part(start, upper, lower, "heuristic(no highspy)")
        return _integer(W, None, deadline, solver, best)
    model.add_triangles(packing.triangles)
    return _with_lp(W, model, deadline, solver, best)


def _with_lp(
    W: np.ndarray, model: TriangleModel, deadline: float, solver: object, best: Part
) -> Part:
    """LP rounds: each LP solution is rounded and refined by local search, and the rounds
    stop once the best ranking meets the LP bound; an integral LP with no violated row is
    optimal. A fractional LP at the end goes on to the integer step."""
    for X, lower, integral in _lp_rounds(model, deadline, W.shape[0]):
        if integral is not None:
            obj = kendall_cost(integral, W)
            return Part(integral, obj, float(obj), "lp")
        start = np.argsort(-X.sum(1), kind="stable").tolist()  # most (fractional) wins first
        cand = insertion_refine(start, W, deadline=deadline)
        if (cost := kendall_cost(cand, W)) < best.objective:
            best = Part(cand, cost, best.lower_bound, best.method)
        best = Part(best.order, best.objective, max(best.lower_bound, lower), best.method)
        if best.exact:
            return Part(best.order, best.objective, float(best.objective), "lp-bound")
    return _integer(W, model, deadline, solver, best)


def _lp_rounds(
    model: TriangleModel, deadline: float, k: int
) -> Iterator[tuple[np.ndarray, float, list[int] | None]]:
    """Solve the LP, adding violated 3-cycle rows, until none is violated or time is up.

    Yields after every solve: its ``k x k`` matrix, its bound, and the order when it is
    integral with no row violated (then it is optimal and the rounds end).
    """

    stop = _midway(deadline, 0.9)  # the rest is kept for rounding the last LP solution
    limit = max(200, (20 if k > IPM_FROM else 10) * k)  # IPM re-solves from scratch: fewer rounds
    # the strict majority's own 3-cycles first (without any row the LP optimum is the
    # majority); pairs that tie or never met are left out: reversing them costs nothing
    cost = model.cost
    first, _ = violated_triangles((cost - cost.T > 0.5).astype(float), limit=limit, deadline=stop)
    model.add_triangles(first)
    rounds = 0
    while (left := stop - time.perf_counter()) > 0:
        res = model.solve(left)
        if not res.optimal:
            return
        X = pair_matrix(res.x, k)
        found, complete = violated_triangles(X, limit=limit, start=rounds * 7919, deadline=stop)
        if len(found) == 0:
            yield X, res.objective, (order_from_matrix(X) if res.integral and complete else None)
            return
        yield X, res.objective, None
        model.add_triangles(found)
        rounds += 1


def _integer(
    W: np.ndarray, model: TriangleModel | None, deadline: float, solver: object, best: Part
) -> Part:
    """The integer step (HiGHS MIP on the same model, or PuLP), within the time left."""
    left = deadline - time.perf_counter()
    if left <= 0 or (model is not None and left < 3 * model.slowest_solve_s):
        return best  # too little time for a MIP
    if model is not None and isinstance(solver, str) and solver == "highs":
        order, proven, bound, name = _highs_mip(model, deadline, W.shape[0])
    else:
        triples = model.triples() if model is not None else np.empty((0, 3), dtype=np.intp)
        res = solve_pulp(perturbed(W), triples, solver, time_limit=deadline - time.perf_counter())
        order, proven, bound, name = res.order, res.optimal, -math.inf, f"mip:pulp:{res.solver}"
    if order is None:
        return best
    obj = kendall_cost(order, W)
    if obj > best.objective:
        order, obj = best.order, best.objective
    if proven:
        return Part(order, obj, float(obj), name)
    return Part(order, obj, max(best.lower_bound, bound), name + "(time)")


def _highs_mip(
    model: TriangleModel, deadline: float, k: int
) -> tuple[list[int] | None, bool, float, str]:

    model.make_integer()
    while (left := deadline - time.perf_counter()) > 0:
        res = model.solve(left / 2)  # HiGHS's MIP can overrun its limit up to ~2x on big blocks
        if len(res.x) == 0:
            break
        X = pair_matrix(np.rint(res.x), k)
        found, _ = violated_triangles(X, limit=max(200, 10 * k))
        if len(found):
            model.add_triangles(found)
            continue
        return order_from_matrix(X), res.optimal, model.bound(), "mip:highs"
    return None, False, -math.inf, "mip:highs"
