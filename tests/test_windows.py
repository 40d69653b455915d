"""Sliding-window plan: exhaustive boundary checks for n <= 60, and an oracle execution."""

from __future__ import annotations

import random

import anyio
import pytest

from permsc_integrations.errors import ConfigurationError, InvalidRankingError
from permsc_integrations.strategies._sliding import run_windows
from permsc_integrations.strategies._window_plan import Window, plan_windows, settled_per_pass

PAIRS = [
    (2, 1),
    (3, 1),
    (3, 2),
    (4, 2),
    (5, 2),
    (5, 3),
    (10, 5),
    (10, 3),
    (10, 7),
    (20, 10),
    (20, 5),
    (20, 15),
    (7, 6),
]


def _passes(plan: list[Window]) -> dict[int, list[Window]]:
    out: dict[int, list[Window]] = {}
    for w in plan:
        out.setdefault(w.pass_index, []).append(w)
    return out


@pytest.mark.parametrize("window_size,step", PAIRS)
@pytest.mark.parametrize("top_k", [None, 1, 3, 12, 60])
def test_plan_boundaries_for_every_n(window_size: int, step: int, top_k: int | None) -> None:
    for n in range(0, 61):
        plan = plan_windows(n, window_size=window_size, step=step, top_k=top_k)
        if n <= 1:
            assert plan == []
            continue
        passes = _passes(plan)
        assert sorted(passes) == list(range(len(passes))), "passes are numbered 0.."
        offset = 0
        for index, windows in passes.items():
            first, last = windows[0], windows[-1]
            assert first.end == n, "each pass starts at the back of the list"
            assert last.start == offset, (
                "each pass ends at its front (the top of what is unsettled)"
            )
            covered = set()
            for w in windows:
                assert offset <= w.start < w.end <= n, (n, w)
                assert 2 <= w.size <= window_size, (n, w)
                covered.update(range(w.start, w.end))
            assert covered == set(range(offset, n)), "every unsettled position is in some window"
            for later, earlier in zip(windows[1:], windows[:-1], strict=True):
                assert later.start < earlier.start, "windows move from back to front"
                overlap = later.end - earlier.start
                assert overlap == window_size - step, (n, earlier, later)
                assert earlier.start - later.start <= step
            if n - offset <= window_size:
                assert windows == [Window(offset, n, index)], "a short list is one window"
            offset += settled_per_pass(window_size, step)
        if n <= window_size:
            assert plan == [Window(0, n, 0)]
        per_pass = settled_per_pass(window_size, step)
        wanted = min(n, per_pass if top_k is None else top_k)
        settled_after = [
            n if n - p * per_pass <= window_size else (p + 1) * per_pass for p in passes
        ]
        assert settled_after[-1] >= wanted, "enough passes to settle the top-k"
        assert all(s < wanted for s in settled_after[:-1]), "no pass after the top-k is settled"


def test_rankgpt_default_plan_for_100() -> None:
    plan = plan_windows(100, window_size=20, step=10)
    assert [(w.start, w.end) for w in plan] == [(s, s + 20) for s in range(80, -1, -10)]


def test_irregular_tail_still_covers_the_top() -> None:
    plan = plan_windows(25, window_size=20, step=10)
    assert [(w.start, w.end) for w in plan] == [(5, 25), (0, 15)]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(window_size=1, step=1),
        dict(window_size=10, step=0),
        dict(window_size=10, step=10),
        dict(window_size=10, step=5, top_k=0),
    ],
)
def test_bad_options_raise_configuration_error(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError):
        plan_windows(30, **kwargs)


async def _oracle_order(
    n: int, window_size: int, step: int, top_k: int | None, seed: int
) -> tuple[list[int], list[int]]:
    """Run the plan with a perfect ranker; item ``i``'s true relevance is ``relevance[i]``."""
    rng = random.Random(seed)
    relevance = [rng.random() for _ in range(n)]

    async def perfect(number: int, window: Window, inside: tuple[int, ...]) -> list[int]:
        await anyio.sleep(0)
        return sorted(inside, key=lambda i: -relevance[i])

    plan = plan_windows(n, window_size=window_size, step=step, top_k=top_k)
    final = await run_windows(range(n), plan, perfect)
    truth = sorted(range(n), key=lambda i: -relevance[i])
    return final, truth


@pytest.mark.parametrize("window_size,step", PAIRS)
async def test_oracle_one_pass_settles_window_minus_step(window_size: int, step: int) -> None:
    for n in range(2, 61):
        final, truth = await _oracle_order(n, window_size, step, None, seed=n)
        assert sorted(final) == list(range(n)), "a permutation of the input"
        k = min(n, settled_per_pass(window_size, step))
        assert final[:k] == truth[:k], (n, final[:k], truth[:k])
        if step <= window_size - step:
            assert final[:step] == truth[:step], "the true top-step items reach the top"


@pytest.mark.parametrize("window_size,step", [(20, 10), (10, 7), (5, 3), (4, 2)])
@pytest.mark.parametrize("top_k", [1, 5, 13, 30])
async def test_oracle_top_k_settles_the_top_k(window_size: int, step: int, top_k: int) -> None:
    for n in range(2, 61, 3):
        final, truth = await _oracle_order(n, window_size, step, top_k, seed=100 + n)
        k = min(n, top_k)
        assert final[:k] == truth[:k], (n, top_k)


async def test_a_broken_window_ranker_is_caught() -> None:
    async def drops_one(number: int, window: Window, inside: tuple[int, ...]) -> list[int]:
        return list(inside[1:])

    with pytest.raises(InvalidRankingError, match="not a reordering"):
        await run_windows(range(5), plan_windows(5, window_size=3, step=1), drops_one)
