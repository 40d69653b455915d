"""Every strategy's plan against the calls the ranker really makes.

For every registered strategy (and Blocks with a wider head, and with heavier screening),
lists of 1 to 1,000 items (the edges: 1, 2, a window, a window + 1, five windows, five windows
+ 1, 1,000), several m, window sizes, steps and ``top_k``, fixed and adaptive m: the request's
``usage.calls``, the backend's own count, the rounds and each round's calls and items equal the
plan (adaptive m: inside its range). The backend runs in process (no cache, no retries, every
answer readable), so thousands of calls take seconds; one case goes through the real openai
client and the loopback server.
"""

from __future__ import annotations

import hashlib
import random
from itertools import cycle

import anyio
import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.backends.base import Completion
from permsc_integrations.strategies import Blocks, CallRange, available
from permsc_integrations.strategies._adaptive import Adaptive
from permsc_integrations.testing import oracle_responder
from permsc_integrations.testing._responders import shown_passages

pytestmark = pytest.mark.timeout(300)


class Judge:
    """Orders the shown ``"d<k>"`` passages by ``k``, high first; with ``noise``, swaps a
    few neighbours, seeded by the prompt (so that adaptive m does not stop at once)."""

    name = "judge"

    def __init__(self, noise: float = 0.0) -> None:
        self.noise, self.calls = noise, 0

    async def acomplete(self, messages, settings) -> Completion:
        self.calls += 1
        shown = shown_passages(messages)
        order = sorted(range(len(shown)), key=lambda p: -int(shown[p][1:]))
        if self.noise:
            text = "".join(m["content"] for m in messages)
            rng = random.Random(hashlib.sha256(text.encode()).digest())
            for k in range(len(order) - 1):
                if rng.random() < self.noise:
                    order[k], order[k + 1] = order[k + 1], order[k]
        return Completion(text=" > ".join(f"[{p + 1}]" for p in order))

    async def aclose(self) -> None:
        pass


def items(n: int) -> list[str]:
    return [f"d{(k * 7919) % 1009}" for k in range(n)]  # distinct, shuffled


SLOW = {"frontier"}  # its sweeps take ~40 s of the default suite: run in CI's slow stage
STRATEGIES = [
    *(pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in available()),
    Blocks(head_windows=2),
    Blocks(screen_to=3, screen_shuffles=3, head_windows=2),
]
WINDOWS = [(20, 10), (7, 3), (5, 4)]  # (window_size, step)


def sizes(window: int) -> list[int]:
    edges = [1, 2, window, window + 1, 5 * window, 5 * window + 1, 1000]
    return sorted({*edges, 3 * window - 1, 250})


def cases(window: int, step: int) -> list[dict]:
    """A spread of m and top_k over the sizes (each size gets two of the combinations; 1,000
    items get a small m and at most two sliding passes, to keep the test to seconds)."""
    combos = cycle([(1, None), (3, 3), (6, 2 * window + 1), (2, window - step + 1), (4, None)])
    found = []
    for n in sizes(window):
        big = [(1, window - step + 1), (3, None)]
        for m, top_k in [next(combos), next(combos)] if n < 1000 else big:
            found.append({"n": n, "num_permutations": m, "top_k": top_k})
    return found


async def mismatches(strategy, options: dict, n: int, judge: Judge) -> list[str]:
    """What differs between the plan and the request of ``n`` items (nothing: [])."""
    ranker = PSCRanker(judge, strategy=strategy, aggregator="borda", max_words=5, **options)
    plan = ranker.options.plan(n)
    before = judge.calls
    result = await ranker.arank("q", items(n))
    made = result.usage.calls
    where = f"{strategy!r} n={n} {options}: plan {plan.calls}"
    wrong = []
    if judge.calls - before != made:
        wrong.append(f"{where}: the backend saw {judge.calls - before}, usage says {made}")
    if not plan.calls.low <= made <= plan.calls.high:
        wrong.append(f"{where}: made {made}")
    if not options.get("adaptive") and not plan.calls.exact:
        wrong.append(f"{where}: a fixed m, a range")
    if len(result.windows) != len(plan.rounds):
        wrong.append(f"{where}: {len(result.windows)} rounds, planned {len(plan.rounds)}")
    for k, (window, planned) in enumerate(zip(result.windows, plan.rounds, strict=False)):
        spent = sum(s.usage.calls for s in window.samples)
        if not planned.calls.low <= spent <= planned.calls.high:
            wrong.append(f"{where}: round {k} made {spent}, planned {planned.calls}")
        if (window.start, len(window.indices)) != (planned.start, planned.items):
            wrong.append(f"{where}: round {k} at {window.start} over {len(window.indices)}")
    return wrong


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
@pytest.mark.parametrize(("window_size", "step"), WINDOWS)
def test_the_plan_is_the_calls_the_ranker_makes(strategy, window_size, step) -> None:
    judge = Judge()

    async def run_all() -> list[str]:
        wrong = []
        for case in cases(window_size, step):
            n = case.pop("n")
            options = {**case, "window_size": window_size, "step": step}
            wrong += await mismatches(strategy, options, n, judge)
        return wrong

    assert anyio.run(run_all) == []


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
@pytest.mark.parametrize(
    ("adaptive", "min_successful", "noise"),
    [
        (Adaptive(first_wave=2, wave=2), None, 0.0),
        (Adaptive(first_wave=1, wave=1), 3, 0.3),
        (Adaptive(first_wave=3, wave=2, confidence=0.99), None, 0.3),
    ],
)
def test_adaptive_m_stays_inside_the_planned_range(
    strategy, adaptive, min_successful, noise
) -> None:
    judge = Judge(noise)
    options = {"num_permutations": 8, "adaptive": adaptive, "min_successful": min_successful}

    async def run_all() -> list[str]:
        wrong = []
        for n, size in [(2, 5), (5, 5), (6, 5), (25, 5), (26, 5), (130, 10), (1000, 20)]:
            shape = {"window_size": size, "step": size // 2}
            wrong += await mismatches(strategy, {**options, **shape}, n, judge)
        return wrong

    assert anyio.run(run_all) == []


def test_adaptive_ranges_have_the_first_stable_wave_as_floor() -> None:
    fixed = RankingOptions(num_permutations=8).plan(100)
    assert fixed.calls == CallRange(8 * 5 + 8, 8 * 5 + 8) and fixed.calls.exact
    waves = RankingOptions(num_permutations=8, adaptive=Adaptive(first_wave=1, wave=3)).plan(100)
    assert waves.calls == CallRange(4 * 5 + 4, 8 * 5 + 8)  # one shuffle cannot prove stability
    needs = RankingOptions(num_permutations=8, adaptive=Adaptive(2, 2), min_successful=5)
    assert needs.plan(100).calls == CallRange(6 * 5 + 6, 8 * 5 + 8)
    small = RankingOptions(num_permutations=3, adaptive=Adaptive(first_wave=4, wave=4))
    assert small.plan(100).calls.exact  # the first wave is the cap


def test_the_plan_holds_on_the_wire(scripted_server) -> None:
    pytest.importorskip("openai")
    server = scripted_server(oracle_responder(lambda text: int(text[1:])))
    options = {"num_permutations": 3, "window_size": 10, "step": 5, "max_words": 5}
    for strategy in available():
        server.reset()
        with PSCRanker(
            "openai:m", backend_options={"base_url": server.base_url}, strategy=strategy, **options
        ) as ranker:
            result = ranker.rank("q", items(61))
        planned = ranker.options.plan(61).calls
        assert server.request_count == result.usage.calls == planned.high, strategy


@pytest.mark.parametrize("strategy", ["blocks", "sliding"])
@pytest.mark.parametrize("adaptive", [None, Adaptive(first_wave=2, wave=2, top_k=5)])
def test_under_a_budget_the_plan_is_an_upper_bound_the_calls_never_pass(strategy, adaptive) -> None:
    """Under ``max_calls`` the plan is the strategy's plan within it: never above the budget,
    each round at most its planned calls, no more rounds than planned; with every answer
    readable and a budget below the fixed plan, exactly the plan (the frontier's rounds run
    out of new prompts only on a few items)."""
    judge = Judge(noise=0.3)

    async def run_all() -> list[str]:
        wrong = []
        for n in (2, 5, 21, 60, 101, 250):
            for budget in (1, 2, 5, 12, 40, 300):
                options = {"max_calls": budget, "num_permutations": 6, "adaptive": adaptive}
                ranker = PSCRanker(judge, strategy=strategy, max_words=5, **options)
                plan, before = ranker.options.plan(n), judge.calls
                result = await ranker.arank("q", items(n))
                made, where = result.usage.calls, f"n={n} max_calls={budget}: plan {plan.calls}"
                if not made == judge.calls - before <= plan.calls.high <= budget:
                    wrong.append(f"{where}: made {made}, the backend saw {judge.calls - before}")
                if adaptive is None and n >= 6 and made != plan.calls.high:
                    wrong.append(f"{where}: made {made}, not the plan")
                if len(result.windows) > len(plan.rounds):
                    wrong.append(f"{where}: {len(result.windows)} rounds")
                paired = zip(result.windows, plan.rounds, strict=False)
                for k, (window, planned) in enumerate(paired):
                    spent = sum(s.usage.calls for s in window.samples)
                    if spent > planned.calls.high:
                        wrong.append(f"{where}: round {k} made {spent}, planned {planned.calls}")
        return wrong

    assert anyio.run(run_all) == []
