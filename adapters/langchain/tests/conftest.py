"""Shared fixtures: a scripted OpenAI-compatible server whose oracle ranks by a known relevance,
and a small corpus behind a real in-memory vector store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

# d<i> has relevance RELEVANCE[i]: the oracle orders what it is shown by this
RELEVANCE = [3, 7, 1, 8, 5, 2, 6, 4]
CORPUS = [f"d{i}: passage number {i} about topic {r}" for i, r in enumerate(RELEVANCE)]


def relevance(text: str) -> float:
    """The known relevance of a corpus passage (as shown in the prompt)."""
    return RELEVANCE[int(text.split(":", 1)[0].removeprefix("d"))]


def expected_order(texts: list[str]) -> list[str]:
    """``texts`` best first by the known relevance."""
    return sorted(texts, key=lambda t: -relevance(t))


def documents() -> list[Document]:
    """Fresh documents of the corpus, with ids and metadata."""
    return [
        Document(text, id=f"id-{i}", metadata={"source": f"s{i}"}) for i, text in enumerate(CORPUS)
    ]


class Corpus:
    """The corpus and its helpers, handed to tests by the ``corpus`` fixture."""

    texts = CORPUS
    relevance = staticmethod(relevance)
    expected_order = staticmethod(expected_order)
    documents = staticmethod(documents)


@pytest.fixture
def corpus() -> type[Corpus]:
    return Corpus


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    """An oracle server; replace ``server.responder`` to script something else."""
    with ScriptedOpenAIServer(oracle_responder(relevance)) as running:
        yield running


@pytest.fixture
def vector_retriever():  # type: ignore[no-untyped-def]
    """A real retriever returning the whole corpus, in an order unrelated to relevance."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(documents())
    return store.as_retriever(search_kwargs={"k": len(CORPUS)})
