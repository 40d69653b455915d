"""Exact, fast Kemeny-Young aggregation: the ranking with the fewest pairwise disagreements.

Pipeline: pairwise counts (a pair counts only where both items appear) -> blocks that a
strict majority already orders (extended Condorcet criterion) -> small blocks by dynamic
programming over subsets -> larger blocks by an LP over pair variables with 3-cycle rows
added only when violated (HiGHS) -> an integer solve only if that LP is fractional and a
local-search ranking does not already meet its bound -> past ``time_limit`` seconds, the
Borda + insertion-search ranking, flagged approximate with its gap to the LP bound.
Ties prefer item-index order (a perturbation below one disagreement in total).

Example:
    >>> kemeny([[0, 1, 2], [1, 2, 0], [0, 2, 1]], n_items=3)
    [0, 1, 2]
    >>> sol = kemeny_solve([[0, 1, 2], [1, 2, 0], [2, 0, 1]], n_items=3)
    >>> sol.objective, sol.exact
    (4, True)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

from ..errors import ConfigurationError, MissingDependencyError
from ._exact import best_order
from ._pairwise import condorcet_blocks, kendall_cost, net_order, pairwise_counts
from .local_search import insertion_refine

__all__ = ["kemeny", "kemeny_solve", "KemenySolution", "kemeny_objective"]

logger = logging.getLogger(__name__)

_PERMS: dict[int, np.ndarray] = {}
_OPTIONS = {"time_limit", "solver", "dp_max"}


@dataclass(frozen=True, slots=True)
class KemenySolution:
    """A Kemeny ranking and what is proven about it.

    ``objective`` counts (ranking, pair) disagreements; ``lower_bound`` is proven, so
    ``exact`` means ``objective == lower_bound``; ``method`` names the steps that ran.
    """

    order: tuple[int, ...]
    objective: int
    lower_bound: float
    exact: bool
    method: str

    @property
    def gap(self) -> float:
        """Relative distance to the lower bound: 0.0 when exact."""
        return (self.objective - self.lower_bound) / max(self.lower_bound, 1.0)


@dataclass(frozen=True, slots=True)
class _Block:
    order: list[int]  # local indices
    objective: int
    lower_bound: float
    method: str


def kemeny_objective(rankings: Sequence[Sequence[int]], order: Sequence[int], n_items: int) -> int:
    """Summed Kendall distance of ``order`` to ``rankings`` over pairs both rank.

    >>> kemeny_objective([[0, 1, 2], [2, 1, 0]], [0, 1, 2], 3)
    3
    """
    return kendall_cost(order, pairwise_counts(rankings, n_items))


def _perturbed(W: np.ndarray) -> np.ndarray:
    """``W`` minus a tie-break bonus (under one disagreement in total) for index order.

    The perturbed cost never exceeds the true one, so its LP bound stays a true bound.
    """
    k = W.shape[0]
    return W - np.tril(np.ones((k, k)), -1) / (k * k)


def _brute(cost: np.ndarray) -> list[int]:
    k = cost.shape[0]
    if k not in _PERMS:
        _PERMS[k] = np.array(list(permutations(range(k))), dtype=np.intp)
    perms = _PERMS[k]
    a, b = np.triu_indices(k, 1)
    totals = cost[perms[:, b], perms[:, a]].sum(1)
    return perms[int(np.argmin(totals))].tolist()


def _small(W: np.ndarray) -> _Block:
    cost = _perturbed(W)
    order = _brute(cost) if W.shape[0] <= 5 else best_order(cost)
    obj = kendall_cost(order, W)
    return _Block(order, obj, float(obj), "dp")


def _heuristic(W: np.ndarray) -> tuple[list[int], int]:
    order = insertion_refine(net_order(W).tolist(), W)
    return order, kendall_cost(order, W)


def _pairs_bound(W: np.ndarray) -> float:
    return float(np.minimum(W, W.T)[np.triu_indices(W.shape[0], 1)].sum())


def _large(W: np.ndarray, deadline: float, solver: Any) -> _Block:
    """A block too big for the DP: LP with lazy 3-cycles, then MIP, else the heuristic."""
    from . import _lp

    heur, upper = _heuristic(W)
    lower = _pairs_bound(W)
    if upper <= lower:
        return _Block(heur, upper, lower, "bound")
    try:
        model = _lp.TriangleModel(_perturbed(W))
    except MissingDependencyError as exc:
        if isinstance(solver, str) and solver == "highs":
            logger.warning("Kemeny falls back to local search: %s", exc)
            return _Block(heur, upper, lower, "heuristic(no highspy)")
        model = None
    k = W.shape[0]
    if model is not None:
        done, lower, X = _lp_rounds(model, deadline, lower, k)
        if done is not None:
            obj = kendall_cost(done, W)
            return _Block(done, obj, float(obj), "lp")
        if X is not None:  # round the LP: most (fractional) wins first, then local search
            start = np.argsort(-X.sum(1), kind="stable").tolist()
            cand = insertion_refine(start, W, deadline=deadline)
            if (cost := kendall_cost(cand, W)) < upper:
                heur, upper = cand, cost
        if upper <= math.ceil(lower - 1e-6):
            return _Block(heur, upper, float(upper), "lp-bound")
    return _integer(W, model, deadline, solver, heur, upper, lower)


def _lp_rounds(
    model: Any, deadline: float, lower: float, k: int
) -> tuple[list[int] | None, float, np.ndarray | None]:
    """Solve the LP, adding violated 3-cycle rows, until none is violated or time is up.

    Returns the order if the LP came out integral, the best bound, the last LP matrix.
    """
    from ._lp import IPM_FROM, order_from_matrix, pair_matrix, violated_triangles

    X = None
    reserve = 1e-3 * k  # time kept back for rounding the last LP solution
    limit = max(200, (20 if k > IPM_FROM else 10) * k)  # IPM re-solves from scratch: fewer rounds
    # without 3-cycle rows the LP optimum is the (perturbed) majority: skip that solve
    cost = model.cost
    model.add_triangles(violated_triangles((cost.T < cost).astype(float), limit=limit))
    while (left := deadline - time.perf_counter() - reserve) > 0:
        res = model.solve(left)
        if not res.optimal:
            break
        lower = max(lower, res.objective)
        X = pair_matrix(res.x, k)
        found = violated_triangles(X, limit=limit)
        if len(found) == 0:
            return (order_from_matrix(X) if res.integral else None), lower, X
        model.add_triangles(found)
    return None, lower, X


def _integer(
    W: np.ndarray,
    model: Any,
    deadline: float,
    solver: Any,
    heur: list[int],
    upper: int,
    lower: float,
) -> _Block:
    """The integer step (HiGHS MIP on the same model, or PuLP), within the time left."""
    left = deadline - time.perf_counter()
    if left <= 0 or (model is not None and left < 3 * model.slowest_solve_s):
        return _Block(heur, upper, lower, "heuristic(time)")  # too little time for a MIP
    if isinstance(solver, str) and solver == "highs":
        order, proven, bound, name = _highs_mip(model, deadline, W.shape[0])
    else:
        from ._pulp import solve_pulp

        triples = model.triples() if model is not None else np.empty((0, 3), dtype=np.intp)
        res = solve_pulp(_perturbed(W), triples, solver, time_limit=deadline - time.perf_counter())
        order, proven, bound, name = res.order, res.optimal, lower, f"mip:pulp:{res.solver}"
    if order is None:
        return _Block(heur, upper, lower, "heuristic(time)")
    obj = kendall_cost(order, W)
    if obj > upper:
        order, obj = heur, upper
    if proven:
        return _Block(order, obj, float(obj), name)
    return _Block(order, obj, max(lower, bound), name + "(time)")


def _highs_mip(model: Any, deadline: float, k: int) -> tuple[list[int] | None, bool, float, str]:
    from ._lp import order_from_matrix, pair_matrix, violated_triangles

    model.make_integer()
    while (left := deadline - time.perf_counter()) > 0:
        res = model.solve(left / 2)  # HiGHS's MIP can overrun its limit up to ~2x on big blocks
        if len(res.x) == 0:
            break
        X = pair_matrix(np.rint(res.x), k)
        found = violated_triangles(X, limit=max(200, 10 * k))
        if len(found):
            model.add_triangles(found)
            continue
        return order_from_matrix(X), res.optimal, model.bound(), "mip:highs"
    return None, False, -math.inf, "mip:highs"


def kemeny_solve(
    rankings: Sequence[Sequence[int]],
    *,
    n_items: int,
    time_limit: float = 1.0,
    solver: Any = "highs",
    dp_max: int = 10,
) -> KemenySolution:
    """Kemeny ranking of ``n_items`` with its proven lower bound.

    ``solver``: ``"highs"`` (default, in process) or a PuLP route for the integer step:
    ``"pulp"``, ``"pulp:CBC"``, ``"pulp:HiGHS"``, ``"pulp:<NAME>"`` or a PuLP solver object.
    ``dp_max``: blocks up to this size are solved by dynamic programming.
    """
    deadline = time.perf_counter() + float(time_limit)
    if (
        isinstance(solver, str)
        and solver not in ("highs", "pulp")
        and not solver.startswith("pulp:")
    ):
        raise ConfigurationError(
            f"unknown Kemeny solver {solver!r}; use 'highs', 'pulp', 'pulp:CBC', 'pulp:HiGHS', "
            "'pulp:<NAME>' or a PuLP solver object"
        )
    W = pairwise_counts(rankings, n_items)
    seen = (W.sum(0) + W.sum(1)) > 0
    for r in rankings:  # an item ranked alone still counts as present
        if len(r) == 1:
            seen[r[0]] = True
    present = np.flatnonzero(seen)
    order: list[int] = []
    slack, methods = 0.0, set()
    for block in condorcet_blocks(W, present):
        if len(block) == 1:
            order.append(int(block[0]))
            continue
        sub = W[block][:, block]
        res = _small(sub) if len(block) <= dp_max else _large(sub, deadline, solver)
        order.extend(block[res.order].tolist())
        slack += res.objective - math.ceil(res.lower_bound - 1e-6)
        methods.add(res.method)
    order.extend(np.flatnonzero(~seen).tolist())
    objective = kendall_cost(order, W)
    return KemenySolution(
        order=tuple(order),
        objective=objective,
        lower_bound=float(objective - slack),
        exact=slack == 0,
        method="+".join(["condorcet", *sorted(methods)]),
    )


def kemeny(rankings: Sequence[Sequence[int]], *, n_items: int, **options: Any) -> list[int]:
    """The Kemeny ranking (see :func:`kemeny_solve` for the options); warns if approximate."""
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown kemeny option(s) {unknown}; accepted: {', '.join(sorted(_OPTIONS))}"
        )
    sol = kemeny_solve(rankings, n_items=n_items, **options)
    if not sol.exact:
        fix = (
            "pip install 'permsc-integrations[highs]'"
            if "no highspy" in sol.method
            else "raise time_limit"
        )
        logger.warning(
            "Kemeny ranking is approximate (%s): objective %d, lower bound %.1f, gap %.3f%%; "
            "for an exact answer: %s",
            sol.method,
            sol.objective,
            sol.lower_bound,
            100 * sol.gap,
            fix,
        )
    return list(sol.order)
