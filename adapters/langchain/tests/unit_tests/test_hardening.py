"""What real LangChain apps meet: one reranker shared by threads and event loops, typos in
options, options changed after use, streaming chains, usage, wrapped models, templates,
copies and secrets (the real ChatOpenAI and openai client against the loopback server)."""

from __future__ import annotations

import asyncio
import copy
import pickle
import threading
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, get_usage_metadata_callback
from langchain_core.load import dumps
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI
from langchain_permsc import PSCReranker

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import Reply, ScriptedOpenAIServer, oracle_responder

pytestmark = pytest.mark.timeout(60)


def chat(server: ScriptedOpenAIServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="scripted", base_url=server.base_url, api_key="k", max_retries=0, **kwargs
    )


def spec(server: ScriptedOpenAIServer, **options: Any) -> PSCReranker:
    return PSCReranker(
        backend="openai:scripted", backend_options={"base_url": server.base_url}, **options
    )


def test_one_reranker_from_threads_and_event_loops_keeps_its_cap(corpus, server) -> None:
    server.responder = lambda r: Reply(oracle_responder(corpus.relevance)(r).text, delay=0.02)
    reranker = spec(server, num_permutations=8, max_concurrency=2, top_n=None)
    done: list[list[str]] = []

    def sync_call() -> None:
        done.append([d.page_content for d in reranker.compress_documents(corpus.documents(), "q")])

    def async_call() -> None:
        docs = asyncio.run(reranker.acompress_documents(corpus.documents(), "q"))
        done.append([d.page_content for d in docs])

    threads = [threading.Thread(target=f) for f in (sync_call, async_call) * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(45)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert done == [corpus.expected_order(corpus.texts)] * 6
    assert server.max_in_flight == 2 and server.request_count == 6 * 8
    reranker.close()


class SampleEnds(BaseCallbackHandler):
    """The ``psc_sample_end`` events' data."""

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "psc_sample_end":
            self.data.append(dict(data))


def test_a_chat_model_used_from_several_event_loops_sends_each_request_once(corpus, server):
    """Sync calls run on the bridge's loop, async ones on the app's, and each ``asyncio.run``
    is a new loop; the model's async client belongs to the first. Reused from another loop, a
    pooled connection sends the request, then fails to read the answer ("Event loop is
    closed") and the retry sends it again (issue 26: 12 extra requests in 8 reranks)."""
    reranker = PSCReranker(backend=chat(server), num_permutations=3, top_n=None)
    ends = SampleEnds()
    config: Any = {"callbacks": [ends]}
    request = {"query": "q", "documents": corpus.documents()}
    sent: list[int] = []
    ranked: list[list[str]] = []

    async def counted(call: Any) -> None:
        before = server.request_count
        docs = await call()
        sent.append(server.request_count - before)
        ranked.append([d.page_content for d in docs])
        assert all(d.metadata["psc"]["usage"]["retries"] == 0 for d in docs)

    async def app() -> None:  # one long-lived loop: async and sync endpoints alternate
        for _ in range(3):
            await counted(lambda: reranker.ainvoke(request, config))
            await counted(lambda: asyncio.to_thread(reranker.invoke, request, config))

    asyncio.run(app())
    for _ in range(2):  # a script calling asyncio.run again and again
        asyncio.run(counted(lambda: reranker.ainvoke(request, config)))
    assert sent == [3] * 8
    assert ranked == [corpus.expected_order(corpus.texts)] * 8
    assert [(e["attempts"], e["retries"]) for e in ends.data] == [(1, 0)] * 24


def test_unknown_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        PSCReranker(backend="openai:m", num_permutation=5)
    with pytest.raises(ConfigurationError, match="top_n"):
        PSCReranker(backend="openai:m", top_n=0)


def test_options_set_after_use_are_validated_and_used(corpus, server) -> None:
    reranker = spec(server, num_permutations=4)
    reranker.compress_documents(corpus.documents(), "q")
    assert server.request_count == 4
    reranker.num_permutations = 2
    reranker.compress_documents(corpus.documents(), "q")
    assert server.request_count == 4 + 2
    with pytest.raises(ConfigurationError, match="num_permutations"):
        reranker.num_permutations = 0
    assert reranker.num_permutations == 2


async def test_astream_events_show_no_ranking_tokens_and_tag_the_calls(corpus, server) -> None:
    """A chain streamed with astream_events: the ranking calls do not stream (the scripted
    server cannot), show no tokens in the app's feed, and carry the tag 'permsc'."""
    reranker = PSCReranker(backend=chat(server), num_permutations=3, top_n=2)
    chain = RunnableLambda(lambda q: {"query": q, "documents": corpus.documents()}) | reranker
    events = [e async for e in chain.astream_events("q", version="v2")]
    kinds = [e["event"] for e in events]
    assert "on_chat_model_stream" not in kinds
    starts = [e for e in events if e["event"] == "on_chat_model_start"]
    assert len(starts) == 3 and all("permsc" in e["tags"] for e in starts)
    assert all(not r.body.get("stream") for r in server.requests)
    [end] = [e for e in events if e["event"] == "on_chain_end" and e["name"] == "PSCReranker"]
    assert [d.page_content for d in end["data"]["output"]] == corpus.expected_order(corpus.texts)[
        :2
    ]


def test_usage_in_metadata_and_in_langchain_usage_callbacks(corpus, server) -> None:
    reranker = spec(server, num_permutations=3, top_n=2)
    with get_usage_metadata_callback() as usage:
        docs = reranker.compress_documents(corpus.documents(), "q")
    psc = docs[0].metadata["psc"]
    assert psc["usage"]["calls"] == 3 and psc["usage"]["prompt_tokens"] > 0
    assert 0 <= psc["confidence"] <= 1
    [(model, counted)] = usage.usage_metadata.items()
    assert counted["input_tokens"] == psc["usage"]["prompt_tokens"]
    assert counted["output_tokens"] == psc["usage"]["completion_tokens"]


@pytest.mark.parametrize(
    "wrap",
    [
        lambda m: m.bind(temperature=0.0),
        lambda m: m.with_config(tags=["mine"]),
        lambda m: m.with_retry(stop_after_attempt=2),
        lambda m: m.with_fallbacks([m]),
    ],
    ids=["bind", "with_config", "with_retry", "with_fallbacks"],
)
def test_runnable_wrapped_chat_models_rank(corpus, server, wrap) -> None:
    reranker = PSCReranker(backend=wrap(chat(server)), num_permutations=2, top_n=3)
    docs = reranker.compress_documents(corpus.documents(), "q")
    assert [d.page_content for d in docs] == corpus.expected_order(corpus.texts)[:3]


def test_prompt_templates_are_accepted(corpus, server) -> None:
    plain = PromptTemplate.from_template(
        "Question: {query}\n{items}\nAnswer with ids like [2] > [1]."
    )
    with_system = ChatPromptTemplate.from_messages(
        [("system", "You rank passages."), ("human", "{query}\n{items}\nRank the {num}.")]
    )
    for template in (plain, with_system):
        reranker = spec(server, num_permutations=1, include_identity=True, prompt=template)
        reranker.compress_documents(corpus.documents(), "goldfish?")
    first, second = server.requests
    assert first.messages[0]["content"].startswith("Question: goldfish?\n[1] ")
    assert [m["role"] for m in second.messages] == ["system", "user"]
    with pytest.raises(ConfigurationError, match="tone"):
        spec(server, prompt=PromptTemplate.from_template("{items} {tone}"))


def test_copies_of_a_used_reranker_work_and_metadata_is_copied(corpus, server) -> None:
    reranker = spec(server, num_permutations=2, top_n=None)
    source = corpus.documents()
    source[0].metadata["nested"] = {"tags": ["a"]}
    docs = reranker.compress_documents(source, "q")
    for clone in (copy.deepcopy(reranker), pickle.loads(pickle.dumps(reranker))):
        again = clone.compress_documents(corpus.documents(), "q")
        assert [d.page_content for d in again] == [d.page_content for d in docs]
    [mine] = [d for d in docs if d.id == "id-0"]
    mine.metadata["nested"]["tags"].append("b")
    assert source[0].metadata["nested"] == {"tags": ["a"]}


def test_secrets_never_show(server) -> None:
    url = f"http://admin:hunter2@127.0.0.1:{server.port}/v1"
    reranker = PSCReranker(
        backend="openai:m", backend_options={"base_url": url, "api_key": "sk-live-secret"}
    )
    texts = [repr(reranker), str(reranker.model_dump()), dumps(reranker), str(reranker.to_json())]
    assert not [t for t in texts if "hunter2" in t or "sk-live-secret" in t]
