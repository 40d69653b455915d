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
sets the scale. Answers that only copy the order shown (echoes and reversals) are left out.
Items a partial answer leaves out count as beaten as far as the list's partial answers leave
out what the model ranks low (a model that stops early), and not at all where they leave out
items at random (a model that skips some): the fit reads that first (``_left_out``).

Example:
    >>> fit = fit_list(4, [Answer((0, 1, 2, 3), (3, 2, 1, 0)), Answer((3, 1, 0, 2), (3, 2, 1, 0))])
    >>> list(fit.order())
    [3, 2, 1, 0]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from permsc_integrations.results import answer_defect

__all__ = ["Answer", "ListFit", "fit_list", "is_copy", "position_effects", "POSTERIOR_DRAWS"]

DEGREE = 4  # position effects: Legendre polynomials 1..4 of the relative position (untuned)
PRIOR_POSITION = 1.0  # prior sd of each position coefficient (untuned)
PRIOR_SLOPE = 3.0  # prior sd of a, the weight of the first-stage order (untuned)
POSTERIOR_DRAWS = 400  # draws of the posterior per estimate: top-k chances, the stop rule (untuned)


@dataclass(frozen=True, slots=True)
class Answer:
    """``shown``: the items in prompt order; ``ranking``: the items best first (a partial
    ranking says of the items it leaves out what the answers show: :func:`fit_list`)."""

    shown: tuple[int, ...]
    ranking: tuple[int, ...]


COPIES = frozenset({"echo", "reversed"})
"""The defects that copy the order shown (:func:`~permsc_integrations.results.answer_defect`)."""


def is_copy(answer: Answer) -> bool:
    """An answer that names its items in the order shown or its reverse (4 or more items:
    by chance one time in 24 or fewer, either way) tells nothing about them
    (:func:`~permsc_integrations.results.answer_defect`).

    >>> is_copy(Answer((2, 0, 1, 3), (2, 0, 1, 3))), is_copy(Answer((2, 0, 1, 3), (3, 1, 0, 2)))
    (True, True)
    >>> is_copy(Answer((2, 0, 1, 3), (0, 2, 1, 3)))
    False
    """
    return answer_defect(answer.shown, answer.ranking) in COPIES


@functools.lru_cache(maxsize=256)
def _basis(size: int) -> np.ndarray:
    """The position basis of a window of ``size`` items (``size`` x DEGREE), read-only."""
    x = np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    out = np.polynomial.legendre.legvander(x, DEGREE)[:, 1:]
    out.flags.writeable = False
    return out


def position_effects(fit: ListFit, size: int) -> list[float]:
    """The fitted position effect of each prompt position of a window of ``size`` items."""
    return [float(x) for x in _basis(size) @ fit.position]


@dataclass(frozen=True, slots=True)
class ListFit:
    """The posterior mode and covariance of the utilities of ``n`` items."""

    mean: np.ndarray  # u, the posterior mode
    cov: np.ndarray  # the Laplace covariance of u
    position: np.ndarray  # the position coefficients
    slope: float  # a
    tau: float
    seen: np.ndarray  # bool: the item was in an answer that counted
    slope_sd: float = 0.0  # the posterior sd of a (0: a known, as in a fit built by hand)

    def order(self) -> tuple[int, ...]:
        """Items by posterior mean, best first; ties by index (the first-stage order)."""
        return tuple(int(i) for i in np.lexsort((np.arange(len(self.mean)), -self.mean)))

    def draws(self, count: int = POSTERIOR_DRAWS, seed: int = 0) -> np.ndarray:
        """``count`` draws of u from the posterior (rows)."""
        rng = np.random.default_rng(seed)
        jitter = 1e-9 * np.eye(len(self.mean))
        chol = np.linalg.cholesky(self.cov + jitter)
        return self.mean + rng.standard_normal((count, len(self.mean))) @ chol.T

    def top_probabilities(
        self, k: int, *, count: int = POSTERIOR_DRAWS, seed: int = 0
    ) -> np.ndarray:
        """Each item's posterior probability of being among the top ``k``."""
        draws = self.draws(count, seed)
        k = min(k, draws.shape[1])
        top = np.argpartition(-draws, k - 1, axis=1)[:, :k]
        return np.bincount(top.ravel(), minlength=draws.shape[1]) / count


@dataclass(frozen=True, slots=True)
class _Group:
    """The answers of one window size, as arrays: per answer, its items in slots (the ranked
    ones best first, then the unnamed ones), which slots are ranked, each slot's position
    basis row, and the flat (item, item) index of every slot pair (for the Hessian)."""

    items: np.ndarray  # A x w
    named: np.ndarray  # A x w, bool
    basis: np.ndarray  # A x w x DEGREE
    pairs: np.ndarray  # A*w*w


def _slots(answer: Answer) -> tuple[list[int], int]:
    """The shown positions of the ranked items (best first) then of the rest; how many
    are ranked."""
    position = {item: p for p, item in enumerate(answer.shown)}
    ranked = [position[i] for i in dict.fromkeys(answer.ranking) if i in position]
    rest = sorted(set(range(len(answer.shown))) - set(ranked))
    return ranked + rest, len(ranked)


def _groups(n: int, answers: Sequence[Answer]) -> list[_Group]:
    by_size: dict[int, list[Answer]] = {}
    for a in answers:
        by_size.setdefault(len(a.shown), []).append(a)
    out = []
    for w, group in by_size.items():
        slots = [_slots(a) for a in group]
        order = np.array([s for s, _ in slots], dtype=int)
        shown = np.array([a.shown for a in group], dtype=int)
        items = np.take_along_axis(shown, order, axis=1)
        named = np.arange(w)[None, :] < np.array([c for _, c in slots])[:, None]
        pairs = (items[:, :, None] * n + items[:, None, :]).ravel()
        out.append(_Group(items, named, _basis(w)[order], pairs))
    return out


Reading = Callable[[np.ndarray, np.ndarray, float], tuple[float, np.ndarray, np.ndarray]]


def _plackett_luce(
    s: np.ndarray, named: np.ndarray, left_out: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """Log-likelihood, gradient and Hessian (per answer, in slot order) of answers whose
    slots score ``s`` (A x w): a chain of choices, the best of the ranked items, then the
    best of the rest... The items a partial answer leaves out stand in each choice with
    weight ``left_out``: 0, they add nothing (a model that skips items at random); 1, each
    named item beat them (a model that stops early: a top-m ranking)."""
    e = np.exp(s - s.max(axis=1, keepdims=True)) * np.where(named, 1.0, left_out)
    suffix = np.cumsum(e[:, ::-1], axis=1)[:, ::-1]
    inv = np.where(named, 1.0 / np.where(named, suffix, 1.0), 0.0)
    p = np.triu(inv[:, :, None] * e[:, None, :])  # p[a, r, j]: slot j's chance at stage r
    loglik = float(np.sum(np.log(np.where(named, e * inv, 1.0))))
    taken = p.sum(axis=1)
    hess = np.einsum("arj,arl->ajl", p, p)
    hess[:, np.arange(s.shape[1]), np.arange(s.shape[1])] -= taken
    return loglik, named - taken, hess


def _pairwise(
    s: np.ndarray, named: np.ndarray, left_out: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """As :func:`_plackett_luce`, but every ordered pair of named items a Bradley-Terry
    comparison weighted ``2 / w``: each pair alike, as Kemeny and Borda read a ranking,
    rather than a chain of choices (a named item over one left out: weight ``left_out``)."""
    w = s.shape[1]
    both = named[:, :, None] & named[:, None, :]
    over = named[:, :, None] & ~named[:, None, :]
    above = np.triu(both + left_out * over, 1)
    p = 1.0 / (1.0 + np.exp(-(s[:, :, None] - s[:, None, :])))  # P(slot i over slot j)
    weight = 2.0 / w
    loglik = float(weight * np.sum(above * np.log(np.where(above > 0, p, 1.0))))
    lose = above * (1 - p)
    grad = weight * (lose.sum(axis=2) - lose.sum(axis=1))
    curv = weight * (above + above.transpose(0, 2, 1)) * p * (1 - p)
    hess = curv.copy()
    hess[:, np.arange(w), np.arange(w)] -= curv.sum(axis=2)
    return loglik, grad, hess


READINGS: dict[str, Reading] = {"plackett-luce": _plackett_luce, "pairs": _pairwise}
"""How an answer is read: a chain of choices, or each pair alike (docs/benchmarks.md
"frontier-replay": the reading is :func:`fit_list`'s ``reading``, Plackett-Luce by default)."""
TAU_FLOOR, TAU_CEILING = 0.2, 5.0  # the fitted spread of the utilities is kept within (untuned)


def fit_list(
    n: int,
    answers: Sequence[Answer],
    *,
    iterations: int = 30,
    em_steps: int = 3,
    tau: float | None = None,
    reading: str = "plackett-luce",
) -> ListFit:
    """The model of module docstring, fitted to ``answers`` about items ``0..n-1`` (in the
    first-stage order). ``tau``: fix the prior's spread instead of fitting it; ``reading``:
    how an answer is read (:data:`READINGS`)."""
    read = READINGS[reading]
    kept = [a for a in answers if len(a.ranking) >= 1 and len(a.shown) >= 2 and not is_copy(a)]
    f = -np.log1p(np.arange(n, dtype=float))
    f -= f.mean()
    groups = _groups(n, kept)
    theta, cov_full, spread = _em(n, groups, f, tau, (em_steps, iterations), 0.0, read)
    left_out = _left_out(groups, theta[:n])
    if left_out > 0.0:
        theta, cov_full, spread = _em(n, groups, f, tau, (em_steps, iterations), left_out, read)
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
        float(np.sqrt(max(cov_full[-1, -1], 0.0))),
    )


def _em(
    n: int,
    groups: Sequence[_Group],
    f: np.ndarray,
    tau: float | None,
    steps: tuple[int, int],
    left_out: float,
    read: Reading,
) -> tuple[np.ndarray, np.ndarray, float]:
    """The posterior mode, its covariance and the prior's spread (fitted unless ``tau``), in
    ``steps``: (EM steps, Newton iterations in each)."""
    em_steps, iterations = steps
    spread = 1.0 if tau is None else tau
    theta = np.zeros(n + DEGREE + 1)
    for _ in range(em_steps if tau is None else 1):
        theta, hess = _newton(n, groups, (f, spread, theta), iterations, left_out, read)
        cov_full = np.linalg.inv(-hess)
        if tau is None:
            resid = theta[:n] - theta[-1] * f
            spread = float(np.sqrt(np.mean(resid**2 + np.diag(cov_full)[:n])))
            spread = min(max(spread, TAU_FLOOR), TAU_CEILING)
    return theta, cov_full, spread


def _left_out(groups: Sequence[_Group], u: np.ndarray) -> float:
    """How much leaving an item out says about it in these answers: ``2 rho - 1``, floored
    at 0, where ``rho`` is the share of (named, left out) pairs of the partial answers whose
    named item the fit that reads omissions as nothing (``u``) puts higher. A model that
    stops early leaves out the worst items (rho near 1); one that skips at random, any
    (rho near 1/2)."""
    wins = pairs = 0.0
    for g in groups:
        v = u[g.items]
        over = g.named[:, :, None] & ~g.named[:, None, :]
        pairs += float(over.sum())
        wins += float(np.sum(over * (v[:, :, None] > v[:, None, :])))
    return max(0.0, 2.0 * wins / pairs - 1.0) if pairs else 0.0


def _prior(n: int, f: np.ndarray, tau: float) -> np.ndarray:
    """The prior's precision over (u, position coefficients, a): u ~ N(a f, tau^2)."""
    size, pos = n + DEGREE + 1, slice(n, n + DEGREE)
    prior = np.zeros((size, size))
    prior[:n, :n] = np.eye(n) / tau**2
    prior[:n, -1] = prior[-1, :n] = -f / tau**2
    prior[-1, -1] = f @ f / tau**2 + 1.0 / PRIOR_SLOPE**2
    prior[pos, pos] = np.eye(DEGREE) / PRIOR_POSITION**2
    return prior


def _gradient(
    n: int, groups: Sequence[_Group], theta: np.ndarray, left_out: float, read: Reading
) -> tuple[np.ndarray, np.ndarray]:
    """The answers' log-likelihood gradient and Hessian at ``theta``."""
    size, pos = n + DEGREE + 1, slice(n, n + DEGREE)
    grad, hess = np.zeros(size), np.zeros((size, size))
    uu = np.zeros(n * n)
    for g in groups:
        _, gr, h = read(theta[g.items] + g.basis @ theta[pos], g.named, left_out)
        flat = g.items.ravel()
        grad[:n] += np.bincount(flat, gr.ravel(), n)
        grad[pos] += np.einsum("aw,awd->d", gr, g.basis)
        uu += np.bincount(g.pairs, h.ravel(), n * n)
        hb = np.einsum("ajl,ald->ajd", h, g.basis).reshape(-1, DEGREE)
        cross = np.stack([np.bincount(flat, hb[:, d], n) for d in range(DEGREE)], axis=1)
        hess[:n, pos] += cross
        hess[pos, :n] += cross.T
        hess[pos, pos] += g.basis.reshape(-1, DEGREE).T @ hb
    hess[:n, :n] += uu.reshape(n, n)
    return grad, hess


def _newton(
    n: int,
    groups: Sequence[_Group],
    start: tuple[np.ndarray, float, np.ndarray],
    iterations: int,
    left_out: float,
    read: Reading,
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior mode by (damped) Newton's method from ``start``: (the first-stage
    scores f, the prior's spread, theta); the Hessian there."""
    f, tau, theta = start
    prior = _prior(n, f, tau)
    for step_number in range(iterations + 1):
        grad, hess = _gradient(n, groups, theta, left_out, read)
        grad, hess = grad - prior @ theta, hess - prior
        if step_number == iterations:
            break
        step = np.linalg.solve(hess, -grad)
        largest = np.max(np.abs(step))
        theta = theta + (step if largest <= 2.0 else step * (2.0 / largest))
        if largest < 1e-6:
            break
    return theta, hess
