"""The integer step of Kemeny through PuLP, so users can bring CBC, HiGHS, Gurobi or CPLEX.

Same model as :mod:`._lp`: a binary per unordered pair and the 3-cycle rows found so far;
after each solve, rows the integer solution violates are added and it is solved again.

Example:
    >>> import numpy as np
    >>> cost = np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 1.0, 0.0]])
    >>> solve_pulp(cost, np.empty((0, 3), dtype=int), "pulp:CBC", time_limit=10).optimal
    True
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from permsc_integrations.aggregators._lp import order_from_matrix, pair_matrix, violated_triangles
from permsc_integrations.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:
    from pulp import LpProblem, LpVariable  # untyped: the type checker reads them as Any

__all__ = ["solve_pulp", "PulpResult", "make_solver"]


@dataclass(frozen=True, slots=True)
class PulpResult:
    order: list[int] | None
    objective: float
    optimal: bool
    solver: str


def _pulp() -> ModuleType:
    try:
        # lazy: optional dependency (the pulp extra)
        import pulp
    except ImportError:
        raise MissingDependencyError("pulp", "pulp", purpose="Kemeny with solver='pulp'") from None
    return pulp


def make_solver(spec: object, time_limit: float) -> tuple[object, str]:
    """A PuLP solver from ``"pulp"``, ``"pulp:CBC"``, ``"pulp:HiGHS"``, ``"pulp:<NAME>"``
    or a solver object."""
    pulp = _pulp()
    if not isinstance(spec, str):
        return spec, type(spec).__name__
    name = spec.partition(":")[2] or "CBC"
    aliases = {"CBC": "PULP_CBC_CMD", "HIGHS": "HiGHS", "GUROBI": "GUROBI", "CPLEX": "CPLEX_PY"}
    full = aliases.get(name.upper(), name)
    if full not in pulp.listSolvers():
        raise ConfigurationError(
            f"unknown PuLP solver {name!r}; known: {', '.join(pulp.listSolvers())}"
        )
    with warnings.catch_warnings():  # PuLP 3.x deprecates its bundled CBC; it still works
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.getSolver(full, msg=False, timeLimit=max(1, int(np.ceil(time_limit))))
    if not solver.available():
        raise ConfigurationError(
            f"PuLP solver {full} is not available here; available: "
            f"{', '.join(pulp.listSolvers(onlyAvailable=True))}"
        )
    return solver, full


def _model(
    pulp: ModuleType, cost: np.ndarray, triples: np.ndarray
) -> tuple[LpProblem, dict[tuple[int, int], LpVariable]]:
    k = cost.shape[0]
    prob = pulp.LpProblem("kemeny", pulp.LpMinimize)
    new = getattr(prob, "add_variable", None)  # PuLP >= 3.3; LpVariable(...) is deprecated there
    x = {
        (i, j): new(f"x_{i}_{j}", cat="Binary")
        if new
        else pulp.LpVariable(f"x_{i}_{j}", cat="Binary")
        for i in range(k)
        for j in range(i + 1, k)
    }
    offset = float(sum(cost[i, j] for i, j in x))
    prob += pulp.lpSum(float(cost[j, i] - cost[i, j]) * v for (i, j), v in x.items()) + offset
    _add_rows(pulp, prob, x, triples)
    return prob, x


def _add_rows(
    pulp: ModuleType, prob: LpProblem, x: dict[tuple[int, int], LpVariable], triples: np.ndarray
) -> None:
    for i, j, h in np.asarray(triples, dtype=int).tolist():
        expr = x[i, j] + x[j, h] - x[i, h]
        prob += expr <= 1, f"up_{i}_{j}_{h}"
        prob += expr >= 0, f"lo_{i}_{j}_{h}"


def solve_pulp(
    cost: np.ndarray, triples: np.ndarray, spec: object, *, time_limit: float
) -> PulpResult:
    """Solve the block's integer model with PuLP, adding violated 3-cycle rows lazily."""

    pulp = _pulp()
    deadline = time.perf_counter() + time_limit
    k = cost.shape[0]
    prob, x = _model(pulp, cost, triples)
    iu, ju = np.triu_indices(k, 1)
    while True:
        solver, name = make_solver(spec, deadline - time.perf_counter())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            prob.solve(solver)
        values = np.array(
            [x[i, j].value() or 0.0 for i, j in zip(iu.tolist(), ju.tolist(), strict=True)]
        )
        proven = getattr(prob, "sol_status", prob.status) == 1
        X = pair_matrix(np.rint(values), k)
        found, _ = violated_triangles(X, limit=max(100, 10 * k))
        if len(found) == 0:
            obj = float(pulp.value(prob.objective) or 0.0)
            return PulpResult(order_from_matrix(X), obj, proven, name)
        if time.perf_counter() >= deadline:
            return PulpResult(None, float("inf"), False, name)
        _add_rows(pulp, prob, x, found)
