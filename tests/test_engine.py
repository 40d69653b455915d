"""The PSC engine over one window (a list that fits one, through the ranker), against small
real Backend implementations."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping, Sequence

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from permsc_integrations import PSCRanker
from permsc_integrations._calls.cache import MemoryCache
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations._events import Event
from permsc_integrations._run.sampling import REASK
from permsc_integrations._run.state import derive_seed
from permsc_integrations.backends.base import Completion, GenerationSettings
from permsc_integrations.errors import (
    AuthenticationError,
    BackendError,
    ConfigurationError,
    InsufficientSamplesError,
    ParseError,
)
from permsc_integrations.results import ParseStatus, Usage
from permsc_integrations.testing import ChatRequest, Fault, ScriptedBackend
from permsc_integrations.testing._responders import shown_passages

pytestmark = pytest.mark.timeout(30)

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.002, jitter=0.0)


shown = shown_passages  # the passages of a RankGPT prompt, in prompt order


def answer(order: Sequence[int]) -> str:
    return " > ".join(f"[{p + 1}]" for p in order)


def oracle(
    relevance: Mapping[str, float] | None = None,
    *,
    delay: float = 0.0,
    seed: int = 0,
    script=None,
) -> ScriptedBackend:
    """Ranks passages by a known relevance; random delays scramble completion order.

    ``await script(request)`` may return the answer (text or a Fault) instead, or raise.
    """
    relevance, rng = relevance or {}, random.Random(seed)

    async def respond(request: ChatRequest) -> str | Fault:
        await anyio.sleep(rng.uniform(0, delay) if delay else 0)
        if script is not None and (scripted := await script(request)) is not None:
            return scripted
        items = shown(request.messages)
        return answer(sorted(range(len(items)), key=lambda p: -relevance.get(items[p], 0.0)))

    return ScriptedBackend(respond, name="oracle")


class ScriptedBatchBackend(ScriptedBackend):
    """A scripted backend answering a whole round of prompts in one batched call."""

    def __init__(self, responder) -> None:
        super().__init__(responder, name="oracle")
        self.batches: list[int] = []

    async def acomplete_batch(self, batch, settings: GenerationSettings) -> list[Completion]:
        self.batches.append(len(batch))
        return [await self.acomplete(messages, settings) for messages in batch]


def batch_oracle(*args, **kwargs) -> ScriptedBatchBackend:
    return ScriptedBatchBackend(oracle(*args, **kwargs).responder)


def prompts(backend: ScriptedBackend) -> list[list[Mapping[str, str]]]:
    return [list(r.messages) for r in backend.requests]


def outcomes(backend: ScriptedBackend, outcome: str) -> int:
    return sum(r.outcome == outcome for r in backend.records)


async def cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


ITEMS = [f"passage {c}" for c in "abcdefgh"]
TRUTH = (5, 2, 7, 0, 3, 6, 1, 4)  # item indices, best first
RELEVANCE = {ITEMS[i]: float(len(TRUTH) - rank) for rank, i in enumerate(TRUTH)}


def make(backend, **options) -> PSCRanker:
    """A ranker whose lists (up to 20 items) are one PSC window."""
    options.setdefault("num_permutations", 8)
    options.setdefault("retry", FAST_RETRY)
    options.setdefault("seed", 1)
    return PSCRanker(backend, **options)


async def rank(ranker: PSCRanker, **kwargs):
    """The one window of ranking ``ITEMS``."""
    result = await ranker.arank("which letter?", ITEMS, **kwargs)
    (window,) = result.windows
    return window


async def test_oracle_answers_aggregate_to_the_truth_whatever_the_completion_order() -> None:
    backend = oracle(RELEVANCE, delay=0.02, seed=3)
    result = await rank(make(backend))
    assert result.order == TRUTH
    started = [tuple(shown(p)) for p in prompts(backend)]
    finished = [tuple(shown(r.request.messages)) for r in backend.records]
    assert finished != started, "the delays really reordered completions"
    for sample in result.samples:
        assert sample.status is ParseStatus.OK and sample.ranking == TRUTH
        assert tuple(ITEMS[i] for i in sample.permutation) in started
    assert result.confidence == pytest.approx(1.0)


async def test_each_answer_maps_back_through_its_own_permutation() -> None:
    async def shown_order_is_best(request: ChatRequest) -> str:  # "[1] > [2] > ..."
        return answer(range(len(shown(request.messages))))

    result = await rank(make(oracle(delay=0.02, seed=5, script=shown_order_is_best)))
    for sample in result.samples:
        assert sample.ranking == sample.permutation


async def test_same_seed_same_prompts_and_another_seed_others() -> None:
    def sent(backend: ScriptedBackend) -> list[str]:
        return sorted(json.dumps(p) for p in prompts(backend))

    a, b, c = (
        oracle(RELEVANCE, delay=0.01, seed=1),
        oracle(RELEVANCE, delay=0.01, seed=2),
        oracle(RELEVANCE),
    )
    await rank(make(a, seed=42))
    await rank(make(b, seed=42))
    await rank(make(c, seed=43))
    assert sent(a) == sent(b)
    assert sent(a) != sent(c)
    assert derive_seed(0, "q", ITEMS, (0, 10)) != derive_seed(0, "q", ITEMS, (0, 0))
    assert derive_seed(0, "q", ITEMS) != derive_seed(1, "q", ITEMS)


async def test_include_identity_shows_the_original_order_first() -> None:
    result = await rank(make(oracle(RELEVANCE), include_identity=True))
    assert result.samples[0].permutation == tuple(range(len(ITEMS)))


@pytest.mark.parametrize("shared,per_request,expected", [(3, None, 3), (5, 2, 2), (16, None, 12)])
async def test_concurrency_never_exceeds_the_limiters(
    shared: int, per_request: int | None, expected: int, until
) -> None:
    async def together(request: ChatRequest) -> None:  # answer once the cap is reached
        await until(lambda: backend.max_in_flight >= expected)

    backend = oracle(RELEVANCE, script=together)
    ranker = make(
        backend, num_permutations=12, max_concurrency=shared, request_concurrency=per_request
    )
    await rank(ranker)
    assert backend.max_in_flight == expected


async def test_each_call_goes_out_before_the_next_one_is_built() -> None:
    class Wire:  # builds its request, yields once (as a socket write does), then "sends" it
        name = "wire"

        def __init__(self) -> None:
            self.log: list[str] = []

        async def acomplete(self, messages, settings) -> Completion:
            self.log.append("built")
            await anyio.sleep(0)
            self.log.append("sent")
            return Completion(text=answer(range(len(shown(messages)))))

        async def aclose(self) -> None:
            pass

    backend = Wire()
    await rank(make(backend, num_permutations=8))
    # built, sent, built, sent, ...: not eight requests built before the first is sent
    assert backend.log[:4] == ["built", "sent", "built", "sent"]
    assert len(backend.log) == 16


async def test_cancelling_the_caller_cancels_every_call_and_leaves_no_task() -> None:
    all_in_flight, never = anyio.Event(), anyio.Event()

    async def hang(request: ChatRequest) -> str:
        if request.index == 9:
            all_in_flight.set()
        await never.wait()
        return ""

    backend = oracle(script=hang)
    engine = make(backend, num_permutations=10)
    before = asyncio.all_tasks()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_on, all_in_flight, scope)
            await rank(engine)
    assert scope.cancelled_caught
    assert backend.in_flight == 0 and outcomes(backend, "cancelled") == 10
    assert asyncio.all_tasks() == before


async def test_cancelling_the_caller_while_calls_wait_for_a_slot_leaves_no_task(until) -> None:
    never = anyio.Event()

    async def hang(request: ChatRequest) -> str:
        await never.wait()
        return ""

    backend = oracle(script=hang)
    ranker = make(backend, num_permutations=10, max_concurrency=2)  # 8 calls wait for a slot
    before = asyncio.all_tasks()

    async def cancel_once_full(scope: anyio.CancelScope) -> None:
        await until(lambda: backend.in_flight == 2)
        scope.cancel()

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_once_full, scope)
            await rank(ranker)
    assert scope.cancelled_caught and backend.in_flight == 0
    assert backend.request_count == 2 and outcomes(backend, "cancelled") == 2
    assert asyncio.all_tasks() == before


async def test_retryable_failures_are_retried_and_counted() -> None:
    async def first_call_fails(request: ChatRequest) -> Fault | None:
        return Fault.status(429, retry_after=0.001) if request.index < 8 else None

    backend = oracle(RELEVANCE, script=first_call_fails)
    result = await rank(make(backend))
    usage = sum((s.usage for s in result.samples), Usage())
    assert result.order == TRUTH
    assert usage.retries == 8 and usage.calls == 16 and outcomes(backend, "status 429") == 8
    answered = [r.request.text for r in backend.records if r.outcome == "ok"]
    assert usage.prompt_tokens == sum(len(text.split()) for text in answered)  # words, as sent
    assert usage.completion_tokens == 8 * 15  # "[6] > [3] > ... > [5]": 15 words


async def test_partial_failures_are_recorded_and_the_rest_aggregated() -> None:
    async def some_fail(request: ChatRequest) -> None:
        if request.index % 3 == 0:
            raise BackendError("400 bad request")  # not retryable

    result = await rank(make(oracle(RELEVANCE, script=some_fail)))
    failed = result.failed
    assert len(failed) == 3 and all(s.status is ParseStatus.ERROR for s in failed)
    assert all("BackendError: 400 bad request" in s.error for s in failed)
    assert result.order == TRUTH and len(result.samples) == 8


async def test_below_min_successful_raises_listing_every_failure() -> None:
    async def most_fail(request: ChatRequest) -> None:
        if request.index < 5:
            raise BackendError(f"refused call {request.index}")

    with pytest.raises(InsufficientSamplesError) as info:
        await rank(make(oracle(RELEVANCE, script=most_fail)))
    err = info.value
    assert (err.successful, err.required, len(err.failures)) == (3, 4, 5)
    assert all(isinstance(f, BackendError) and "refused call" in str(f) for f in err.failures)
    assert "BackendError: refused call" in str(err)


async def test_min_successful_can_demand_every_sample() -> None:
    async def one_fails(request: ChatRequest) -> None:
        if request.index == 0:
            raise BackendError("nope")

    with pytest.raises(InsufficientSamplesError):
        await rank(make(oracle(RELEVANCE, script=one_fails), min_successful=8))
    with pytest.raises(ConfigurationError):
        make(oracle(), min_successful=9)


async def test_unparseable_answers_are_reasked_then_fail() -> None:
    async def garbage_first(request: ChatRequest) -> str | None:
        return (
            "I cannot rank these." if request.messages[-1]["content"] != REASK.format(n=8) else None
        )

    backend = oracle(RELEVANCE, script=garbage_first)
    result = await rank(make(backend))
    assert result.order == TRUTH
    assert all(s.attempts == 2 and s.status is ParseStatus.OK for s in result.samples)
    reasked = [p for p in prompts(backend) if p[-1]["content"] == REASK.format(n=8)]
    assert len(reasked) == 8 and reasked[0][-2] == {
        "role": "assistant",
        "content": "I cannot rank these.",
    }

    async def always_garbage(request: ChatRequest) -> str:
        return "no idea"

    with pytest.raises(InsufficientSamplesError, match="ParseError") as info:
        await rank(make(oracle(script=always_garbage), reasks=2))
    assert all(isinstance(f, ParseError) and f.raw_text == "no idea" for f in info.value.failures)


async def test_partial_answers_count_and_keep_missing_items_missing() -> None:
    async def top_three(request: ChatRequest) -> str:
        items = shown(request.messages)
        best = sorted(range(len(items)), key=lambda p: -RELEVANCE[items[p]])
        return answer(best[:3])

    result = await rank(make(oracle(script=top_three)))
    assert all(s.status is ParseStatus.PARTIAL and len(s.ranking) == 3 for s in result.samples)
    assert result.order[:3] == TRUTH[:3]


async def test_a_batch_backend_gets_one_call_per_round() -> None:
    async def garbage_once_for_first(request: ChatRequest) -> str | None:
        return "??" if request.index == 0 else None

    backend = batch_oracle(RELEVANCE, script=garbage_once_for_first)
    result = await rank(make(backend))
    assert backend.batches == [8, 1], "one batch, then one re-ask of the unparseable answer"
    assert result.order == TRUTH


async def test_a_budget_counts_the_prompts_of_a_batch_not_the_batches() -> None:
    async def garbage_for_the_first_two(request: ChatRequest) -> str | None:
        return "??" if request.index in (0, 1) else None

    backend = batch_oracle(RELEVANCE, script=garbage_for_the_first_two)
    result = await make(backend, max_calls=9).arank("which letter?", ITEMS)
    # 8 prompts, then room for one of the two re-asks: the other answer stays unread
    assert backend.batches == [8, 1] and backend.request_count == result.usage.calls == 9
    invalid = [s for s in result.samples if s.status is ParseStatus.INVALID]
    assert len(invalid) == 1 and "re-ask was not sent" in (invalid[0].error or "")
    assert result.stopped == "budget"


async def test_a_failing_batch_fails_every_sample_in_it() -> None:
    async def overloaded(request: ChatRequest) -> None:
        raise BackendError("out of memory")

    with pytest.raises(InsufficientSamplesError) as info:
        await rank(make(batch_oracle(script=overloaded)))
    assert len(info.value.failures) == 8


async def test_cache_hits_skip_the_backend() -> None:
    cache = MemoryCache()
    first, second = oracle(RELEVANCE), oracle(RELEVANCE)
    await rank(make(first, cache=cache))
    again = await rank(make(second, cache=cache))
    usage = sum((s.usage for s in again.samples), Usage())
    assert first.request_count == 8 and second.request_count == 0
    assert usage.cached_calls == 8 and usage.calls == 0 and again.order == TRUTH


async def test_a_failed_request_carries_every_call_and_cache_hit_it_made() -> None:
    """The request's usage is one count (its meter): an error raised out of it carries the
    cache hits and the calls of the window that failed, not only of the windows done."""
    cache = MemoryCache()
    await rank(make(oracle(RELEVANCE), cache=cache))  # the first 8 shuffles' answers, cached

    async def bad_key(request: ChatRequest) -> Fault:
        return Fault.status(401, message="invalid api key")

    backend = oracle(script=bad_key)  # the 4 shuffles not cached meet a bad key
    with pytest.raises(AuthenticationError) as caught:
        await rank(make(backend, cache=cache, num_permutations=12))
    usage = caught.value.usage
    assert usage is not None and usage.calls == backend.request_count >= 1
    assert usage.cached_calls == 8


async def test_per_call_timeout_fails_the_sample_without_hanging() -> None:
    async def slow(request: ChatRequest) -> None:
        await anyio.sleep(30)

    engine = make(
        oracle(script=slow),
        timeout=0.1,
        retry=RetryPolicy(max_attempts=2, initial_backoff=0, jitter=0),
    )
    with anyio.fail_after(5), pytest.raises(InsufficientSamplesError, match="BackendTimeoutError"):
        await rank(engine)


async def test_a_bug_in_a_backend_fails_its_samples_with_a_typed_error() -> None:
    async def bug(request: ChatRequest) -> None:
        if request.index < 3:
            raise ZeroDivisionError("backend bug")

    result = await rank(make(oracle(RELEVANCE, script=bug)))  # the other 5 samples stand
    failed = result.failed
    assert len(failed) == 3 and result.order == TRUTH
    assert all(isinstance(s.exception, BackendError) for s in failed)
    assert all(isinstance(s.exception.__cause__, ZeroDivisionError) for s in failed)
    assert not any(s.exception.retryable for s in failed)


async def test_events_per_sample_with_status() -> None:
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    def broken(event: Event) -> None:
        raise RuntimeError("progress bar crashed")

    async def one_fails(request: ChatRequest) -> None:
        if request.index == 0:
            raise BackendError("nope")

    ranker = make(oracle(RELEVANCE, script=one_fails), on_event=record)
    await rank(ranker, on_event=broken, request_id="r1")
    starts = [e for e in events if e.kind == "sample_start"]
    ends = [e for e in events if e.kind == "sample_end"]
    assert sorted(e.sample for e in starts) == sorted(e.sample for e in ends) == list(range(8))
    assert {e.request_id for e in events} == {"r1"} and {e.window for e in starts} == {0}
    assert sorted(e.detail["status"] for e in ends) == ["error"] + ["ok"] * 7


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 12), m=st.integers(1, 9), seed=st.integers(0, 2**32), data=st.data())
def test_any_window_maps_every_answer_back_to_the_right_items(n, m, seed, data) -> None:
    items = [f"item {i}" for i in range(n)]
    values = data.draw(st.permutations(range(n)))
    relevance = {items[i]: float(values[i]) for i in range(n)}
    truth = tuple(sorted(range(n), key=lambda i: -values[i]))
    indices = tuple(data.draw(st.permutations(range(n))))  # the window's input order
    ranker = make(oracle(relevance, delay=0.002, seed=seed), num_permutations=m, seed=seed)
    result = anyio.run(ranker.arank, "q", [items[i] for i in indices])
    (window,) = result.windows
    as_items = lambda order: tuple(indices[j] for j in order)  # noqa: E731
    assert as_items(result.order) == truth and window.indices == tuple(range(n))
    assert all(
        as_items(s.ranking) == truth and sorted(s.permutation) == list(range(n))
        for s in window.samples
    )


async def test_a_sample_that_exhausts_its_retries_records_every_attempt() -> None:
    failing: set[str] = set()

    async def first_prompt_always_503(request: ChatRequest) -> None:
        key = json.dumps(request.messages[-len(ITEMS) * 2 - 1 :])
        if request.index == 0 or key in failing:
            failing.add(key)
            raise BackendError("503 overloaded", retryable=True, status_code=503)

    result = await rank(make(oracle(RELEVANCE, script=first_prompt_always_503)))
    (failed,) = result.failed
    assert failed.status is ParseStatus.ERROR and "503 overloaded" in failed.error
    assert (failed.usage.calls, failed.usage.retries) == (FAST_RETRY.max_attempts, 2)
    assert result.order == TRUTH


async def test_min_coverage_turns_short_answers_into_reasks() -> None:
    async def top_two(request: ChatRequest) -> str:
        return "[3] > [5]" if request.messages[-1]["content"] != REASK.format(n=8) else None

    backend = oracle(RELEVANCE, script=top_two)
    result = await rank(make(backend, min_coverage=0.5))
    assert all(s.attempts == 2 and s.status is ParseStatus.OK for s in result.samples)
    partial = await rank(make(oracle(RELEVANCE, script=top_two)))  # the default: any ranks
    assert all(s.status is ParseStatus.PARTIAL and s.attempts == 1 for s in partial.samples)
