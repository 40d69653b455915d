"""HaystackChatBackend: Haystack's real OpenAIChatGenerator against the scripted server, its
usage read from the replies' meta and its failures mapped to the core's typed errors; the
engine retries what is retryable, and a ranking that fails raises or falls back, never
reorders silently."""

from __future__ import annotations

import pytest
from haystack.dataclasses import ChatMessage
from haystack_integrations.components.rankers.permsc import HaystackChatBackend, PSCRanker

from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    InsufficientSamplesError,
    RateLimitError,
)
from permsc_integrations.testing import Fault, Reply, ScriptedOpenAIServer, sequence

ASK = [{"role": "system", "content": "rank"}, {"role": "user", "content": "[1] a\n[2] b"}]


async def test_completes_with_the_usage_the_replies_report(kit):
    with ScriptedOpenAIServer(lambda request: "[2] > [1]") as server:
        backend = HaystackChatBackend(kit.generator(server))
        answer = await backend.acomplete(ASK, GenerationSettings())
        (record,) = server.requests
    assert answer.text == "[2] > [1]" and answer.finish_reason == "stop"
    assert answer.usage.calls == 1 and answer.usage.prompt_tokens > 0
    assert answer.usage.completion_tokens > 0
    assert [m["role"] for m in record.messages] == ["system", "user"]
    assert record.temperature == 0.0  # the generator's own generation_kwargs
    assert backend.name == "haystack:scripted-ranker"
    assert "sk-test" not in backend.fingerprint and "scripted-ranker" in backend.fingerprint


async def test_a_sync_only_generator_runs_in_a_thread():
    class Sync:  # the protocol's minimum: run(messages=...) -> {"replies": [...]}
        def run(self, messages):
            return {"replies": [ChatMessage.from_assistant(f"[2] > [1] ({len(messages)})")]}

    answer = await HaystackChatBackend(Sync()).acomplete(ASK, GenerationSettings())
    assert answer.text == "[2] > [1] (2)" and answer.usage.calls == 1
    assert answer.usage.total_tokens == 0  # none reported: the call is counted, no tokens


@pytest.mark.parametrize(
    "fault, error, retryable",
    [
        (Fault.status(429, retry_after=2.0), RateLimitError, True),
        (Fault.status(500), BackendError, True),
        (Fault.status(401), AuthenticationError, False),
        (Fault.drop(), BackendConnectionError, True),
    ],
)
async def test_failures_become_typed_backend_errors(kit, fault, error, retryable):
    with ScriptedOpenAIServer(lambda request: fault) as server:
        backend = HaystackChatBackend(kit.generator(server))
        with pytest.raises(error) as caught:
            await backend.acomplete(ASK, GenerationSettings())
    assert caught.value.retryable is retryable
    assert "sk-test" not in str(caught.value)
    if isinstance(caught.value, RateLimitError):
        assert caught.value.retry_after == pytest.approx(2.0)


async def test_a_slow_answer_times_out(kit):
    with ScriptedOpenAIServer(lambda request: Reply("[1] > [2]", delay=2.0)) as server:
        backend = HaystackChatBackend(kit.generator(server))
        with pytest.raises(BackendTimeoutError):
            await backend.acomplete(ASK, GenerationSettings(timeout=0.2))


def test_no_reply_is_a_typed_error_not_retried():
    class Silent:
        def run(self, messages):
            return {"replies": []}

    ranker = PSCRanker(chat_generator=Silent(), num_permutations=2)
    from haystack import Document

    with pytest.raises(InsufficientSamplesError) as caught:
        ranker.run(query="q", documents=[Document(content="a"), Document(content="b")])
    assert "returned no reply" in str(caught.value)


def test_the_engine_retries_429_and_500_then_ranks(kit):
    from permsc_integrations.testing import oracle_responder

    oracle = oracle_responder(kit.relevance)
    script = sequence(Fault.status(429, retry_after=0.01), Fault.status(500), then=oracle)
    with ScriptedOpenAIServer(script) as server:
        ranker = PSCRanker(
            chat_generator=kit.generator(server),
            num_permutations=3,
            max_concurrency=1,
            retry={"initial_backoff": 0.01, "max_backoff": 0.05, "jitter": 0.0},
        )
        documents = ranker.run(query=kit.QUERY, documents=kit.documents())["documents"]
        assert server.request_count == 5  # 3 answers, 2 retried failures
    assert [d.content for d in documents] == kit.oracle_texts()
    assert documents[0].meta["psc"]["usage"]["retries"] == 2


def test_garbage_answers_fail_the_ranking_with_a_typed_error(kit):
    with ScriptedOpenAIServer(lambda request: "I like turtles.") as server:
        ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=3, reasks=0)
        with pytest.raises(InsufficientSamplesError):
            ranker.run(query=kit.QUERY, documents=kit.documents())


async def test_a_failed_ranking_falls_back_to_the_input_order_when_asked(kit):
    with ScriptedOpenAIServer(lambda request: "I like turtles.") as server:
        ranker = PSCRanker(
            chat_generator=kit.generator(server),
            num_permutations=3,
            reasks=0,
            raise_on_failure=False,
            top_k=2,
        )
        given = kit.documents()
        documents = (await ranker.run_async(query=kit.QUERY, documents=given))["documents"]
    assert [d.id for d in documents] == [d.id for d in given]  # never reordered, nothing cut
    assert all(d.score is None for d in documents)  # the retriever gave none: none invented
    mark = documents[0].meta["psc"]
    assert mark["fallback"] is True and "InsufficientSamplesError" in mark["error"]
    assert "psc" not in given[0].meta  # the input is not mutated


def test_answers_past_the_timeout_are_retried_then_fail_typed(kit):
    slow = Reply("[1] > [2]", delay=1.0)
    with ScriptedOpenAIServer(lambda request: slow) as server:
        ranker = PSCRanker(
            chat_generator=kit.generator(server),
            num_permutations=2,
            timeout=0.2,
            retry={"max_attempts": 2, "initial_backoff": 0.01, "jitter": 0.0},
        )
        with pytest.raises(InsufficientSamplesError) as caught:
            ranker.run(query=kit.QUERY, documents=kit.documents())
        # retried (more than the 2 first tries), never past max_attempts=2 a call (the
        # engine may stop retrying once the ranking cannot succeed)
        assert 2 < server.request_count <= 4
    assert all(isinstance(e, BackendTimeoutError) for e in caught.value.failures)
