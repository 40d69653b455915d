"""PSCRerank inside a real LlamaIndex query engine, ranking through the scripted server.

The ranking model is reached two ways: a real LlamaIndex ``OpenAILike`` LLM pointed at the
server, and the core ``openai:`` backend with ``base_url``.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload, LlamaDebugHandler
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.postprocessor.permsc import PSCRerank

from permsc_integrations.results import scores_from_order

M = 4
TOP_N = 3


def _rerank(kit: Any, server: Any, via: str) -> PSCRerank:
    if via == "llm":
        return PSCRerank(backend=kit.openai_like(server), top_n=TOP_N, num_permutations=M)
    return PSCRerank(
        backend="openai:scripted-ranker",
        backend_options={"base_url": server.base_url, "api_key": "test"},
        top_n=TOP_N,
        num_permutations=M,
    )


def _engine(index: VectorStoreIndex, rerank: PSCRerank, debug: LlamaDebugHandler, n: int) -> Any:
    return RetrieverQueryEngine.from_args(
        index.as_retriever(similarity_top_k=n),
        llm=MockLLM(),
        node_postprocessors=[rerank],
        callback_manager=CallbackManager([debug]),
    )


def _check(kit: Any, response: Any, retrieved: list[Any], server: Any, before: int) -> None:
    texts = [n.node.get_content() for n in response.source_nodes]
    assert texts == kit.oracle_texts(TOP_N)
    # All n nodes are ranked; the top TOP_N keep the consensus scores (n - rank) / n.
    expected = list(scores_from_order(range(len(kit.DOCS))))[:TOP_N]
    assert [n.score for n in response.source_nodes] == pytest.approx(expected)
    retriever_scores = {n.node.node_id: n.score for n in retrieved}
    assert len(set(retriever_scores.values())) == 1  # MockEmbedding: every node ties
    assert [n.score for n in response.source_nodes] != [
        retriever_scores[n.node.node_id] for n in response.source_nodes
    ]
    assert server.request_count - before == M  # one window of 5 passages, m calls


def _check_events(kit: Any, events: Any, debug: LlamaDebugHandler, model_name: str) -> None:
    (start,) = events.named("ReRankStartEvent")
    (end,) = events.named("ReRankEndEvent")
    assert start.query.query_str == kit.QUERY
    assert start.top_n == TOP_N and start.model_name == model_name
    assert len(start.nodes) == len(kit.DOCS)
    assert [n.node.get_content() for n in end.nodes] == kit.oracle_texts(TOP_N)
    ((cb_start, cb_end),) = debug.get_event_pairs(CBEventType.RERANKING)
    assert cb_start.payload[EventPayload.QUERY_STR] == kit.QUERY
    assert cb_start.payload[EventPayload.TOP_K] == TOP_N
    assert cb_start.payload[EventPayload.MODEL_NAME] == model_name
    assert len(cb_start.payload[EventPayload.NODES]) == len(kit.DOCS)
    ended = cb_end.payload[EventPayload.NODES]
    assert [n.node.get_content() for n in ended] == kit.oracle_texts(TOP_N)


@pytest.mark.parametrize("via", ["llm", "core"])
def test_sync_query_reranks_by_psc(kit, server, index, events, via):
    rerank = _rerank(kit, server, via)
    debug = LlamaDebugHandler()
    retrieved = index.as_retriever(similarity_top_k=len(kit.DOCS)).retrieve(kit.QUERY)
    before = server.request_count
    response = _engine(index, rerank, debug, len(kit.DOCS)).query(kit.QUERY)
    _check(kit, response, retrieved, server, before)
    _check_events(kit, events, debug, rerank.model_name)
    rerank.close()


@pytest.mark.parametrize("via", ["llm", "core"])
async def test_async_query_reranks_in_a_dispatcher_span(kit, server, index, events, spans, via):
    rerank = _rerank(kit, server, via)
    debug = LlamaDebugHandler()
    retrieved = await index.as_retriever(similarity_top_k=len(kit.DOCS)).aretrieve(kit.QUERY)
    before = server.request_count
    response = await _engine(index, rerank, debug, len(kit.DOCS)).aquery(kit.QUERY)
    _check(kit, response, retrieved, server, before)
    _check_events(kit, events, debug, rerank.model_name)
    # Native async: the rerank events fire inside PSCRerank._apostprocess_nodes's span.
    (start,) = events.named("ReRankStartEvent")
    assert start.span_id.startswith("PSCRerank._apostprocess_nodes")
    assert any(s.id_.startswith("PSCRerank._apostprocess_nodes") for s in spans.completed_spans)
    await rerank.aclose()


def test_model_name_names_the_backend(kit, server):
    assert _rerank(kit, server, "llm").model_name == "llama_index:scripted-ranker"
    core = _rerank(kit, server, "core")
    assert "scripted-ranker" in core.model_name
    core.close()


def test_a_failed_rerank_raises_typed_and_ends_the_callback_event(kit, index, events):
    from permsc_integrations.errors import InsufficientSamplesError
    from permsc_integrations.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer(lambda request: "I cannot rank these.") as server:
        rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=2)
        debug = LlamaDebugHandler()
        with pytest.raises(InsufficientSamplesError, match="only 0 permuted samples"):
            _engine(index, rerank, debug, len(kit.DOCS)).query(kit.QUERY)
    ((_, cb_end),) = debug.get_event_pairs(CBEventType.RERANKING)
    assert isinstance(cb_end.payload[EventPayload.EXCEPTION], InsufficientSamplesError)
    assert len(events.named("ReRankStartEvent")) == 1
    assert events.named("ReRankEndEvent") == []
