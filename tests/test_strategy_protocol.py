"""The strategy protocol (issue 37 items 2, 3): a small RankContext whose every type is public,
a strategy written from the public surface alone, one chooser that picks the strategy once
per request (the frontier registered, its choice recorded) and the one plan the request
carries, and the frontier's ``aggregator`` meaning something or refused."""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from permsc_integrations import aggregators, strategies
from permsc_integrations.errors import ConfigurationError, InvalidRankingError
from permsc_integrations.strategies import (
    Outcome,
    Plan,
    PlanOptions,
    RankContext,
    Round,
    Window,
    available,
    choose,
)
from permsc_integrations.testing import first_token_responder, oracle_responder

pytest.importorskip("openai")

ITEMS = [f"doc {'x' * ((k * 37) % 50 + 1)}" for k in range(30)]  # distinct lengths
TRUTH = sorted(range(30), key=lambda i: -len(ITEMS[i]))


def _public_names() -> dict[str, Any]:
    """What an outsider can name: the strategies package's public names, the aggregators'
    and the standard library's."""
    names: dict[str, Any] = {n: getattr(strategies, n) for n in strategies.__all__}
    names.update({n: getattr(aggregators, n) for n in aggregators.__all__})
    names.update(Sequence=Sequence, Callable=Callable, Any=Any, T=typing.TypeVar("T"))
    return names


def test_the_rank_context_has_at_most_eight_members_and_names_only_public_types() -> None:
    members = [m for m in dir(RankContext) if not m.startswith("_")]
    assert len(members) <= 8, members
    public = _public_names()
    for name in members:
        member = getattr(RankContext, name)
        function = member.fget if isinstance(member, property) else member
        hints = typing.get_type_hints(function, globalns=public, localns=public)
        assert hints, f"RankContext.{name} declares its types"


class Halves:
    """A third-party strategy, from the public surface alone: the top half of the list and
    the bottom half each in one round of its own windows (``draw``, then ``settle``); the
    bottom half's order stays below the top's. Its plan is counted: the ranker must ask
    for it once per request."""

    def __init__(self) -> None:
        self.plans = 0

    def plan(self, n: int, options: PlanOptions) -> Plan:
        self.plans += 1
        half = n // 2
        m = options.num_permutations
        top, bottom = (
            Round.of(0, half, (half,), m, options),
            Round.of(half, n, (n - half,), m, options),
        )
        return Plan(n, (top, bottom), detail=half)

    async def __call__(self, ctx: RankContext) -> Outcome:
        n, half = ctx.plan.n, ctx.plan.detail
        assert isinstance(half, int)
        order: list[int] = []
        for number, inside in enumerate((tuple(range(half)), tuple(range(half, n)))):
            window = Window(0, len(inside), pass_index=number)
            order += await ctx.window(number, window, inside)
        return Outcome(tuple(order), head=n)


def test_a_third_party_strategy_needs_only_the_public_surface(scripted_server) -> None:
    server = scripted_server(oracle_responder(len))
    halves = Halves()
    with server.ranker(strategy=halves, num_permutations=3, window_size=15) as ranker:
        result = ranker.rank("longest?", ITEMS)
    top, bottom = set(range(15)), set(range(15, 30))
    assert list(result.order[:15]) == [i for i in TRUTH if i in top]
    assert list(result.order[15:]) == [i for i in TRUTH if i in bottom]
    assert result.usage.calls == server.request_count == 6  # two rounds of m = 3
    assert result.strategy == "halves"
    assert halves.plans == 1, "the request's plan is made once, by the chooser"


def test_frontier_is_registered_and_the_chooser_records_its_choice(scripted_server) -> None:
    assert "frontier" in available()
    server = scripted_server(oracle_responder(len))
    options: dict[str, Any] = {"num_permutations": 2, "window_size": 10}
    with server.ranker(**options, max_calls=5) as ranker:  # blocks plan: 3 x 2 + 2 = 8
        budget = ranker.rank("longest?", ITEMS)
    with server.ranker(**options) as ranker:
        fixed = ranker.rank("longest?", ITEMS)
    with server.ranker(**options, strategy="sliding", step=5) as ranker:
        sliding = ranker.rank("longest?", ITEMS)
    assert (budget.strategy, fixed.strategy, sliding.strategy) == ("frontier", "blocks", "sliding")
    assert budget.usage.calls <= 5 and budget.stopped == "budget"
    assert budget.top_probability and fixed.usage.calls == 8


def test_the_frontier_by_name_spends_the_blocks_plan_as_its_budget(scripted_server) -> None:
    server = scripted_server(oracle_responder(len))
    options = strategies.get("blocks").plan(30, _Options(num_permutations=2, window_size=10))
    with server.ranker(strategy="frontier", num_permutations=2, window_size=10) as ranker:
        plan = ranker.options.plan(30)
        result = ranker.rank("longest?", ITEMS)
    assert result.strategy == "frontier"
    assert str(plan.calls) == str(options.calls) == "8"
    assert result.usage.calls == server.request_count <= 8
    assert set(result.order[:3]) == set(TRUTH[:3])


def test_the_chooser_makes_the_plan_the_request_runs() -> None:
    opts = _Options(num_permutations=20, max_calls=12)
    choice = choose("blocks", 100, opts)
    assert (choice.name, str(choice.plan.calls)) == ("frontier", "12")
    assert choose("blocks", 100, _Options(num_permutations=20)).name == "blocks"
    assert choose("blocks", 10, opts).name == "blocks", "a list of one window stays a window"


def test_a_probability_aggregator_under_the_frontier_is_refused_before_any_call(
    scripted_server,
) -> None:
    """Under the frontier the aggregator orders the head from the answers' rankings; one that
    reads first-token probabilities would find none there and return the input order: it is
    refused, with what to do, and nothing is sent."""
    server = scripted_server(first_token_responder(len))
    with server.ranker(
        scoring="first_token",
        aggregator="mean_probability",
        num_permutations=2,
        window_size=10,
        max_calls=5,
    ) as ranker:
        with pytest.raises(ConfigurationError, match="mean_probability.*rank aggregator"):
            ranker.rank("longest?", ITEMS)
    assert server.request_count == 0


class _Options:
    """Plan options by hand (a plan reads only these)."""

    def __init__(self, **given: Any) -> None:
        defaults = {"window_size": 20, "step": 10, "top_k": None, "adaptive": None}
        defaults.update({"min_successful": None, "max_calls": None, "num_permutations": 20})
        self.__dict__.update({**defaults, **given})


def test_the_frontier_s_knobs_shape_its_plan_and_bad_ones_are_refused(scripted_server) -> None:
    options = _Options(num_permutations=20, max_calls=12)
    blocks = strategies.get("blocks").plan(100, options)
    default = strategies.Frontier().within(100, options, blocks)
    two = strategies.Frontier(max_rounds=2).within(100, options, blocks)
    assert default is not None and len(default.rounds) == 4
    assert two is not None and len(two.rounds) == 2 and str(two.calls) == "12"
    with pytest.raises(ConfigurationError, match="reading"):
        strategies.Frontier(reading="borda")
    with pytest.raises(ConfigurationError, match="max_rounds"):
        strategies.Frontier(max_rounds=0)
    server = scripted_server(oracle_responder(len))
    tuned = strategies.Frontier(max_rounds=2, k=3)
    with server.ranker(strategy=tuned, num_permutations=2, window_size=10, max_calls=6) as ranker:
        result = ranker.rank("longest?", ITEMS)
    assert result.strategy == "frontier" and result.usage.calls <= 6
    assert len(result.windows) <= 2 and set(result.order[:3]) == set(TRUTH[:3])


def test_a_strategy_whose_order_is_not_the_items_fails_the_request(scripted_server) -> None:
    class Forgetful(Halves):
        async def __call__(self, ctx: RankContext) -> Outcome:
            done = await super().__call__(ctx)
            return Outcome(done.order[1:])  # one item lost

    server = scripted_server(oracle_responder(len))
    with server.ranker(strategy=Forgetful(), num_permutations=2, window_size=15) as ranker:
        with pytest.raises(InvalidRankingError, match="not a reordering of the request's 30"):
            ranker.rank("longest?", ITEMS)
