"""PSCReranker in real LangChain pipelines, answering through a real loopback OpenAI server."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_openai import ChatOpenAI
from langchain_permsc import PSCReranker

from permsc_integrations.backends import resolve_backend
from permsc_integrations.errors import ConfigurationError, InsufficientSamplesError
from permsc_integrations.testing import Fault, ScriptedOpenAIServer, oracle_responder, sequence

M = 4


def core_reranker(server: ScriptedOpenAIServer, **options: Any) -> PSCReranker:
    """PSC through the core "openai:" backend pointed at the scripted server."""
    kwargs = {"base_url": server.base_url, "api_key": "test"}
    return PSCReranker(
        backend="openai:scripted", backend_options=kwargs, num_permutations=M, **options
    )


def chat_reranker(server: ScriptedOpenAIServer, **options: Any) -> PSCReranker:
    """PSC through a real LangChain chat model class pointed at the scripted server."""
    model = ChatOpenAI(model="scripted", base_url=server.base_url, api_key="test", max_retries=0)
    return PSCReranker(backend=model, num_permutations=M, **options)


MAKERS = [
    pytest.param(core_reranker, id="core-openai"),
    pytest.param(chat_reranker, id="chat-model"),
]


def check_ranked(corpus: Any, docs: list[Document], n: int) -> None:
    texts = [d.page_content for d in docs]
    assert texts == corpus.expected_order(corpus.texts)[:n]
    assert [d.metadata["relevance_score"] for d in docs] == [(8 - r) / 8 for r in range(n)]
    assert [d.metadata["psc"]["rank"] for d in docs] == list(range(1, n + 1))
    assert all(d.metadata["psc"]["samples"] == M and d.metadata["psc"]["failed"] == 0 for d in docs)
    assert all(d.metadata["psc"]["confidence"] == pytest.approx(1.0) for d in docs)
    assert all(d.id == f"id-{corpus.texts.index(d.page_content)}" for d in docs)  # ids kept
    assert all(d.metadata["source"] == f"s{corpus.texts.index(d.page_content)}" for d in docs)


@pytest.mark.parametrize("make", MAKERS)
def test_compression_retriever_sync(
    corpus: Any, make: Any, server: ScriptedOpenAIServer, vector_retriever: Any
) -> None:
    pipeline = ContextualCompressionRetriever(
        base_compressor=make(server, top_n=3), base_retriever=vector_retriever
    )
    check_ranked(corpus, pipeline.invoke("which topic?"), 3)
    assert server.request_count == M  # one window of 8: m calls
    assert {len(r.messages) for r in server.requests} == {len(server.requests[0].messages)}


@pytest.mark.parametrize("make", MAKERS)
async def test_compression_retriever_async(
    corpus: Any, make: Any, server: ScriptedOpenAIServer, vector_retriever: Any
) -> None:
    pipeline = ContextualCompressionRetriever(
        base_compressor=make(server, top_n=None), base_retriever=vector_retriever
    )
    check_ranked(corpus, await pipeline.ainvoke("which topic?"), 8)
    assert server.request_count == M


@pytest.mark.parametrize("make", MAKERS)
async def test_input_documents_unchanged(
    corpus: Any, make: Any, server: ScriptedOpenAIServer
) -> None:
    docs = corpus.documents()
    before = copy.deepcopy(docs)
    reranker = make(server, top_n=None)
    out = list(await reranker.acompress_documents(docs, "q")) + list(
        reranker.compress_documents(docs, "q")
    )
    assert docs == before and all("relevance_score" not in d.metadata for d in docs)
    assert all(not any(o is d or o.metadata is d.metadata for d in docs) for o in out)


async def test_abatch_honours_max_concurrency(corpus: Any, server: ScriptedOpenAIServer) -> None:
    server.responder = oracle_responder(corpus.relevance, delay=0.2)
    reranker = core_reranker(server, top_n=2)
    inputs = [{"query": f"q{i}", "documents": corpus.documents()} for i in range(3)]
    one_at_a_time = await reranker.abatch(inputs, {"max_concurrency": 1})
    serial_peak = server.max_in_flight
    server.reset()
    all_at_once = await reranker.abatch(inputs, {"max_concurrency": 3})
    assert one_at_a_time == all_at_once and len(all_at_once) == 3
    assert serial_peak <= M < server.max_in_flight <= 3 * M
    assert server.request_count == 3 * M


def test_batch_sync_and_call_cap(corpus: Any, server: ScriptedOpenAIServer) -> None:
    server.responder = oracle_responder(corpus.relevance, delay=0.02)
    reranker = core_reranker(server, top_n=1, max_concurrency=2)  # at most 2 LLM calls in flight
    results = reranker.batch(
        [{"query": f"q{i}", "documents": corpus.documents()} for i in range(3)]
    )
    assert [r[0].page_content for r in results] == [corpus.expected_order(corpus.texts)[0]] * 3
    assert server.max_in_flight <= 2 and server.request_count == 3 * M


def test_with_retry_reruns_a_failed_ranking(corpus: Any, server: ScriptedOpenAIServer) -> None:
    # every sample of the first attempt gets a non-retryable 400: the ranking fails as a whole
    server.responder = sequence(*[Fault.status(400)] * M, then=oracle_responder(corpus.relevance))
    reranker = core_reranker(server, top_n=2)
    with pytest.raises(InsufficientSamplesError):
        reranker.invoke({"query": "q", "documents": corpus.documents()})
    server.reset()
    server.responder = sequence(*[Fault.status(400)] * M, then=oracle_responder(corpus.relevance))
    retrying = reranker.with_retry(
        retry_if_exception_type=(InsufficientSamplesError,), stop_after_attempt=2
    )
    check_ranked(corpus, retrying.invoke({"query": "q", "documents": corpus.documents()}), 2)
    assert server.request_count == 2 * M


class Recorder(BaseCallbackHandler):
    """Records chain runs, chat-model runs (with their parent) and custom events."""

    def __init__(self) -> None:
        self.chains: dict[Any, dict[str, Any]] = {}
        self.llm_parents: list[Any] = []
        self.events: list[tuple[str, Any]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.chains[run_id] = {"name": kwargs.get("name"), "tags": kwargs.get("tags")}

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        **kwargs: Any,
    ) -> None:
        self.llm_parents.append(parent_run_id)

    def on_custom_event(self, name: str, data: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.events.append((name, run_id))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_callbacks_see_child_llm_runs_and_events(
    corpus: Any, server: ScriptedOpenAIServer, asynchronous: bool
) -> None:
    recorder = Recorder()
    reranker = chat_reranker(server, top_n=2).with_config(run_name="psc", tags=["rerank"])
    config: Any = {"callbacks": [recorder]}
    request = {"query": "q", "documents": corpus.documents()}
    docs = (
        await reranker.ainvoke(request, config)
        if asynchronous
        else reranker.invoke(request, config)
    )
    check_ranked(corpus, docs, 2)
    [(run_id, run)] = [(k, v) for k, v in recorder.chains.items() if v["name"] == "psc"]
    assert "rerank" in run["tags"]
    assert recorder.llm_parents == [run_id] * M  # every LLM call is a child of the rerank run
    names = [name for name, _ in recorder.events]
    assert names.count("psc_sample_end") == M and names.count("psc_window_end") == 1
    assert {rid for _, rid in recorder.events} == {run_id}


async def test_astream_events_show_progress(corpus: Any, server: ScriptedOpenAIServer) -> None:
    # 8 docs, window 4: M shuffles in 2 blocks of 4, then the head window (blocks, the default)
    reranker = core_reranker(server, top_n=2, window_size=4, step=2)
    events = [
        e
        async for e in reranker.astream_events(
            {"query": "q", "documents": corpus.documents()}, version="v2"
        )
    ]
    custom = [e for e in events if e["event"] == "on_custom_event"]
    windows = [e["data"] for e in custom if e["name"] == "psc_window_end"]
    assert len(windows) == 2 and all(w["failed"] == 0 for w in windows)
    samples = [e["data"] for e in custom if e["name"] == "psc_sample_end"]
    assert len(samples) == 2 * M + M and {s["status"] for s in samples} == {"ok"}
    [end] = [e for e in events if e["event"] == "on_chain_end"]
    assert [d.page_content for d in end["data"]["output"]] == corpus.expected_order(corpus.texts)[
        :2
    ]


def test_backend_object_and_empty_input(corpus: Any, server: ScriptedOpenAIServer) -> None:
    backend = resolve_backend("openai:scripted", base_url=server.base_url, api_key="test")
    reranker = PSCReranker(backend=backend, num_permutations=M, top_n=None)
    assert reranker.compress_documents([], "q") == []
    check_ranked(corpus, list(reranker.compress_documents(corpus.documents(), "q")), 8)
    assert server.request_count == M


def test_bad_configuration_and_input_raise_typed_errors() -> None:
    with pytest.raises(ConfigurationError, match="window"):
        PSCReranker(backend="openai:x", window_size=0)
    with pytest.raises(ConfigurationError, match="backend must be"):
        PSCReranker(backend=42)
    reranker = PSCReranker(backend="openai:x")
    with pytest.raises(ConfigurationError, match="documents"):
        reranker.invoke({"query": "q"})
    with pytest.raises(ConfigurationError, match="top_n"):
        reranker.invoke({"query": "q", "documents": [], "top_n": 0})


def test_metadata_carries_the_chance_of_the_top_k_and_what_the_budget_did(
    corpus: Any, server: ScriptedOpenAIServer
) -> None:
    docs = core_reranker(server, top_n=None, max_calls=3).compress_documents(
        corpus.documents(), "which topic?"
    )
    psc = [d.metadata["psc"] for d in docs]
    assert server.request_count == psc[0]["usage"]["calls"] == 3  # min(m, max_calls) shuffles
    assert all(p["head"] == 8 and p["stopped"] == "budget" for p in psc)  # 3 of m shuffles
    chances = [p["top_probability"] for p in psc]  # top_k: 10 under max_calls, all 8 here
    assert all(0.0 <= c <= 1.0 for c in chances) and sum(chances) == pytest.approx(8.0)
    three = core_reranker(server, top_n=3).compress_documents(corpus.documents(), "which topic?")
    assert [d.metadata["psc"]["top_probability"] for d in three][0] > 0.5  # top_k = top_n = 3
    plain = core_reranker(server, top_n=None).compress_documents(corpus.documents(), "topic?")
    assert "top_probability" not in plain[0].metadata["psc"]  # no k, no chance of the top k
