"""The blocks strategy beside the sliding window, through the real openai client and the
loopback server: one round of blocks then one head window, balanced blocks, the same
failure semantics, and names resolved by the registry."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from permsc_integrations import PSCRanker, aggregate
from permsc_integrations._events import Event
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.errors import (
    ConfigurationError,
    InsufficientSamplesError,
    MissingDependencyError,
    UnknownNameError,
)
from permsc_integrations.permutations import cut_blocks
from permsc_integrations.strategies import Blocks, Plan, Round
from permsc_integrations.testing import Fault, noisy_responder, oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(60)

ITEMS = [f"doc {'x' * ((k * 37) % 50 + 1)}" for k in range(50)]  # distinct lengths
TRUTH = sorted(range(50), key=lambda i: -len(ITEMS[i]))


def test_blocks_rank_a_long_list_in_two_rounds(scripted_server, until) -> None:
    async def once_the_round_is_in_flight(request):  # no answer before all 20 calls arrived
        await until(lambda: server.max_in_flight >= 20)
        return oracle_responder(len)(request)

    server = scripted_server(once_the_round_is_in_flight)
    events: list[Event] = []
    with server.ranker(
        strategy="blocks",
        num_permutations=4,
        window_size=10,
        step=5,
        max_concurrency=64,
        on_event=events.append,
    ) as r:
        result = r.rank("longest?", ITEMS)
    assert list(result.order[:10]) == TRUTH[:10] and sorted(result.order) == list(range(50))
    assert server.request_count == 4 * 5 + 4  # m blocks of each shuffle, then m for the head
    assert server.max_in_flight == 20  # every block of every shuffle in one round
    first, head = result.windows
    for unit in range(4):  # each shuffle shows every item exactly once, in blocks of 10
        shown = [s.permutation for s in first.samples[unit * 5 : unit * 5 + 5]]
        assert sorted(i for block in shown for i in block) == list(range(50))
        assert {len(block) for block in shown} == {10}
    assert set(head.indices) == set(TRUTH[:10])
    kinds = Counter(e.kind for e in events)
    assert kinds["window_start"] == kinds["window_end"] == 2


def test_a_strategy_draws_any_windows_over_chosen_items_and_reads_every_sample(
    scripted_server, until
) -> None:
    """RankContext.draw: prompts of the strategy's own choosing (two overlapping windows over
    the even items, each shuffled three times), every one a call, all at once, and every
    sample back in the round's positions; settle orders the round."""
    draws = []

    class Overlapping:
        async def __call__(self, ctx):
            inside = tuple(range(0, 30, 2))  # 15 chosen items
            rng = random.Random(ctx.seed(inside, "overlapping"))
            shown = [
                [tuple(rng.sample(range(10), 10)), tuple(rng.sample(range(5, 15), 10))]
                for _ in range(3)
            ]
            draws.append(await ctx.draw(0, inside, shown))
            order = await ctx.settle(draws[0])
            return [*order, *(i for i in range(ctx.plan.n) if i not in set(inside))]

        def plan(self, n, options):
            return Plan(n, (Round.of(0, 15, (10, 10), 3, options),))

    async def once_all_are_in_flight(request):
        await until(lambda: server.max_in_flight >= 6)
        return oracle_responder(len)(request)

    server = scripted_server(once_all_are_in_flight)
    with server.ranker(strategy=Overlapping(), num_permutations=3) as r:
        result = r.rank("longest?", ITEMS)
    assert server.request_count == result.usage.calls == 6 == server.max_in_flight
    (draw,) = draws
    assert len(draw.samples) == 6 and all(s.ok for s in draw.samples)
    windows = [set(range(0, 20, 2)), set(range(10, 30, 2))]  # items of positions 0-9, 5-14
    for k, sample in enumerate(draw.samples):
        shown = draw.items(sample.permutation)
        assert set(shown) == windows[k % 2]
        assert list(draw.items(sample.ranking)) == sorted(shown, key=TRUTH.index)
    assert sorted(result.order[:15]) == list(range(0, 30, 2))
    assert result.windows[0].samples[1].permutation == draw.items(draw.samples[1].permutation)


def test_a_wider_head_is_ranked_in_blocks_in_the_second_round(scripted_server) -> None:
    server = scripted_server(oracle_responder(len))
    events: list[Event] = []
    wide = Blocks(head_windows=2)
    with server.ranker(
        strategy=wide, num_permutations=4, window_size=10, step=5, on_event=events.append
    ) as r:
        result = r.rank("longest?", ITEMS)
    assert list(result.order[:20]) == TRUTH[:20] and sorted(result.order) == list(range(50))
    assert server.request_count == 4 * 5 + 4 * 2  # the head: 20 items, 2 blocks a shuffle
    first, head = result.windows
    assert set(head.indices) == set(TRUTH[:20])
    for unit in range(4):
        shown = [s.permutation for s in head.samples[unit * 2 : unit * 2 + 2]]
        assert sorted(i for block in shown for i in block) == sorted(TRUTH[:20])
    starts = [e.detail for e in events if e.kind == "window_start"]
    assert [(d["pass"], d["blocks"]) for d in starts] == [(0, True), (1, True)]


def test_blocks_over_the_aiohttp_transport(scripted_server) -> None:
    pytest.importorskip("aiohttp")
    server = scripted_server(oracle_responder(len))
    options = {"base_url": server.base_url, "http": "aiohttp"}
    try:
        r = PSCRanker("openai:m", backend_options=options, num_permutations=4, window_size=10)
    except MissingDependencyError:
        pytest.skip("the openai SDK's aiohttp transport is not installed")
    with r:
        result = r.rank("longest?", ITEMS)
    assert list(result.order[:10]) == TRUTH[:10] and sorted(result.order) == list(range(50))
    assert server.request_count == result.usage.calls == 4 * 5 + 4


def test_head_windows_is_checked() -> None:
    for field in ("head_windows", "screen_to", "screen_shuffles"):
        for bad in (0, 1.5, True):
            with pytest.raises(ConfigurationError, match=field):
                Blocks(**{field: bad})
    for field in ("head_by", "screen_by"):
        with pytest.raises(UnknownNameError, match="kemenny"):
            Blocks(**{field: "kemenny"})


LONG = [f"doc {'x' * ((k * 37) % 120 + 1)}" for k in range(120)]  # distinct lengths
LONG_TRUTH = sorted(range(120), key=lambda i: -len(LONG[i]))


def test_a_long_list_is_screened_then_ranked_in_full_rounds(scripted_server) -> None:
    server = scripted_server(oracle_responder(len))
    events: list[Event] = []
    screened = Blocks(screen_to=5, screen_shuffles=2, head_by="kemeny")
    with server.ranker(
        strategy=screened,
        num_permutations=4,
        window_size=10,
        step=5,
        on_event=events.append,
    ) as r:
        result = r.rank("longest?", LONG)
    assert list(result.order[:10]) == LONG_TRUTH[:10] and sorted(result.order) == list(range(120))
    # 2 shuffles of 12 blocks, then m = 4 shuffles of the 50 kept (5 blocks), then m for the head
    assert server.request_count == result.usage.calls == 2 * 12 + 4 * 5 + 4
    screen, full, head = result.windows
    assert len(screen.samples) == 24 and len(full.indices) == 50
    assert set(head.indices) == set(full.order[:10])  # the full round's consensus head
    # then the rest of the kept 50 in the full round's order, then the screening round's
    kept = set(full.indices)
    assert list(result.order[10:50]) == [i for i in full.order if i not in set(head.indices)]
    assert list(result.order[50:]) == [i for i in screen.order if i not in kept]
    starts = [e.detail["pass"] for e in events if e.kind == "window_start"]
    assert starts == [0, 1, 2]
    plan = screened.plan(120, RankingOptions(num_permutations=4, window_size=10, step=5))
    assert [r.calls.high for r in plan.rounds] == [2 * 12, 4 * 5, 4]


def test_the_head_is_the_one_head_by_picks_and_is_ranked_once(scripted_server) -> None:
    def worst_first(rankings, *, n_items, **options):  # picks the worst 10 as the head
        return aggregate(rankings, method="borda", n_items=n_items)[::-1]

    server = scripted_server(oracle_responder(len))
    with server.ranker(
        strategy=Blocks(head_by=worst_first), num_permutations=4, window_size=10, step=5
    ) as r:
        result = r.rank("longest?", ITEMS)
    first, head = result.windows
    picked = worst_first([s.ranking for s in first.samples], n_items=50)[:10]  # ids 0..49
    assert set(head.indices) == set(picked) != set(first.order[:10])  # not the consensus's
    assert list(result.order[:10]) == sorted(picked, key=TRUTH.index)  # ranked by the head
    assert list(result.order[10:]) == [i for i in first.order if i not in set(picked)]
    assert server.request_count == result.usage.calls == 20 + 4  # no second head round


def test_a_failed_head_round_fails_the_request_with_every_call_counted(scripted_server) -> None:
    def head_fails(request):  # the 20 block calls answer; every later call fails
        if request.index >= 20:
            return Fault.status(400, message="no")
        return oracle_responder(len)(request)

    server = scripted_server(head_fails)
    ends: list[Event] = []
    with server.ranker(
        num_permutations=4,
        window_size=10,
        step=5,
        on_event=lambda e: ends.append(e) if e.kind == "request_end" else None,
    ) as r:  # Kemeny: the head by its local search, beside the consensus
        with pytest.raises(InsufficientSamplesError) as caught:
            r.rank("q", ITEMS)
    assert caught.value.required == 2
    assert server.request_count == 24 == caught.value.usage.calls == ends[0].detail["usage"].calls


def test_the_default_head_is_the_aggregators_quick_stand_in_or_its_consensus(
    scripted_server,
) -> None:
    from permsc_integrations.aggregators import get
    from permsc_integrations.aggregators._local_search import local_search

    assert get("kemeny").quick is local_search  # type: ignore[attr-defined]
    server = scripted_server(noisy_responder(len, keep=0.3, seed=1))
    heads = {}
    for name in ("kemeny", "borda"):
        with server.ranker(aggregator=name, num_permutations=4, window_size=10, step=5) as r:
            result = r.rank("longest?", ITEMS)
        first, head = result.windows
        rankings = [s.ranking for s in first.samples if s.ok]  # items 0..49: ids as is
        quick = aggregate(rankings, method="local_search" if name == "kemeny" else name, n_items=50)
        assert set(head.indices) == set(quick[:10]) and result.usage.calls == 24
        heads[name] = set(head.indices)
    assert set(result.windows[1].indices) == set(result.windows[0].order[:10])  # Borda's own
    assert heads["kemeny"] != heads["borda"]  # (noisy answers: the two heads differ)


def test_the_next_round_starts_while_the_consensus_is_computed(scripted_server) -> None:
    head_round_arrived = threading.Event()  # set by the server at the head round's first call
    arrived_in_time: list[bool] = []

    def slow_borda(rankings, *, n_items, **options):  # the ranker's aggregator (in a thread)
        arrived_in_time.append(head_round_arrived.wait(timeout=10))  # done once the head asks
        return aggregate(rankings, method="borda", n_items=n_items)

    def respond(request):  # the first round's 5 windows x 4 calls, then the head's
        if request.index >= 20:
            head_round_arrived.set()
        return oracle_responder(len)(request)

    server = scripted_server(respond)
    events: list[tuple[str, int | None]] = []
    with server.ranker(
        strategy=Blocks(head_by="borda"),  # not the ranker's aggregator: picked at once
        aggregator=slow_borda,
        num_permutations=4,
        window_size=10,
        step=5,
        on_event=lambda e: events.append((e.kind, e.window)),
    ) as r:
        result = r.rank("longest?", ITEMS)
    first, head = result.windows  # in plan order, though the head finished first
    assert len(first.samples) == 20 and len(head.samples) == 4
    assert set(head.indices) == set(first.order[:10])  # the consensus's head, ranked perfectly
    assert list(result.order[:10]) == sorted(head.indices, key=TRUTH.index)
    assert arrived_in_time[0], "the head round's calls went out before the consensus was done"
    head_calls = events.index(("sample_start", 1))
    assert head_calls < events.index(("window_end", 0))  # the head did not wait for it


def test_a_failed_later_round_raises_its_own_error(scripted_server) -> None:
    def head_fails(request):  # the 20 block calls answer; the head window's calls fail
        if request.index >= 20:
            return Fault.status(400, message="no")
        return oracle_responder(len)(request)

    server = scripted_server(head_fails)
    exact = Blocks(head_by="kemeny")  # the consensus's head: the head round waits for it
    with server.ranker(strategy=exact, num_permutations=4, window_size=10, step=5) as r:
        with pytest.raises(InsufficientSamplesError) as caught:
            r.rank("q", ITEMS)
    assert caught.value.required == 2 and server.request_count == 24


def test_a_list_that_fits_one_window_is_plain_psc(scripted_server) -> None:
    server = scripted_server(oracle_responder(len))
    with server.ranker(strategy="blocks", num_permutations=3) as r:
        blocks = r.rank("q", ITEMS[:12])
    with server.ranker(strategy="sliding", num_permutations=3) as r:
        sliding = r.rank("q", ITEMS[:12])
    assert blocks.order == sliding.order and server.request_count == 6
    assert [s.permutation for s in blocks.samples] == [s.permutation for s in sliding.samples]


def test_blocks_need_half_of_their_answers(scripted_server) -> None:
    def flaky(request):  # every third call fails for good
        if request.index % 3 == 0:
            return Fault.status(400, message="no")
        return oracle_responder(len)(request)

    server = scripted_server(flaky)
    with server.ranker(strategy="blocks", num_permutations=4, window_size=10, step=5) as r:
        result = r.rank("q", ITEMS)
    assert len(result.failures) > 0 and sorted(result.order) == list(range(50))
    server.responder = lambda request: Fault.status(400, message="no")
    with server.ranker(strategy="blocks", num_permutations=4, window_size=10, step=5) as r:
        with pytest.raises(InsufficientSamplesError) as caught:
            r.rank("q", ITEMS)
    assert caught.value.required == 10  # half of the 4 x 5 block answers


def test_blocks_with_adaptive_m_stop_early_on_a_consistent_model(scripted_server) -> None:
    server = scripted_server(oracle_responder(len))
    with server.ranker(
        strategy="blocks", num_permutations=12, window_size=10, step=5, adaptive=True
    ) as r:
        result = r.rank("q", ITEMS)
    assert list(result.order[:10]) == TRUTH[:10]
    assert server.request_count < 12 * 5 + 12 and result.usage.saved_calls > 0


def test_unknown_strategy_is_refused_with_the_available_ones() -> None:
    class Idle:
        name = "idle"

        async def acomplete(self, messages, settings): ...

        async def aclose(self) -> None: ...

    with pytest.raises(UnknownNameError, match="blocks, frontier, sliding"):
        PSCRanker(Idle(), strategy="tournament")


def test_blocks_are_balanced() -> None:
    assert [len(b) for b in cut_blocks(range(45), 20)] == [15, 15, 15]
    assert [len(b) for b in cut_blocks(range(41), 20)] == [14, 14, 13]
