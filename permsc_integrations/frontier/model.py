"""One model of the list from every sample: Plackett-Luce with position effects and a prior
from the first-stage order; its Laplace posterior gives each item's chance of the top k.

An *answer* is a window shown in some order and the model's ranking of it. Each answer's
ranking is a Plackett-Luce draw over ``s = u[item] + position effect``: ``u`` the items'
utilities, the position effect a smooth function of the relative position in the prompt
(Legendre polynomials of degree 1-4), so a model that favours the first or last places is
corrected rather than merely averaged (the windows' positions are shuffled, which makes the
effect estimable). The prior ``u[i] ~ N(a * f(rank_i), tau^2)`` takes the first-stage order as
evidence (``f(r) = -log(1 + r)``, ``a`` fitted): with few answers the first stage decides,
with many the answers do; ``tau`` is fitted too (a few EM steps), so the model's own noise
sets the scale. Answers that only copy the order shown (echoes) are left out.

Example:
    >>> fit = fit_list(4, [Answer((0, 1, 2, 3), (3, 2, 1, 0)), Answer((3, 1, 0, 2), (3, 2, 1, 0))])
    >>> list(fit.order())
    [3, 2, 1, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Answer", "ListFit", "fit_list", "is_echo", "position_effects"]

DEGREE = 4  # position effects: Legendre polynomials 1..4 of the relative position
PRIOR_POSITION = 1.0  # prior sd of each position coefficient
PRIOR_SLOPE = 3.0  # prior sd of a, the weight of the first-stage order


@dataclass(frozen=True, slots=True)
class Answer:
    """``shown``: the items in prompt order; ``ranking``: the items best first (a partial
    ranking leaves the rest tied below it)."""

    shown: tuple[int, ...]
    ranking: tuple[int, ...]


def is_echo(answer: Answer) -> bool:
    """An answer that names its items in the order shown (4 or more items: by chance one
    time in 24 or fewer) tells nothing about them.

    >>> is_echo(Answer((2, 0, 1, 3), (2, 0, 1, 3))), is_echo(Answer((2, 0, 1, 3), (0, 2, 1, 3)))
    (True, False)
    """
    named = set(answer.ranking)
    return len(answer.ranking) >= 4 and list(answer.ranking) == [
        i for i in answer.shown if i in named
    ]


def _basis(position: int, size: int) -> np.ndarray:
    x = 2.0 * position / (size - 1) - 1.0 if size > 1 else 0.0
    return np.polynomial.legendre.legvander(np.array([x]), DEGREE)[0, 1:]


def position_effects(fit: ListFit, size: int) -> list[float]:
    """The fitted position effect of each prompt position of a window of ``size`` items."""
    return [float(_basis(q, size) @ fit.position) for q in range(size)]


@dataclass(frozen=True, slots=True)
class ListFit:
    """The posterior mode and covariance of the utilities of ``n`` items."""

    mean: np.ndarray  # u, the posterior mode
    cov: np.ndarray  # the Laplace covariance of u
    position: np.ndarray  # the position coefficients
    slope: float  # a
    tau: float
    seen: np.ndarray  # bool: the item was in an answer that counted

    def order(self) -> tuple[int, ...]:
        """Items by posterior mean, best first; ties by index (the first-stage order)."""
        return tuple(int(i) for i in np.lexsort((np.arange(len(self.mean)), -self.mean)))

    def draws(self, count: int, seed: int) -> np.ndarray:
        """``count`` draws of u from the posterior (rows)."""
        rng = np.random.default_rng(seed)
        jitter = 1e-9 * np.eye(len(self.mean))
        chol = np.linalg.cholesky(self.cov + jitter)
        return self.mean + rng.standard_normal((count, len(self.mean))) @ chol.T

    def top_probabilities(self, k: int, *, count: int = 400, seed: int = 0) -> np.ndarray:
        """Each item's posterior probability of being among the top ``k``."""
        draws = self.draws(count, seed)
        k = min(k, draws.shape[1])
        top = np.argpartition(-draws, k - 1, axis=1)[:, :k]
        hits = np.zeros(draws.shape[1])
        np.add.at(hits, top.ravel(), 1.0)
        return hits / count


def _stages(
    answer: Answer, s: np.ndarray, index: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Log-likelihood, gradient and Hessian (in the answer's shown positions) of one answer
    whose positions score ``s`` (``index[p]``: the shown position of the p-th ranked item).
    A partial answer is a ranking of the items it names: the others add nothing (as the
    aggregators count a pair only where both items appear)."""
    w = len(s)
    e = np.exp(s[index] - s[index].max())
    suffix = np.cumsum(e[::-1])[::-1]
    p = np.triu(np.outer(1.0 / suffix, e))  # p[r, j]: the j-th ranked item's chance at stage r
    loglik = float(np.sum(np.log(e / suffix)))
    grad, hess = np.zeros(w), np.zeros((w, w))
    grad[index] = 1.0 - p.sum(axis=0)
    hess[np.ix_(index, index)] = p.T @ p - np.diag(p.sum(axis=0))
    return loglik, grad, hess


def _pairwise(
    answer: Answer, s: np.ndarray, index: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """As :func:`_stages`, but every ordered pair of named items a Bradley-Terry comparison
    weighted ``2 / w``: each pair alike, as Kemeny and Borda read a ranking, rather than a
    chain of choices (measured against Plackett-Luce in docs/benchmarks.md "frontier")."""
    w = len(s)
    rank = np.full(w, np.inf)
    rank[index] = np.arange(len(index))
    above = ((rank[:, None] < rank[None, :]) & np.isfinite(rank)[None, :]).astype(float)
    p = 1.0 / (1.0 + np.exp(-(s[:, None] - s[None, :])))  # P(i over j)
    weight = 2.0 / w
    loglik = float(weight * np.sum(above * np.log(p)))
    grad = weight * (np.sum(above * (1 - p), axis=1) - np.sum(above.T * (1 - p.T), axis=1))
    curv = weight * (above + above.T) * p * (1 - p)
    return loglik, grad, curv - np.diag(curv.sum(axis=1))


READINGS = {"plackett-luce": _stages, "pairs": _pairwise}
"""How an answer is read: a chain of choices, or each pair alike (docs/benchmarks.md
"frontier-replay": pairs read a small model's partial WordSort answers better, Plackett-Luce
the judge's full answers)."""
READING = "plackett-luce"


def fit_list(
    n: int,
    answers: Sequence[Answer],
    *,
    iterations: int = 30,
    em_steps: int = 3,
    tau: float | None = None,
) -> ListFit:
    """The model of module docstring, fitted to ``answers`` about items ``0..n-1`` (in the
    first-stage order). ``tau``: fix the prior's spread instead of fitting it."""
    kept = [a for a in answers if len(a.ranking) >= 1 and len(a.shown) >= 2 and not is_echo(a)]
    f = -np.log1p(np.arange(n, dtype=float))
    f -= f.mean()
    spread = 1.0 if tau is None else tau
    theta = np.zeros(n + DEGREE + 1)
    for _ in range(em_steps if tau is None else 1):
        theta, hess = _newton(n, kept, f, spread, theta, iterations)
        cov_full = np.linalg.inv(-hess)
        if tau is None:
            resid = theta[:n] - theta[-1] * f
            spread = float(np.sqrt(np.mean(resid**2 + np.diag(cov_full)[:n])))
            spread = min(max(spread, 0.2), 5.0)
    seen = np.zeros(n, dtype=bool)
    for a in kept:
        seen[list(a.shown)] = True
    return ListFit(
        theta[:n].copy(),
        cov_full[:n, :n].copy(),
        theta[n:-1].copy(),
        float(theta[-1]),
        spread,
        seen,
    )


def _design(answers: Sequence[Answer]) -> list[tuple[Answer, np.ndarray, np.ndarray, np.ndarray]]:
    """Per answer: its items (shown order), position basis rows, and ranked positions."""
    out = []
    for a in answers:
        w = len(a.shown)
        basis = np.array([_basis(p, w) for p in range(w)])
        position = {item: p for p, item in enumerate(a.shown)}
        ranked = np.array([position[i] for i in a.ranking if i in position], dtype=int)
        out.append((a, np.array(a.shown, dtype=int), basis, ranked))
    return out


def _newton(
    n: int, answers: Sequence[Answer], f: np.ndarray, tau: float, theta: np.ndarray, iterations: int
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior mode by (damped) Newton's method from ``theta``; the Hessian there."""
    designs = _design(answers)
    size, pos = len(theta), slice(n, n + DEGREE)
    prior = np.zeros((size, size))
    # u ~ N(a f, tau^2): the quadratic form over (u, a)
    prior[:n, :n] = np.eye(n) / tau**2
    prior[:n, -1] = prior[-1, :n] = -f / tau**2
    prior[-1, -1] = f @ f / tau**2 + 1.0 / PRIOR_SLOPE**2
    prior[pos, pos] = np.eye(DEGREE) / PRIOR_POSITION**2
    for step_number in range(iterations + 1):
        grad, hess = -prior @ theta, -prior.copy()
        for a, items, basis, ranked in designs:
            _, g, h = READINGS[READING](a, theta[items] + basis @ theta[pos], ranked)
            np.add.at(grad, items, g)
            grad[pos] += basis.T @ g
            hb = h @ basis
            hess[np.ix_(items, items)] += h
            hess[items, pos] += hb
            hess[pos, items] += hb.T
            hess[pos, pos] += basis.T @ hb
        if step_number == iterations:
            break
        step = np.linalg.solve(hess, -grad)
        largest = np.max(np.abs(step))
        theta = theta + (step if largest <= 2.0 else step * (2.0 / largest))
        if largest < 1e-6:
            break
    return theta, hess
