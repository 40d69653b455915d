"""First-token scoring in the LangChain adapter: a spec-string backend keeps it, each call a
traced chat-model run with the label probabilities and usage; a ChatOpenAI model scores from
its logprobs (real openai client and ChatOpenAI, loopback server)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, get_usage_metadata_callback
from langchain_core.language_models import FakeListChatModel
from langchain_openai import ChatOpenAI
from langchain_permsc import ChatModelBackend, PSCReranker
from langchain_permsc.chat_backend import chat_model_run, run_config

from permsc_integrations.backends.base import FirstTokenBackend, GenerationSettings
from permsc_integrations.errors import ConfigurationError, LogprobsUnavailableError
from permsc_integrations.integration._base import TracedBackend, traced
from permsc_integrations.testing import Fault, Reply, ScriptedOpenAIServer, first_token_responder

pytestmark = pytest.mark.timeout(60)

MESSAGES = [{"role": "user", "content": "[A] a\n[B] bb\nWhich is best? Answer A or B."}]


class Runs(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.started: list[list[Any]] = []
        self.ended: list[Any] = []
        self.failed: list[BaseException] = []

    async def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.started.append(messages)

    async def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        self.ended.append(response.generations[0][0].message)

    async def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self.failed.append(error)


def backend(server: ScriptedOpenAIServer) -> Any:
    settings = PSCReranker(backend="openai:scripted", backend_options={"base_url": server.base_url})
    return settings.core_ranker().backend


async def test_a_spec_string_backend_scores_first_tokens_as_traced_runs(server) -> None:
    server.responder = lambda request: Reply.first_token({"B": 0.7, "A": 0.2, "x": 0.1})
    scoring = backend(server)
    assert isinstance(scoring, FirstTokenBackend)
    runs = Runs()
    with run_config({"callbacks": [runs]}):
        scored = await scoring.afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    assert scored.probabilities == pytest.approx((2 / 9, 7 / 9))
    assert len(runs.started) == 1 and runs.failed == []
    [message] = runs.ended
    assert message.content == "B"
    assert message.response_metadata["label_probabilities"] == pytest.approx(
        {"A": 2 / 9, "B": 7 / 9}
    )
    assert message.usage_metadata["output_tokens"] == 1 == scored.usage.completion_tokens
    assert message.usage_metadata["input_tokens"] == scored.usage.prompt_tokens > 0


async def test_a_failed_first_token_call_ends_its_run_with_the_error(server) -> None:
    server.responder = lambda request: Reply("A")  # no logprobs
    runs = Runs()
    with run_config({"callbacks": [runs]}), pytest.raises(LogprobsUnavailableError):
        await backend(server).afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    assert len(runs.started) == 1 and isinstance(runs.failed[0], LogprobsUnavailableError)


def test_a_backend_without_first_token_scoring_is_not_made_to_look_like_one() -> None:
    class Plain:
        name = "plain"

        async def acomplete(self, messages: Any, settings: Any) -> Any: ...

        async def aclose(self) -> None: ...

    wrapped = traced(Plain(), chat_model_run)
    assert type(wrapped) is TracedBackend and not isinstance(wrapped, FirstTokenBackend)


async def test_a_chat_openai_model_scores_first_tokens_from_its_logprobs(server) -> None:
    server.responder = lambda request: Reply.first_token({" B": 0.5, "B": 0.2, "A": 0.2})
    model = ChatOpenAI(model="scripted", base_url=server.base_url, api_key="k", max_retries=0)
    for wrapped in (model, model.bind(stop=["\n"]).with_retry(stop_after_attempt=1)):
        server.reset()
        scoring = ChatModelBackend(wrapped, top_logprobs=5)
        scored = await scoring.afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
        assert scored.probabilities == pytest.approx((2 / 9, 7 / 9))
        assert scored.mass == pytest.approx(0.9) and scored.model == "scripted"
        assert scored.usage.completion_tokens == 1 and scored.usage.prompt_tokens > 0
        [request] = server.requests
        assert request.body["logprobs"] is True and request.body["top_logprobs"] == 5
        assert request.body["temperature"] == 0.0
        assert 1 in (request.body.get("max_tokens"), request.body.get("max_completion_tokens"))


async def test_a_chat_model_without_logprobs_raises_the_typed_error(server) -> None:
    server.responder = lambda request: Reply("B")
    model = ChatOpenAI(model="scripted", base_url=server.base_url, api_key="k", max_retries=0)
    for scoring in (ChatModelBackend(model), ChatModelBackend(FakeListChatModel(responses=["A"]))):
        with pytest.raises(LogprobsUnavailableError, match='scoring="generate"'):
            await scoring.afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    with pytest.raises(ConfigurationError, match="top_logprobs"):
        ChatModelBackend(model, top_logprobs=0)


async def test_a_chat_model_whose_server_refuses_logprobs_raises_the_typed_error(server) -> None:
    server.responder = lambda request: Fault.status(400, message="logprobs is not supported")
    model = ChatOpenAI(model="scripted", base_url=server.base_url, api_key="k", max_retries=0)
    with pytest.raises(LogprobsUnavailableError, match="top_logprobs=20") as caught:
        await ChatModelBackend(model).afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    assert caught.value.fatal and caught.value.status_code == 400



def test_first_token_scoring_through_the_reranker(corpus, server) -> None:
    server.responder = first_token_responder(corpus.relevance)
    reranker = PSCReranker(
        backend="openai:scripted",
        backend_options={"base_url": server.base_url},
        scoring="first_token",
        num_permutations=3,
        top_n=3,
    )
    with get_usage_metadata_callback() as usage:
        docs = reranker.compress_documents(corpus.documents(), "q")
    assert [d.page_content for d in docs] == corpus.expected_order(corpus.texts)[:3]
    psc = docs[0].metadata["psc"]
    assert psc["usage"]["calls"] == 3 == server.request_count
    assert psc["usage"]["completion_tokens"] == 3
    [(_, counted)] = usage.usage_metadata.items()
    assert counted["output_tokens"] == 3
    assert all(r.body["logprobs"] and r.body["max_tokens"] == 1 for r in server.requests)
