"""A spec-string backend keeps first-token scoring inside PSCRerank: each call is an LLM event
of the reranker's callback manager, counted by TokenCountingHandler (real openai client,
loopback server)."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.postprocessor.permsc import PSCRerank
from llama_index.postprocessor.permsc.llm_backend import TracedBackend, traced

from permsc_integrations.backends.base import FirstTokenBackend, GenerationSettings
from permsc_integrations.errors import LogprobsUnavailableError
from permsc_integrations.testing import Reply, ScriptedOpenAIServer

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

    wrapped = traced(Plain(), CallbackManager)
    assert type(wrapped) is TracedBackend and not isinstance(wrapped, FirstTokenBackend)
