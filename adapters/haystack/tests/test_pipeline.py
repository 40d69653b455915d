"""A real Haystack Pipeline (InMemoryDocumentStore -> InMemoryBM25Retriever -> PSCRanker) with
Haystack's OpenAIChatGenerator as the ranking model, against the scripted loopback server:
``run`` and ``run_async``, the calls that reach the server, and the core's ranking."""

from __future__ import annotations

import pytest
from haystack import Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack_integrations.components.rankers.permsc import PSCRanker

from permsc_integrations import PSCRanker as CoreRanker
from permsc_integrations.testing import ScriptedOpenAIServer, noisy_responder


def pipeline(kit, ranker):
    store = InMemoryDocumentStore()
    store.write_documents(kit.documents())
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
    pipe.add_component("ranker", ranker)
    pipe.connect("retriever.documents", "ranker.documents")
    return pipe


def inputs(kit):
    return {"retriever": {"query": kit.QUERY}, "ranker": {"query": kit.QUERY}}


def check_ranked(kit, documents, top_k):
    assert [d.content for d in documents] == kit.oracle_texts(top_k)
    by_id = {d.id: d for d in kit.documents()}
    for rank, doc in enumerate(documents, start=1):
        original = by_id[doc.id]  # ids, content and meta kept; PSC's extras under "psc"
        assert doc.content == original.content and doc.meta["n"] == original.meta["n"]
        assert doc.score == pytest.approx((5 - rank + 1) / 5)
        psc = doc.meta["psc"]
        assert psc["rank"] == rank and psc["samples"] == 4 and psc["failed"] == 0
        assert psc["stopped"] == "complete" and psc["head"] == 5
        assert psc["usage"]["calls"] == 4 and psc["usage"]["prompt_tokens"] > 0
        assert psc["confidence"] == pytest.approx(1.0)


def test_pipeline_run_ranks_with_the_chat_generator(kit, server):
    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=4, top_k=3)
    before = server.request_count
    out = pipeline(kit, ranker).run(inputs(kit))
    assert server.request_count - before == 4  # m calls for a fixed plan, all on the server
    check_ranked(kit, out["ranker"]["documents"], 3)
    assert all(r.model == "scripted-ranker" for r in server.requests[before:])


async def test_pipeline_run_async_ranks_natively(kit, server):
    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=4)
    before = server.request_count
    out = await pipeline(kit, ranker).run_async(inputs(kit))
    assert server.request_count - before == 4
    check_ranked(kit, out["ranker"]["documents"], None)
    assert ranker._model._home.is_home()  # the generator's async client ran on this loop


async def test_sync_then_async_use_one_generator_without_resending(kit, server):
    """The generator's async client belongs to the first loop (here: the sync bridge's); a
    later run_async on another loop calls its sync client in a thread: no request twice."""
    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=4, top_k=2)
    before = server.request_count
    first = ranker.run(query=kit.QUERY, documents=kit.documents())["documents"]
    second = (await ranker.run_async(query=kit.QUERY, documents=kit.documents()))["documents"]
    assert server.request_count - before == 8
    assert [d.id for d in first] == [d.id for d in second]


def test_max_calls_caps_what_reaches_the_server(kit, server):
    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=20, max_calls=6)
    before = server.request_count
    documents = ranker.run(query=kit.QUERY, documents=kit.documents())["documents"]
    sent = server.request_count - before
    assert 1 <= sent <= 6
    psc = documents[0].meta["psc"]
    assert psc["usage"]["calls"] == sent and psc["stopped"] in ("budget", "certified", "complete")
    assert documents[0].content == kit.oracle_texts(1)[0]
    assert all(
        p is None or 0.0 <= p <= 1.0
        for p in [d.meta["psc"].get("top_probability") for d in documents]
    )


def test_run_time_top_k_cuts_the_list(kit, server):
    ranker = PSCRanker(chat_generator=kit.generator(server), num_permutations=2)
    documents = ranker.run(query=kit.QUERY, documents=kit.documents(), top_k=2)["documents"]
    assert [d.content for d in documents] == kit.oracle_texts(2)


def test_the_same_ranking_as_the_core_for_the_same_seed_and_answers(kit):
    """A noisy model (answers depend on the prompt only): the component and the core
    PSCRanker, same options and seed, ask the same prompts and return the same ranking."""
    responder = noisy_responder(kit.relevance, keep=0.3, position_bias=0.5, seed=7)
    with ScriptedOpenAIServer(responder) as server:
        component_ranker = PSCRanker(
            chat_generator=kit.generator(server), num_permutations=6, seed=11
        )
        documents = component_ranker.run(query=kit.QUERY, documents=kit.documents())["documents"]
        asked_by_component = sorted(r.messages[-1]["content"] for r in server.requests)
        options = {"base_url": server.base_url, "api_key": "t"}
        with CoreRanker(
            "openai:scripted-ranker", num_permutations=6, seed=11, backend_options=options
        ) as core:
            result = core.rank(kit.QUERY, [d.content for d in kit.documents()])
        asked_by_core = sorted(r.messages[-1]["content"] for r in server.requests[6:])
    assert asked_by_component == asked_by_core
    assert [d.id for d in documents] == [f"d{i}" for i in result.order]
    assert [d.score for d in documents] == [result.scores[i] for i in result.order]
    assert documents[0].meta["psc"]["confidence"] == pytest.approx(result.confidence)


def test_a_spec_string_backend_ranks_too(kit, server):
    ranker = PSCRanker(
        backend="openai:scripted-ranker",
        num_permutations=3,
        backend_options={"base_url": server.base_url, "api_key": "t"},
    )
    try:
        documents = ranker.run(query=kit.QUERY, documents=kit.documents())["documents"]
    finally:
        ranker.close()
    assert [d.content for d in documents] == kit.oracle_texts()
