"""Exact, fast Kemeny-Young aggregation: the ranking with the fewest pairwise disagreements.

Pipeline: pairwise counts (a pair counts only where both items appear; memory O(n^2)) ->
blocks that a strict majority already orders (extended Condorcet criterion) -> small blocks
by dynamic programming over subsets -> a larger block gets an insertion local search, is cut
where its order allows (parts that never met need no joint solve), and each big part gets a
lower bound from packed majority cycles, then an LP over pair variables with 3-cycle rows
added only when violated (HiGHS), then an integer solve only if that LP is fractional and
the best ranking does not already meet its bound. Every step stops at ``time_limit``; the
answer is then the best ranking found, flagged approximate with its proven lower bound.
Ties prefer item-index order (a perturbation below one disagreement in total).

Example:
    >>> kemeny([[0, 1, 2], [1, 2, 0], [0, 2, 1]], n_items=3)
    [0, 1, 2]
    >>> sol = kemeny_solve([[0, 1, 2], [1, 2, 0], [2, 0, 1]], n_items=3)
    >>> sol.objective, sol.exact
    (4, True)
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from permsc_integrations._registry import publish
from permsc_integrations.aggregators import Aggregator
from permsc_integrations.aggregators._exact import best_order
from permsc_integrations.aggregators._large import Part, perturbed, solve_large
from permsc_integrations.aggregators._local_search import insertion_refine, local_search
from permsc_integrations.aggregators._pairwise import (
    condorcet_blocks,
    kendall_cost,
    listed,
    majority_order,
    order_parts,
    pair_indices,
    pairwise_counts,
    split_by_order,
)
from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; only read by the type checker

__all__ = ["kemeny", "kemeny_with", "kemeny_solve", "KemenySolution", "kemeny_objective"]

logger = logging.getLogger(__name__)

_PERMS: dict[int, np.ndarray] = {}
_OPTIONS = {"time_limit", "solver", "dp_max"}


@dataclass(frozen=True, slots=True)
class _Options:
    solver: object
    dp_max: int


_Solved = list[tuple[np.ndarray, Part | None]]  # items (global) and their solved order


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


def kemeny_objective(rankings: Sequence[Sequence[int]], order: Sequence[int], n_items: int) -> int:
    """Summed Kendall distance of ``order`` to ``rankings`` over pairs both rank.

    >>> kemeny_objective([[0, 1, 2], [2, 1, 0]], [0, 1, 2], 3)
    3
    """
    return kendall_cost(order, pairwise_counts(rankings, n_items))


def _brute(cost: np.ndarray) -> list[int]:
    k = cost.shape[0]
    if k not in _PERMS:
        _PERMS[k] = np.array(list(permutations(range(k))), dtype=np.intp)
    perms = _PERMS[k]
    a, b = pair_indices(k)
    totals = cost[perms[:, b], perms[:, a]].sum(1)
    return perms[int(np.argmin(totals))].tolist()


def _small(W: np.ndarray) -> Part:
    cost = perturbed(W)
    order = _brute(cost) if W.shape[0] <= 5 else best_order(cost)
    obj = kendall_cost(order, W)
    return Part(order, obj, float(obj), "dp")


class _Budget:
    """Shares the time left among the big parts, in proportion to ``k^2`` (their LP size)."""

    def __init__(self, deadline: float, sizes: Sequence[int]) -> None:
        self.deadline, self.pending = deadline, sum(k * k for k in sizes)

    def take(self, k: int) -> float:
        """The deadline of the next part of ``k`` items (parts that finish early give back)."""
        now = time.perf_counter()
        share = max(0.0, self.deadline - now) * k * k / max(self.pending, k * k)
        self.pending -= k * k
        return now + share


def _solve_block(W: np.ndarray, block: np.ndarray, budget: _Budget, opts: _Options) -> _Solved:
    """Solve one Condorcet block: local search, then cut it into independent parts."""
    k = len(block)
    sub = W[np.ix_(block, block)]
    if k <= opts.dp_max:
        return [(block, _small(sub))]
    deadline = budget.take(k)
    now = time.perf_counter()
    start = insertion_refine(majority_order(sub).tolist(), sub, deadline=now + (deadline - now) / 2)
    parts = order_parts(sub, split_by_order(sub, start))
    inner = _Budget(deadline, [len(p) for p in parts if len(p) > opts.dp_max])
    solved: _Solved = []
    for part in parts:  # each in the local search's order
        items = np.sort(part)  # index order, for the tie-break
        if len(part) == 1:
            solved.append((block[items], None))
        elif len(part) <= opts.dp_max:
            solved.append((block[items], _small(sub[np.ix_(items, items)])))
        else:
            local = np.searchsorted(items, part).tolist()
            res = solve_large(sub[np.ix_(items, items)], local, inner.take(len(part)), opts.solver)
            solved.append((block[items], res))
    return solved


def _check_solver(solver: object) -> None:
    if (
        isinstance(solver, str)
        and solver not in ("highs", "pulp")
        and not solver.startswith("pulp:")
    ):
        raise ConfigurationError(
            f"unknown Kemeny solver {solver!r}; use 'highs', 'pulp', 'pulp:CBC', 'pulp:HiGHS', "
            "'pulp:<NAME>' or a PuLP solver object"
        )


def kemeny_solve(
    rankings: Sequence[Sequence[int]],
    *,
    n_items: int,
    time_limit: float = 1.0,
    solver: object = "highs",
    dp_max: int = 10,
) -> KemenySolution:
    """Kemeny ranking of ``n_items`` with its proven lower bound.

    ``time_limit``: seconds for the whole call; past it the answer is the best found, flagged
    (``exact=False``, ``(time)`` in ``method``) with its proven ``lower_bound``.
    ``solver``: ``"highs"`` (default, in process) or a PuLP route for the integer step:
    ``"pulp"``, ``"pulp:CBC"``, ``"pulp:HiGHS"``, ``"pulp:<NAME>"`` or a PuLP solver object.
    ``dp_max``: blocks up to this size are solved by dynamic programming.
    """
    deadline = time.perf_counter() + float(time_limit)
    _check_solver(solver)
    opts = _Options(solver, dp_max)
    W = pairwise_counts(rankings, n_items)
    present = listed(rankings, W)
    blocks = condorcet_blocks(W, np.flatnonzero(present))
    budget = _Budget(deadline, [len(b) for b in blocks if len(b) > dp_max])
    order: list[int] = []
    slack, methods = 0.0, set()
    for block in blocks:
        if len(block) == 1:  # most blocks on consistent answers: nothing to solve
            order.append(int(block[0]))
            continue
        for items, res in _solve_block(W, block, budget, opts):
            if res is None:
                order.extend(items.tolist())
                continue
            order.extend(items[res.order].tolist())
            slack += res.objective - math.ceil(res.lower_bound - 1e-6)
            methods.add(res.method)
    order.extend(np.flatnonzero(~present).tolist())
    objective = kendall_cost(order, W)
    return KemenySolution(
        order=tuple(order),
        objective=objective,
        lower_bound=float(objective - slack),
        exact=slack == 0,
        method="+".join(["condorcet", *sorted(methods)]),
    )


class KemenyOptions(TypedDict, total=False):
    """:func:`kemeny`'s options (see :func:`kemeny_solve`)."""

    time_limit: float
    solver: object  # "highs", "pulp", "pulp:<NAME>" or a PuLP solver object
    dp_max: int


def _check_options(options: Mapping[str, object]) -> None:
    if unknown := sorted(options.keys() - _OPTIONS):
        raise ConfigurationError(
            f"unknown kemeny option(s) {unknown}; accepted: {', '.join(sorted(_OPTIONS))}"
        )


def kemeny(
    rankings: Sequence[Sequence[int]],
    *,
    n_items: int,
    time_limit: float = 1.0,
    solver: object = "highs",
    dp_max: int = 10,
    **unknown: object,
) -> list[int]:
    """The Kemeny ranking (see :func:`kemeny_solve` for the options); warns if approximate."""
    _check_options(unknown)
    sol = kemeny_solve(
        rankings, n_items=n_items, time_limit=time_limit, solver=solver, dp_max=dp_max
    )
    if not sol.exact:
        fix = (
            "pip install highspy"
            if "no highspy" in sol.method
            else "raise time_limit (aggregator=kemeny_with(time_limit=SECONDS); on the command "
            "line --kemeny-time-limit SECONDS)"
        )
        logger.warning(
            "Kemeny ranking is approximate (%s): %s; for an exact answer: %s",
            sol.method,
            how_far(sol),
            fix,
        )
    return list(sol.order)


def how_far(sol: KemenySolution) -> str:
    """What is proven about an approximate ranking: its gap to the lower bound, or, where
    the bound is under half the objective, that it says little (a gap of 7700 % is no news).

    >>> how_far(KemenySolution((0, 1), 103, 100.0, False, "heuristic(time)"))
    'objective 103, at most 3.0 % above the optimum (lower bound 100)'
    >>> how_far(KemenySolution((0, 1), 78, 1.0, False, "heuristic(time)"))
    'objective 78; the proven lower bound (1) is too weak to say how close it is'
    """
    if sol.lower_bound * 2 < sol.objective:
        return (
            f"objective {sol.objective}; the proven lower bound ({sol.lower_bound:.0f}) is too "
            "weak to say how close it is"
        )
    return (
        f"objective {sol.objective}, at most {100 * sol.gap:.1f} % above the optimum "
        f"(lower bound {sol.lower_bound:.0f})"
    )


def kemeny_with(**options: Unpack[KemenyOptions]) -> Aggregator:
    """Kemeny with ``options`` (those of :func:`kemeny_solve`: ``time_limit``, ``solver``,
    ``dp_max``) as an aggregator, keeping its quick stand-in for a blocks round's head.

    >>> slow = kemeny_with(time_limit=10.0)
    >>> slow([[0, 1, 2], [1, 2, 0], [0, 2, 1]], n_items=3), slow.quick is kemeny.quick
    ([0, 1, 2], True)
    """
    _check_options(options)
    tuned = functools.partial(kemeny, **options)
    tuned.quick = local_search  # type: ignore[attr-defined]
    return tuned


# what picks a blocks round's head by default (strategies.Blocks.head_by): insertion local
# search, as in Kemeny's own first step; milliseconds where this takes up to its time_limit
kemeny.quick = local_search  # type: ignore[attr-defined]


publish("permsc_integrations.aggregators.kemeny", KemenySolution, kemeny_solve, kemeny_with)
