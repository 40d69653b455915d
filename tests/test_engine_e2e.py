"""PSCRanker end to end: the real openai client against a scripted loopback server."""

from __future__ import annotations

import asyncio
import random
import re
import threading
from contextlib import aclosing

import anyio
import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations._ranker.ranker import RankRequest
from permsc_integrations.backends.openai import OpenAIBackend
from permsc_integrations.errors import (
    BackendError,
    BackendTimeoutError,
    InsufficientSamplesError,
)
from permsc_integrations.results import ParseStatus
from permsc_integrations.testing import ChatRequest, Fault, Reply, oracle_responder, sequence

pytestmark = pytest.mark.timeout(30)  # a hang fails the test, whatever the machine's speed

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0.01, jitter=0.0, max_total_time=10)


def grade(text: str) -> int:
    """The hidden relevance written into every test passage."""
    return int(re.search(r"grade (\d+)", text).group(1))


def make_items(n: int, seed: int = 0, tag: str = "doc") -> list[str]:
    grades = random.Random(seed).sample(range(100), n)
    return [f"{tag} {k} with grade {g}" for k, g in enumerate(grades)]


def true_order(items: list[str]) -> tuple[int, ...]:
    return tuple(sorted(range(len(items)), key=lambda i: -grade(items[i])))


ORACLE = oracle_responder(grade)


def ranker_for(server, **options) -> PSCRanker:
    options = {"num_permutations": 5, "retry": FAST_RETRY, "timeout": 5.0, **options}
    return PSCRanker(OpenAIBackend("scripted", base_url=server.base_url), **options)


def run(ranker: PSCRanker, query: str, items: list[str], **kw):
    async def go():
        async with ranker:
            return await ranker.arank(query, items, **kw)

    return anyio.run(go)


def test_correct_rankings_from_concurrent_calls(scripted_server, until):
    async def once_all_six_arrived(request: ChatRequest) -> Reply:
        await until(lambda: server.max_in_flight >= 6)  # the six calls overlap
        return ORACLE(request)

    server = scripted_server(once_all_six_arrived)
    items = make_items(8)
    events = []
    result = run(ranker_for(server, num_permutations=6), "q", items, on_event=events.append)
    assert result.order == true_order(items)
    assert result.confidence == pytest.approx(1.0)
    assert all(s.status is ParseStatus.OK for s in result.samples) and not result.failures
    assert result.usage.calls == 6 and result.usage.retries == 0 and result.usage.prompt_tokens > 0
    assert server.request_count == 6 and server.max_in_flight == 6
    assert sum(e.kind == "sample_end" for e in events) == 6
    shown = {tuple(s.permutation) for s in result.samples}
    assert len(shown) == 6  # six different shuffles were asked


def test_spec_string_sync_rank_and_environment(scripted_server, monkeypatch):
    server = scripted_server(ORACLE)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    items = make_items(6, seed=1)
    with PSCRanker("openai:spec-model", num_permutations=3, retry=FAST_RETRY) as ranker:
        result = ranker.rank("q", items)
    assert result.order == true_order(items)
    assert {r.model for r in server.requests} == {"spec-model"}


def test_same_seed_same_prompts(scripted_server):
    server = scripted_server(ORACLE)
    items = make_items(7, seed=2)
    run(ranker_for(server, seed=11), "q", items)
    run(ranker_for(server, seed=11), "q", items)
    run(ranker_for(server, seed=12), "q", items)
    texts = [r.text for r in server.requests]
    assert sorted(texts[:5]) == sorted(texts[5:10])
    assert sorted(texts[:5]) != sorted(texts[10:])


def test_malformed_text_is_reasked_then_counted_as_failed(scripted_server):
    items = make_items(6, seed=3)
    server = scripted_server(sequence("I think they are all great!", then=ORACLE))
    result = run(ranker_for(server), "q", items)
    assert result.order == true_order(items) and not result.failures
    assert server.request_count == 6  # one re-ask
    shortest = min(len(r.messages) for r in server.requests)
    reasked = [r for r in server.requests if len(r.messages) > shortest]
    assert len(reasked) == 1 and "could not be read" in reasked[0].messages[-1]["content"]
    server.responder, _ = sequence("no ranking here", then=ORACLE), server.reset()
    result = run(ranker_for(server, reasks=0), "q", items)
    (failed,) = result.failures
    assert failed.status is ParseStatus.INVALID and failed.raw_text == "no ranking here"
    assert result.order == true_order(items)  # aggregated from the four good samples


def test_partial_rankings_are_used_not_filled_in(scripted_server):
    def partial(request: ChatRequest) -> str:
        full = ORACLE(request).text
        return " > ".join(full.split(" > ")[:-2]) if request.index % 2 == 0 else full

    server = scripted_server(partial)
    items = make_items(8, seed=4)
    result = run(ranker_for(server, num_permutations=6), "q", items)
    statuses = [s.status for s in result.samples]
    assert statuses.count(ParseStatus.PARTIAL) == 3 and statuses.count(ParseStatus.OK) == 3
    assert all(len(s.ranking) == 6 for s in result.samples if s.status is ParseStatus.PARTIAL)
    assert result.order == true_order(items)


def test_rate_limit_waits_for_retry_after(scripted_server):
    server = scripted_server(sequence(Fault.status(429, retry_after=0.4), then=ORACLE))
    items = make_items(5, seed=5)
    result = run(ranker_for(server, num_permutations=4), "q", items)
    assert result.order == true_order(items) and not result.failures
    assert result.usage.retries == 1 and server.request_count == 5
    limited = next(r for r in server.records if r.outcome == "status 429")
    retried = max(r.start for r in server.records)
    assert retried - limited.end >= 0.38  # the server's Retry-After was honoured


def test_server_errors_are_retried_within_bounds(scripted_server):
    server = scripted_server(sequence(Fault.status(500), Fault.status(502), then=ORACLE))
    items = make_items(5, seed=6)
    result = run(ranker_for(server, num_permutations=4), "q", items)
    assert result.order == true_order(items) and result.usage.retries == 2
    server.responder, _ = (lambda request: Fault.status(500)), server.reset()
    with pytest.raises(InsufficientSamplesError) as caught:
        run(ranker_for(server, num_permutations=4), "q", items)
    assert server.request_count == 4 * FAST_RETRY.max_attempts  # bounded, then given up
    failures = caught.value.failures
    assert len(failures) == 4 and all(f.status_code == 500 for f in failures)


def test_non_retryable_failures_are_recorded_and_the_rest_aggregated(scripted_server):
    server = scripted_server(
        sequence(Fault.status(400), Fault.status(422, message="odd field"), then=ORACLE)
    )
    items = make_items(7, seed=7)
    result = run(ranker_for(server, num_permutations=6), "q", items)
    assert server.request_count == 6  # never retried
    assert len(result.failures) == 2 and len(result.windows[0].failed) == 2
    errors = sorted(s.error for s in result.failures)
    assert errors[0].startswith("BackendError") and "scripted error 400" in errors[0]
    assert "odd field" in errors[1]
    assert all(s.status is ParseStatus.ERROR for s in result.failures)
    assert all(isinstance(s.exception, BackendError) for s in result.failures)
    assert result.order == true_order(items)


def test_slow_answer_past_the_timeout_is_retried(scripted_server):
    server = scripted_server(sequence(Reply("too late", delay=5), then=ORACLE))
    items = make_items(5, seed=8)
    result = run(ranker_for(server, num_permutations=3, timeout=0.3), "q", items)
    assert result.order == true_order(items) and result.usage.retries == 1


def test_dropped_connections_are_retried(scripted_server):
    server = scripted_server(sequence(Fault.drop(), Fault.drop(after_headers=True), then=ORACLE))
    items = make_items(5, seed=9)
    result = run(ranker_for(server, num_permutations=3), "q", items)
    assert result.order == true_order(items) and result.usage.retries == 2
    assert [r.outcome for r in server.records].count("drop") == 2


def test_a_server_that_never_answers_fails_fast_without_hanging(scripted_server):
    server = scripted_server(lambda request: Reply("never", delay=60))
    with pytest.raises(InsufficientSamplesError) as caught:  # the test's timeout catches a hang
        run(
            ranker_for(
                server,
                num_permutations=4,
                timeout=0.2,
                retry=RetryPolicy(max_attempts=2, initial_backoff=0.01, jitter=0),
            ),
            "q",
            make_items(4),
        )
    assert all(isinstance(f, BackendTimeoutError) for f in caught.value.failures)
    assert 4 < server.request_count <= 8  # two attempts each at most (a cut one may not arrive)


async def test_cancelling_the_caller_leaves_no_task_running(scripted_server, until):
    server = scripted_server(lambda request: Reply("never", delay=60))
    ranker = ranker_for(server, num_permutations=8)
    before = set(asyncio.all_tasks())

    async def cancel_when_all_arrived(scope: anyio.CancelScope) -> None:
        await until(lambda: server.request_count == 8)
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_all_arrived, group.cancel_scope)
        await ranker.arank("q", make_items(6))
    assert group.cancel_scope.cancelled_caught
    assert server.request_count == 8  # every call was in flight when we cancelled
    await until(lambda: set(asyncio.all_tasks()) == before)  # (the client's own tasks end)
    await ranker.backend.aclose()


async def test_arank_many_attributes_results_to_requests(scripted_server, until):
    others_out = threading.Event()  # set by the test once the other five results are out

    async def by_query(request: ChatRequest) -> Reply:
        q = int(re.search(r"Search Query: q(\d+)", request.text).group(1))
        await until(lambda: server.max_in_flight >= 7)  # the shared limit is reached
        if q == 0:  # q0 answers last
            await until(others_out.is_set)
        return ORACLE(request)

    server = scripted_server(by_query)
    requests = [
        RankRequest(f"q{q}", make_items(6, seed=q, tag=f"r{q}"), id=f"id{q}") for q in range(6)
    ]
    ranker = ranker_for(server, num_permutations=4, max_concurrency=7)
    async with ranker, aclosing(ranker.arank_many(requests)) as stream:
        results = []
        async for result in stream:
            results.append(result)
            if len(results) == 5:
                others_out.set()
    assert results[-1].request.id == "id0"  # yielded as completed, not in request order
    assert sorted(r.request.id for r in results) == [q.id for q in requests]
    for result in results:
        assert result.order == true_order(list(result.request.items))
    assert server.request_count == 24 and server.max_in_flight == 7  # one shared limit


def test_rank_many_in_request_order_under_a_per_request_cap(scripted_server, until):
    async def once_six_arrived(request: ChatRequest) -> Reply:  # the caps, all reached
        await until(lambda: server.max_in_flight >= 6)
        return ORACLE(request)

    server = scripted_server(once_six_arrived)
    requests = [(f"q{q}", make_items(5, seed=10 + q, tag=f"s{q}")) for q in range(3)]
    with PSCRanker(
        OpenAIBackend("m", base_url=server.base_url),
        num_permutations=6,
        request_concurrency=2,
        retry=FAST_RETRY,
    ) as ranker:
        results = ranker.rank_many(requests)
    assert [r.request.query for r in results] == ["q0", "q1", "q2"]
    assert [r.order for r in results] == [true_order(items) for _, items in requests]
    assert server.max_in_flight == 6  # three requests, two calls each


def test_sliding_window_over_a_long_list(scripted_server):
    server = scripted_server(ORACLE)
    items = make_items(25, seed=13)
    result = run(
        ranker_for(server, num_permutations=3, window_size=10, step=5, strategy="sliding"),
        "q",
        items,
    )
    assert len(result.windows) == 4 and server.request_count == 12
    assert result.order[:5] == true_order(items)[:5]  # one pass settles window - step items
    assert sorted(result.order) == list(range(25))
