"""The list model's vectorised fit (answers grouped by window size) against a straightforward
per-answer reference written here: the same posterior on random full and partial answers,
windows of mixed sizes, in both readings (Plackett-Luce and pairs)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from permsc_integrations.strategies._frontier import model
from permsc_integrations.strategies._frontier.model import DEGREE, Answer

pytestmark = pytest.mark.timeout(120)


def basis_row(position: int, size: int) -> np.ndarray:
    x = 2.0 * position / (size - 1) - 1.0 if size > 1 else 0.0
    return np.polynomial.legendre.legvander(np.array([x]), DEGREE)[0, 1:]


def plackett_luce(
    s: np.ndarray, ranked: list[int], left_out: float
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and Hessian (shown positions) of one answer: a chain of choices among the
    ranked positions and those left out (weight ``left_out``), stage by stage."""
    w = len(s)
    grad, hess = np.zeros(w), np.zeros((w, w))
    out = [p for p in range(w) if p not in ranked]
    for r in range(len(ranked)):
        rest = ranked[r:] + out
        e = np.exp(s[rest] - s.max()) * np.array([1.0] * (len(ranked) - r) + [left_out] * len(out))
        p = e / e.sum()
        grad[ranked[r]] += 1.0
        for a, pa in zip(rest, p, strict=True):
            grad[a] -= pa
            hess[a, a] -= pa
            for b, pb in zip(rest, p, strict=True):
                hess[a, b] += pa * pb
    return grad, hess


def pairs(s: np.ndarray, ranked: list[int], left_out: float) -> tuple[np.ndarray, np.ndarray]:
    """Each ordered pair of ranked positions a Bradley-Terry comparison weighted 2 / w; a
    ranked position over one left out, weighted ``left_out`` * 2 / w."""
    w = len(s)
    grad, hess = np.zeros(w), np.zeros((w, w))
    out = [p for p in range(w) if p not in ranked]
    for r, i in enumerate(ranked):
        for j, weight in [(j, 1.0) for j in ranked[r + 1 :]] + [(j, left_out) for j in out]:
            p = 1.0 / (1.0 + np.exp(-(s[i] - s[j])))
            grad[i] += weight * 2.0 / w * (1 - p)
            grad[j] -= weight * 2.0 / w * (1 - p)
            c = weight * 2.0 / w * p * (1 - p)
            hess[i, j] += c
            hess[j, i] += c
            hess[i, i] -= c
            hess[j, j] -= c
    return grad, hess


def reference_fit(n: int, answers: list[Answer], reading) -> tuple[np.ndarray, np.ndarray, float]:
    """The fit reading omissions as nothing; then, where the items left out rank below the
    named ones in it (a share rho of the pairs), again with omissions weighted 2 rho - 1."""
    mean, cov, tau = reference_em(n, answers, reading, 0.0)
    wins = total = 0
    for a in answers:
        if len(a.ranking) < len(a.shown) and not model.is_copy(a):
            out = [j for j in a.shown if j not in a.ranking]
            wins += sum(mean[i] > mean[j] for i in a.ranking for j in out)
            total += len(a.ranking) * len(out)
    left_out = max(0.0, 2 * wins / total - 1) if total else 0.0
    return reference_em(n, answers, reading, left_out) if left_out else (mean, cov, tau)


def reference_em(
    n: int, answers: list[Answer], reading, left_out: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """The posterior mode, the covariance of u and tau: Newton answer by answer, 3 EM steps."""
    kept = [a for a in answers if len(a.ranking) >= 1 and not model.is_copy(a)]
    f = -np.log1p(np.arange(n, dtype=float))
    f -= f.mean()
    size, pos = n + DEGREE + 1, slice(n, n + DEGREE)
    theta, tau = np.zeros(size), 1.0
    for _ in range(3):
        prior = model._prior(n, f, tau)  # the prior is not what changed: only the answers' side
        for step_number in range(31):
            grad, hess = -prior @ theta, -prior.copy()
            for a in kept:
                w, items = len(a.shown), list(a.shown)
                basis = np.array([basis_row(p, w) for p in range(w)])
                ranked = [a.shown.index(i) for i in a.ranking]
                g, h = reading(theta[items] + basis @ theta[pos], ranked, left_out)
                for p, item in enumerate(items):
                    grad[item] += g[p]
                    for q, other in enumerate(items):
                        hess[item, other] += h[p, q]
                grad[pos] += basis.T @ g
                hess[items, pos] += h @ basis
                hess[pos, items] += (h @ basis).T
                hess[pos, pos] += basis.T @ h @ basis
            if step_number == 30:
                break
            step = np.linalg.solve(hess, -grad)
            largest = np.max(np.abs(step))
            theta = theta + (step if largest <= 2.0 else step * (2.0 / largest))
            if largest < 1e-6:
                break
        cov = np.linalg.inv(-hess)
        resid = theta[:n] - theta[-1] * f
        tau = min(max(float(np.sqrt(np.mean(resid**2 + np.diag(cov)[:n]))), 0.2), 5.0)
    return theta[:n], cov[:n, :n], tau


def random_answers(n: int, count: int, partial: bool, seed: int) -> list[Answer]:
    rng = random.Random(seed)
    utility = [rng.gauss(0, 1) - 0.03 * i for i in range(n)]
    out = []
    for _ in range(count):
        shown = tuple(rng.sample(range(n), rng.choice([4, 7, 7, 10])))
        noisy = sorted(shown, key=lambda i: -(utility[i] + rng.gauss(0, 1)))
        keep = rng.randint(1, len(noisy)) if partial and rng.random() < 0.6 else len(noisy)
        out.append(Answer(shown, tuple(noisy[:keep])))
    return out


@pytest.mark.parametrize("reading", ["plackett-luce", "pairs"])
@pytest.mark.parametrize(("partial", "seed"), [(False, 0), (True, 1), (True, 2)])
def test_the_vectorised_fit_is_the_per_answer_fit(reading: str, partial: bool, seed: int) -> None:
    n = 24
    answers = random_answers(n, 30, partial, seed)
    assert partial == any(len(a.ranking) < len(a.shown) for a in answers)
    fit = model.fit_list(n, answers, reading=reading)
    mean, cov, tau = reference_fit(
        n, answers, {"plackett-luce": plackett_luce, "pairs": pairs}[reading]
    )
    np.testing.assert_allclose(fit.mean, mean, atol=1e-6)
    np.testing.assert_allclose(fit.cov, cov, atol=1e-6)
    assert fit.tau == pytest.approx(tau, abs=1e-6)


def test_items_a_model_that_stops_early_leaves_out_rank_below_the_ones_it_names() -> None:
    """Answers that name the best 3 of 8 and stop: the 4 items the first stage put on top,
    never named, are read as beaten (not left at their prior, above the named ones)."""
    rng = random.Random(0)
    answers = []
    for _ in range(6):
        shown = tuple(rng.sample(range(8), 8))
        answers.append(Answer(shown, tuple(sorted(rng.sample(range(4, 8), 3), reverse=True))))
    assert set(model.fit_list(8, answers).order()[:4]) == {4, 5, 6, 7}


def test_items_left_out_at_random_say_nothing() -> None:
    """Answers that skip items at random (the named ones still in the true order): the
    omissions carry (next to) no weight."""
    rng = random.Random(1)
    answers = []
    for _ in range(40):
        shown = tuple(rng.sample(range(10), 10))
        answers.append(Answer(shown, tuple(i for i in range(10) if rng.random() > 0.3)))
    u = model.fit_list(10, answers, tau=1.0).mean
    assert model._left_out(model._groups(10, answers), u) < 0.2
