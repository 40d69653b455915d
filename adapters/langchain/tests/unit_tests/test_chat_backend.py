"""ChatModelBackend: a real ChatOpenAI against the scripted loopback server, errors mapped."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_openai import ChatOpenAI
from langchain_permsc import ChatModelBackend, PSCReranker

from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    ConfigurationError,
    ContextLengthError,
    RateLimitError,
)
from permsc_integrations.testing import Fault, ScriptedOpenAIServer, oracle_responder, sequence

MESSAGES = [{"role": "system", "content": "rank"}, {"role": "user", "content": "[1] a\n[2] bb"}]


def chat(base_url: str) -> ChatOpenAI:
    return ChatOpenAI(model="scripted", base_url=base_url, api_key="test", max_retries=0)


async def test_completion_text_usage_and_messages(server: ScriptedOpenAIServer) -> None:
    server.responder = lambda request: "[2] > [1]"
    backend = ChatModelBackend(chat(server.base_url))
    completion = await backend.acomplete(MESSAGES, GenerationSettings())
    assert completion.text == "[2] > [1]" and completion.model == "scripted"
    # the scripted server counts whitespace-separated words as tokens
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 3)
    assert completion.usage.calls == 1 and completion.finish_reason == "stop"
    [request] = server.requests
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert backend.name == "langchain:scripted"


@pytest.mark.parametrize(
    ("fault", "error", "retryable"),
    [
        (Fault.status(429, retry_after=0.5), RateLimitError, True),
        (Fault.context_length(), ContextLengthError, False),
        (Fault.status(503), BackendError, True),
        (Fault.status(401), AuthenticationError, False),
    ],
)
async def test_http_errors_become_typed_errors(
    server: ScriptedOpenAIServer, fault: Fault, error: type[BackendError], retryable: bool
) -> None:
    server.responder = lambda request: fault
    with pytest.raises(error) as caught:
        await ChatModelBackend(chat(server.base_url)).acomplete(MESSAGES, GenerationSettings())
    assert caught.value.retryable is retryable and caught.value.status_code == fault.status_code
    if fault.headers:
        assert caught.value.retry_after == 0.5


async def test_unreachable_server_is_a_connection_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = ChatModelBackend(chat(f"http://127.0.0.1:{port}/v1"))
    with pytest.raises(BackendConnectionError, match="reachable"):
        await backend.acomplete(MESSAGES, GenerationSettings())


async def test_engine_retries_a_rate_limited_chat_call(
    corpus: Any, server: ScriptedOpenAIServer
) -> None:
    server.responder = sequence(
        Fault.status(429, retry_after=0.01), then=oracle_responder(corpus.relevance)
    )
    retry = RetryPolicy(initial_backoff=0.01, jitter=0.0)
    reranker = PSCReranker(
        backend=chat(server.base_url), num_permutations=3, retry=retry, top_n=None
    )
    ends: list[dict[str, Any]] = []

    class SampleEnds(BaseCallbackHandler):
        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            if name == "psc_sample_end":
                ends.append(dict(data))

    request = {"query": "q", "documents": corpus.documents()}
    docs = await reranker.ainvoke(request, {"callbacks": [SampleEnds()]})
    assert [d.page_content for d in docs] == corpus.expected_order(corpus.texts)
    assert server.request_count == 3 + 1
    assert all(d.metadata["psc"]["failed"] == 0 for d in docs)
    # the retried sample says so in its event: two calls sent, one of them a retry
    counted = sorted((e["attempts"], e["retries"]) for e in ends)
    assert counted == [(1, 0), (1, 0), (2, 1)]


def test_rejects_what_is_not_a_chat_model() -> None:
    with pytest.raises(ConfigurationError, match="BaseChatModel"):
        ChatModelBackend("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="spec-string backend only"):
        PSCReranker(backend=chat("http://127.0.0.1:9/v1"), backend_options={"base_url": "x"})
    with pytest.raises(ConfigurationError, match="did you mean 'backend' or 'backend_options'"):
        PSCReranker(backend="openai:m", backend_kwargs={"base_url": "http://127.0.0.1:9/v1"})
