"""LlamaIndexLLMBackend: a real OpenAILike LLM against the scripted server, its usage and
its failures mapped to the core's typed errors; the engine retries what is retryable."""

from __future__ import annotations

import socket

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.permsc import LlamaIndexLLMBackend, PSCRerank

from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.errors import (
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ContextLengthError,
    RateLimitError,
)
from permsc_integrations.testing import Fault, Reply, ScriptedOpenAIServer, sequence

ASK = [{"role": "system", "content": "rank"}, {"role": "user", "content": "[1] a\n[2] b"}]


async def test_completes_with_the_usage_the_llm_reports(kit):
    with ScriptedOpenAIServer(lambda request: "[2] > [1]") as server:
        backend = LlamaIndexLLMBackend(kit.openai_like(server))
        answer = await backend.acomplete(ASK, GenerationSettings())
        (record,) = server.requests
    assert answer.text == "[2] > [1]"
    assert answer.usage.calls == 1 and answer.usage.prompt_tokens > 0
    assert answer.usage.completion_tokens > 0 and answer.finish_reason == "stop"
    assert [m["role"] for m in record.messages] == ["system", "user"]
    assert backend.name == "llama_index:scripted-ranker"


async def test_an_llm_reporting_no_usage_counts_the_call_only(kit):
    answer = await LlamaIndexLLMBackend(MockLLM()).acomplete(ASK, GenerationSettings())
    assert answer.usage.calls == 1 and answer.usage.total_tokens == 0
    assert "[1] a" in answer.text  # MockLLM echoes its prompt


@pytest.mark.parametrize(
    "fault, error, retryable",
    [
        (Fault.status(429, retry_after=2.0), RateLimitError, True),
        (Fault.status(503), BackendError, True),
        (Fault.status(401), BackendError, False),
        (Fault.context_length(), ContextLengthError, False),
        (Fault.drop(), BackendConnectionError, True),
    ],
)
async def test_failures_become_typed_backend_errors(kit, fault, error, retryable):
    with ScriptedOpenAIServer(lambda request: fault) as server:
        backend = LlamaIndexLLMBackend(kit.openai_like(server))
        with pytest.raises(error) as caught:
            await backend.acomplete(ASK, GenerationSettings())
    assert caught.value.retryable is retryable
    if isinstance(caught.value, RateLimitError):
        assert caught.value.retry_after == pytest.approx(2.0)


async def test_a_slow_answer_times_out(kit):
    with ScriptedOpenAIServer(lambda request: Reply("[1] > [2]", delay=2.0)) as server:
        backend = LlamaIndexLLMBackend(kit.openai_like(server))
        with pytest.raises(BackendTimeoutError):
            await backend.acomplete(ASK, GenerationSettings(timeout=0.2))


async def test_an_unreachable_server_is_a_connection_error(kit):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model="m",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="t",
        is_chat_model=True,
        max_retries=0,
    )
    with pytest.raises(BackendConnectionError):
        await LlamaIndexLLMBackend(llm).acomplete(ASK, GenerationSettings())


def test_the_engine_retries_a_server_error_through_the_llm(kit):
    from permsc_integrations._calls.retry import RetryPolicy
    from permsc_integrations.testing import oracle_responder

    nodes = [NodeWithScore(node=TextNode(text=t), score=0.5) for t in reversed(kit.oracle_texts())]
    script = sequence(Fault.status(500), then=oracle_responder(kit.relevance))
    with ScriptedOpenAIServer(script) as server:
        rerank = PSCRerank(
            backend=kit.openai_like(server),
            num_permutations=3,
            max_concurrency=1,
            retry=RetryPolicy(initial_backoff=0.01, jitter=0.0),
        )
        out = rerank.postprocess_nodes(nodes, query_str=kit.QUERY)
        assert server.request_count == 4
    assert [n.node.get_content() for n in out] == kit.oracle_texts()
