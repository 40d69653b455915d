"""First-token scoring in the LlamaIndex adapter: a spec-string backend keeps it, each call an
LLM event counted by TokenCountingHandler; an OpenAILike LLM scores from its logprobs (real
openai client and OpenAILike, loopback server)."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.permsc import LlamaIndexLLMBackend, PSCRerank
from llama_index.postprocessor.permsc.llm_backend import llm_event

from permsc_integrations.backends.base import FirstTokenBackend, GenerationSettings
from permsc_integrations.errors import ConfigurationError, LogprobsUnavailableError
from permsc_integrations.integration._base import TracedBackend, traced
from permsc_integrations.testing import Fault, Reply, ScriptedOpenAIServer, first_token_responder

pytestmark = pytest.mark.timeout(60)

MESSAGES = [{"role": "user", "content": "[A] a\n[B] bb\nWhich is best? Answer A or B."}]


@pytest.fixture
def logprobs_server() -> Any:
    with ScriptedOpenAIServer(lambda r: Reply.first_token({"B": 0.6, "A": 0.3, "x": 0.1})) as s:
        yield s


def backend(server: ScriptedOpenAIServer, counter: TokenCountingHandler) -> Any:
    rerank = PSCRerank(
        backend="openai:scripted",
        backend_options={"base_url": server.base_url},
        callback_manager=CallbackManager([counter]),
    )
    return rerank.core_ranker().backend


async def test_a_spec_string_backend_scores_first_tokens_as_counted_llm_events(
    logprobs_server,
) -> None:
    counter = TokenCountingHandler()
    scoring = backend(logprobs_server, counter)
    assert isinstance(scoring, FirstTokenBackend)
    scored = await scoring.afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    assert scored.probabilities == pytest.approx((1 / 3, 2 / 3))
    [event] = counter.llm_token_counts
    assert event.completion.endswith("B") and event.completion_token_count == 1
    assert event.prompt_token_count == scored.usage.prompt_tokens > 0


async def test_no_logprobs_is_raised_through_the_traced_backend(logprobs_server) -> None:
    logprobs_server.responder = lambda request: Reply("B")
    counter = TokenCountingHandler()
    with pytest.raises(LogprobsUnavailableError):
        await backend(logprobs_server, counter).afirst_token(
            MESSAGES, ["A", "B"], GenerationSettings()
        )
    [event] = counter.llm_token_counts  # the event ends with the error: no tokens counted
    assert event.total_token_count == 0


def test_a_backend_without_first_token_scoring_is_not_made_to_look_like_one() -> None:
    class Plain:
        name = "plain"

        async def acomplete(self, messages: Any, settings: Any) -> Any: ...

        async def aclose(self) -> None: ...

    wrapped = traced(Plain(), llm_event(CallbackManager))
    assert type(wrapped) is TracedBackend and not isinstance(wrapped, FirstTokenBackend)


async def test_an_openai_like_llm_scores_first_tokens_from_its_logprobs(kit, logprobs_server):
    logprobs_server.responder = lambda request: Reply.first_token({" B": 0.5, "B": 0.2, "A": 0.2})
    scoring = LlamaIndexLLMBackend(kit.openai_like(logprobs_server), top_logprobs=5)
    assert isinstance(scoring, FirstTokenBackend)
    scored = await scoring.afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    assert scored.probabilities == pytest.approx((2 / 9, 7 / 9)) and scored.mass == pytest.approx(
        0.9
    )
    assert scored.usage.completion_tokens == 1 and scored.usage.prompt_tokens > 0
    [request] = logprobs_server.requests
    assert request.body["logprobs"] is True and request.body["top_logprobs"] == 5
    assert (request.body["max_tokens"], request.body["temperature"]) == (1, 0.0)


async def test_an_llm_without_logprobs_raises_the_typed_error(kit, logprobs_server) -> None:
    logprobs_server.responder = lambda request: Reply("B")
    for llm in (kit.openai_like(logprobs_server), MockLLM()):
        with pytest.raises(LogprobsUnavailableError, match='scoring="generate"'):
            await LlamaIndexLLMBackend(llm).afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    with pytest.raises(ConfigurationError, match="top_logprobs"):
        LlamaIndexLLMBackend(MockLLM(), top_logprobs=0)


async def test_an_llm_whose_server_refuses_logprobs_raises_the_typed_error(kit, logprobs_server):
    logprobs_server.responder = lambda request: Fault.status(400, message="logprobs unsupported")
    backend = LlamaIndexLLMBackend(kit.openai_like(logprobs_server))
    with pytest.raises(LogprobsUnavailableError, match="top_logprobs=20") as caught:
        await backend.afirst_token(MESSAGES, ["A", "B"], GenerationSettings())
    assert caught.value.fatal and caught.value.status_code == 400




def test_first_token_scoring_through_the_postprocessor(kit: Any) -> None:
    counter = TokenCountingHandler()
    with ScriptedOpenAIServer(first_token_responder(kit.relevance)) as server:
        rerank = PSCRerank(
            backend="openai:scripted",
            backend_options={"base_url": server.base_url},
            scoring="first_token",
            num_permutations=3,
            top_n=3,
            callback_manager=CallbackManager([counter]),
        )
        given = [NodeWithScore(node=TextNode(text=t), score=0.0) for t, _ in kit.DOCS]
        out = rerank.postprocess_nodes(given, query_str=kit.QUERY)
        assert [n.node.get_content() for n in out] == kit.oracle_texts(3)
        assert server.request_count == 3
        assert all(r.body["logprobs"] and r.body["max_tokens"] == 1 for r in server.requests)
    assert len(counter.llm_token_counts) == 3 and counter.completion_llm_token_count == 3
