"""PSCRanker end to end over small real backends: windows, many requests, sync bridge."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Awaitable, Callable

import anyio
import pytest

from permsc_integrations import PSCRanker, RankRequest, backends
from permsc_integrations._calls.cache import SQLiteCache
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations._events import Event
from permsc_integrations.errors import (
    ConfigurationError,
    InsufficientSamplesError,
    InvalidRankingError,
    UnknownNameError,
)
from permsc_integrations.testing import ChatRequest, Fault, ScriptedBackend, best_first
from permsc_integrations.testing._responders import shown_passages

pytestmark = pytest.mark.timeout(60)

QUERY = re.compile(r"query: (.*)\.$", re.S)


def oracle(
    name: str = "oracle",
    fail_queries: tuple[str, ...] = (),
    slow: Callable[[], Awaitable[object]] = anyio.sleep_forever,
    hold: Callable[[], Awaitable[object]] | None = None,
) -> ScriptedBackend:
    """Ranks ``"doc <k>"`` passages by ``k`` (higher first); a query ``"slow ..."`` answers
    once ``await slow()`` returns (never, by default), any other once ``await hold()`` does
    (at once by default); ``fail_queries`` get a 400."""

    async def respond(request: ChatRequest) -> str | Fault:
        query = QUERY.search(request.messages[1]["content"]).group(1)
        if query in fail_queries:
            return Fault.status(400, message=f"refusing {query!r}")
        if query.startswith("slow"):
            await slow()
        elif hold is not None:
            await hold()
        items = shown_passages(request.messages)
        best = sorted(range(len(items)), key=lambda p: -int(items[p].split()[1]))
        return " > ".join(f"[{p + 1}]" for p in best)

    return ScriptedBackend(respond, name=name)


def docs(n: int, seed: int = 0) -> list[str]:
    values = list(range(n))
    random.Random(seed).shuffle(values)
    return [f"doc {v}" for v in values]


FAST = RetryPolicy(max_attempts=2, initial_backoff=0.001, jitter=0.0)


def ranker(backend, **options) -> PSCRanker:
    options.setdefault("num_permutations", 4)
    options.setdefault("aggregator", "borda")
    return PSCRanker(backend, retry=FAST, **options)


def test_rank_sorts_a_short_list_and_reports_usage() -> None:
    items = docs(8)
    backend = oracle()
    result = ranker(backend).rank("rank docs", items)
    assert list(result.order) == best_first(items)
    assert result.scores[result.order[0]] == 1.0
    assert all(
        result.scores[a] > result.scores[b]
        for a, b in zip(result.order, result.order[1:], strict=False)
    )
    assert len(result.windows) == 1 and result.usage.calls == backend.request_count == 4
    assert result.confidence == pytest.approx(1.0)


async def test_sliding_window_brings_the_best_to_the_top() -> None:
    items = docs(35, seed=1)
    backend = oracle()
    result = await ranker(backend, window_size=10, step=5, strategy="sliding").arank(
        "rank docs", items
    )
    assert sorted(result.order) == list(range(35))
    assert list(result.order[:5]) == best_first(items)[:5]
    assert [w.start for w in result.windows] == [25, 20, 15, 10, 5, 0]
    assert result.usage.calls == 6 * 4
    for w in result.windows:  # window samples are in the caller's item indices
        assert set(w.order) == set(w.indices) and all(
            set(s.permutation) == set(w.indices) for s in w.samples
        )


async def test_top_k_settles_more_than_one_pass_does() -> None:
    items = docs(30, seed=2)
    sliding = ranker(oracle(), window_size=10, step=5, top_k=12, strategy="sliding")
    result = await sliding.arank("rank docs", items)
    assert list(result.order[:12]) == best_first(items)[:12]


async def test_documents_with_ids_and_mappings_are_accepted() -> None:
    items = [
        {"text": "doc 1", "id": "a"},
        {"text": "doc 3", "id": "b"},
        {"text": "doc 2", "id": "c"},
    ]
    result = await ranker(oracle()).arank("rank docs", items)
    assert result.order == (1, 2, 0)
    with pytest.raises(InvalidRankingError, match="duplicate"):
        await ranker(oracle()).arank(
            "q", [{"text": "doc 1", "id": "a"}, {"text": "doc 2", "id": "a"}]
        )
    with pytest.raises(InvalidRankingError, match="empty"):
        await ranker(oracle()).arank("q", [])


async def test_a_single_item_needs_no_call() -> None:
    backend = oracle()
    result = await ranker(backend).arank("q", ["doc 1"])
    assert result.order == (0,) and result.scores == (1.0,) and backend.request_count == 0


def test_rank_works_inside_a_running_event_loop() -> None:
    items = docs(6)
    r = ranker(oracle())

    async def notebook_cell():
        return r.rank("rank docs", items)

    assert list(asyncio.run(notebook_cell()).order) == best_first(items)


async def test_arank_many_yields_as_completed_and_tags_requests() -> None:
    requests = [
        RankRequest("slow query", docs(6, seed=1), id="slow"),
        RankRequest("fast query", docs(6, seed=2), id="fast"),
        ("another fast", docs(5, seed=3)),
    ]
    seen, release = [], anyio.Event()
    async for result in ranker(oracle(slow=release.wait)).arank_many(requests):
        seen.append(result)
        assert list(result.order) == best_first(list(result.request.items))
        if len(seen) == 2:  # both fast ones are out: now the slow one may answer
            release.set()
    assert seen[-1].request is requests[0], "the slow request completes last"
    assert {r.request.query for r in seen} == {"slow query", "fast query", "another fast"}


async def test_one_shared_limiter_bounds_every_request(until) -> None:
    backend = oracle(hold=lambda: until(lambda: backend.max_in_flight >= 3))  # calls overlap
    r = ranker(backend, max_concurrency=3)
    results = [x async for x in r.arank_many([("q", docs(6, seed=s)) for s in range(5)])]
    assert len(results) == 5 and backend.max_in_flight == 3


async def test_requests_under_way_are_bounded_too(until) -> None:
    active, peak = 0, 0

    def track(event: Event) -> None:
        nonlocal active, peak
        active += {"request_start": 1, "request_end": -1}.get(event.kind, 0)
        peak = max(peak, active)

    r = ranker(oracle(hold=lambda: until(lambda: peak >= 2)), max_concurrency=2, on_event=track)
    results = [x async for x in r.arank_many([("q", docs(5, seed=s)) for s in range(6)])]
    assert len(results) == 6 and peak == 2


async def test_request_concurrency_caps_each_request(until) -> None:
    backend = oracle(hold=lambda: until(lambda: backend.max_in_flight >= 2))
    await ranker(backend, num_permutations=8, request_concurrency=2).arank("q", docs(6))
    assert backend.max_in_flight == 2


async def test_a_failed_request_loses_no_other_result() -> None:
    r = ranker(oracle(fail_queries=("bad",)))
    requests = [
        RankRequest("good", docs(5)),
        RankRequest("bad", docs(5)),
        RankRequest("also good", docs(4)),
    ]
    got = []
    with pytest.raises(InsufficientSamplesError) as info:
        async for result in r.arank_many(requests):
            got.append(result.request.query)
    assert sorted(got) == ["also good", "good"]
    assert info.value.request is requests[1]

    mixed = [x async for x in r.arank_many(requests, return_exceptions=True)]
    assert sum(isinstance(x, InsufficientSamplesError) for x in mixed) == 1 and len(mixed) == 3

    two_bad = [*requests, RankRequest("bad", docs(6))]
    with pytest.raises(InsufficientSamplesError) as info:
        [x async for x in r.arank_many(two_bad)]
    notes = info.value.__notes__
    assert any("window at positions 0..4" in n for n in notes) or any("0..5" in n for n in notes)
    assert sum("other requests also failed" in n for n in notes) == 1


def test_rank_many_keeps_request_order(until) -> None:
    def fast_ones_answered() -> bool:
        """the 2 x 4 calls of the fast requests answered"""
        return sum(r.outcome == "ok" for r in backend.records) >= 8

    backend = oracle(slow=lambda: until(fast_ones_answered))
    r = ranker(backend)
    requests = [
        ("slow first", docs(5, seed=1)),
        ("fast", docs(7, seed=2)),
        ("fast", docs(7, seed=2)),
    ]
    results = r.rank_many(requests)
    assert [len(x.order) for x in results] == [5, 7, 7]
    assert [x.request.query for x in results] == ["slow first", "fast", "fast"]
    with pytest.raises(InvalidRankingError):
        r.rank_many([("q", docs(3)), ("q", [])])
    out = r.rank_many([("q", docs(3)), ("q", [])], return_exceptions=True)
    assert isinstance(out[1], InvalidRankingError) and list(out[0].order) == best_first(docs(3))


async def test_breaking_out_of_arank_many_cancels_the_rest() -> None:
    backend = oracle()
    before = asyncio.all_tasks()
    requests = [("fast", docs(4))] + [("slow", docs(4, seed=s)) for s in range(4)]
    async with contextlib.aclosing(ranker(backend).arank_many(requests)) as stream:
        async for result in stream:
            assert result.request.query == "fast"
            break
    await anyio.sleep(0)
    assert backend.in_flight == 0 and asyncio.all_tasks() == before


async def test_cancelling_arank_many_leaves_nothing_running(until) -> None:
    backend = oracle()
    before = asyncio.all_tasks()

    async def cancel_when_all_in_flight(scope: anyio.CancelScope) -> None:
        await until(lambda: backend.in_flight == 12)  # 3 requests x 4 calls, none answers
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_all_in_flight, group.cancel_scope)
        async for _ in ranker(backend).arank_many([("slow", docs(5, seed=s)) for s in range(3)]):
            pass
    await anyio.sleep(0)
    assert group.cancel_scope.cancelled_caught and backend.request_count == 12
    assert backend.in_flight == 0 and asyncio.all_tasks() == before


async def test_cancelling_arank_cancels_every_call(until) -> None:
    backend = oracle()

    async def cancel_when_all_in_flight(scope: anyio.CancelScope) -> None:
        await until(lambda: backend.in_flight == 6)  # every call started (none answers)
        scope.cancel()

    ranked = []
    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_all_in_flight, group.cancel_scope)
        ranked.append(await ranker(backend, num_permutations=6).arank("slow", docs(6)))
    assert not ranked and backend.request_count == 6 and backend.in_flight == 0


async def test_events_cover_request_windows_and_samples() -> None:
    events: list[Event] = []
    r = ranker(oracle(), window_size=4, step=2, strategy="sliding", on_event=events.append)
    await r.arank("q", docs(6))
    kinds = [e.kind for e in events]
    assert kinds[0] == "request_start" and kinds[-1] == "request_end"
    assert kinds.count("window_start") == kinds.count("window_end") == 2
    assert kinds.count("sample_end") == 8


async def test_spec_string_backends_are_owned_and_closed(monkeypatch) -> None:
    monkeypatch.setattr(backends, "_registry", backends._registry.copy())  # no global leftover
    made: list[ScriptedBackend] = []

    def factory(model: str | None, **options) -> ScriptedBackend:
        made.append(oracle(name=f"oracle:{model}"))
        return made[-1]

    backends.register("oracle-test", factory)
    async with ranker("oracle-test:m1") as r:
        result = await r.arank("q", docs(4))
    assert made[0].name == "oracle:m1" and made[0].closed and len(result.order) == 4
    mine = oracle()
    async with ranker(mine) as r:
        await r.arank("q", docs(3))
    assert not mine.closed, "a backend object stays the caller's"


def test_names_and_callables_are_accepted_alike() -> None:
    def last_sample(rankings, *, n_items):
        rest = [i for i in range(n_items) if i not in rankings[-1]]
        return list(rankings[-1]) + rest

    items = docs(5)
    assert list(ranker(oracle(), aggregator=last_sample).rank("q", items).order) == best_first(
        items
    )
    assert list(ranker(oracle(), aggregator="kemeny").rank("q", items).order) == best_first(items)
    with pytest.raises(UnknownNameError):
        ranker(oracle(), aggregator="nope")
    with pytest.raises(UnknownNameError):
        ranker(oracle(), prompt="nope")
    with pytest.raises(ConfigurationError):
        ranker(oracle(), min_successful=5)
    with pytest.raises(ConfigurationError):
        ranker(oracle(), window_size=10, step=10, strategy="sliding")
    with pytest.raises(ConfigurationError):
        ranker(oracle(), max_concurrency=0)
    with pytest.raises(ConfigurationError, match="timeout"):
        ranker(oracle(), timeout=0)
    with pytest.raises(ConfigurationError, match="num_permutations"):
        ranker(oracle(), num_permutations=0)


def test_sqlite_cache_makes_a_rerun_free(tmp_path) -> None:
    items = docs(6)
    first, second = oracle(), oracle()
    a = ranker(first, cache=SQLiteCache(tmp_path / "c.db")).rank("q", items)
    b = ranker(second, cache=SQLiteCache(tmp_path / "c.db")).rank("q", items)
    assert a.order == b.order and second.request_count == 0 and b.usage.cached_calls == 4


def test_real_openai_client_over_a_loopback_server() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("uvicorn")
    from permsc_integrations._calls.bridge import run_sync
    from permsc_integrations.backends.openai import OpenAIBackend
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    items = docs(12, seed=4)
    responder = oracle_responder(lambda text: int(text.split()[1]), delay=0.01)
    with ScriptedOpenAIServer(responder) as server:
        backend = OpenAIBackend("scripted-model", base_url=server.base_url)
        r = PSCRanker(
            backend,
            num_permutations=6,
            window_size=8,
            step=4,
            strategy="sliding",
            max_concurrency=4,
        )
        result = r.rank("rank docs", items)
        run_sync(backend.aclose)
        assert server.request_count == result.usage.calls == 2 * 6  # windows (4, 12), (0, 8)
    assert list(result.order[:4]) == best_first(items)[:4]
    assert result.usage.prompt_tokens > 0 and result.usage.latency_s > 0
