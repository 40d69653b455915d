"""LangChain's standard retriever tests on PSCRetriever (a vector store + PSC, loopback server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_permsc import PSCReranker, PSCRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder


class TestPSCRetrieverStandard(RetrieversIntegrationTests):
    corpus: Any
    server: ScriptedOpenAIServer

    @pytest.fixture(autouse=True)
    def _oracle_server(self, corpus: Any) -> Iterator[None]:
        with ScriptedOpenAIServer(oracle_responder(corpus.relevance)) as server:
            type(self).corpus, type(self).server = corpus, server
            yield

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return PSCRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
        store.add_documents(self.corpus.documents())
        kwargs = {"base_url": self.server.base_url, "api_key": "test"}
        reranker = PSCReranker(
            backend="openai:scripted", backend_options=kwargs, num_permutations=3
        )
        return {"retriever": store.as_retriever(search_kwargs={"k": 6}), "reranker": reranker}

    @property
    def retriever_query_example(self) -> str:
        return "which topic?"


@pytest.mark.parametrize("k", [1, 3])
async def test_k_is_the_best_k_of_the_reranked_list(
    corpus: Any, server: ScriptedOpenAIServer, k: int
) -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(corpus.documents())
    base = store.as_retriever(search_kwargs={"k": 6})
    kwargs = {"base_url": server.base_url, "api_key": "test"}
    reranker = PSCReranker(
        backend="openai:scripted", backend_options=kwargs, num_permutations=3, top_n=5
    )
    retriever = PSCRetriever(retriever=base, reranker=reranker, k=k)
    candidates = [d.page_content for d in base.invoke("which topic?")]
    best = corpus.expected_order(candidates)[:k]
    assert [d.page_content for d in retriever.invoke("which topic?")] == best
    assert [d.page_content for d in await retriever.ainvoke("which topic?")] == best
    assert [d.page_content for d in retriever.invoke("which topic?", k=2)] == corpus.expected_order(
        candidates
    )[:2]
