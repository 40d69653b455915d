"""Shared parts: a few documents with known relevance (the ``kit`` fixture), a
MockEmbedding vector index, the scripted OpenAI-compatible server answering as an oracle,
and event collectors. (Tests import nothing from here: pytest runs in importlib mode.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

# (text, relevance to QUERY): the oracle ranks by these, higher first.
DOCS: tuple[tuple[str, int], ...] = (
    ("Cats purr when they are content and relaxed.", 0),
    ("Goldfish can live for more than twenty years in a garden pond.", 3),
    ("Goldfish eat flakes, pellets, bloodworms and blanched vegetables.", 5),
    ("A goldfish bowl is too small for an adult fish to thrive.", 2),
    ("Parrots can mimic human speech and household sounds.", 1),
)
QUERY = "What do goldfish eat?"


def relevance(text: str) -> float:
    """The relevance of a passage as shown in a prompt (matched by its opening words)."""
    for doc, score in DOCS:
        if doc[:30] in text:
            return float(score)
    raise AssertionError(f"unknown passage shown to the model: {text!r}")


def oracle_texts(top_n: int | None = None) -> list[str]:
    """Document texts in the oracle's order, best first."""
    ranked = [doc for doc, _ in sorted(DOCS, key=lambda d: -d[1])]
    return ranked[:top_n] if top_n is not None else ranked


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    with ScriptedOpenAIServer(oracle_responder(relevance)) as running:
        yield running


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [Document(text=text) for text, _ in DOCS]
    return VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))


def openai_like(server: Any) -> Any:
    """A real LlamaIndex OpenAI-compatible chat LLM pointed at the scripted server."""
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model="scripted-ranker",
        api_base=server.base_url,
        api_key="test",
        is_chat_model=True,
        max_retries=0,
        temperature=0.0,
    )


class EventCollector(BaseEventHandler):
    """Keeps every instrumentation event it sees."""

    events: list[BaseEvent] = []

    @classmethod
    def class_name(cls) -> str:
        return "EventCollector"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)

    def named(self, name: str) -> list[BaseEvent]:
        return [e for e in self.events if e.class_name() == name]


@pytest.fixture
def events() -> Iterator[EventCollector]:
    root = get_dispatcher()
    collector = EventCollector(events=[])
    root.add_event_handler(collector)
    try:
        yield collector
    finally:
        root.event_handlers.remove(collector)


@pytest.fixture
def spans() -> Iterator[SimpleSpanHandler]:
    root = get_dispatcher()
    handler = SimpleSpanHandler()
    root.add_span_handler(handler)
    try:
        yield handler
    finally:
        root.span_handlers.remove(handler)


class Kit:
    """The shared test data and helpers, handed to tests by the ``kit`` fixture."""

    DOCS = DOCS
    QUERY = QUERY
    relevance = staticmethod(relevance)
    oracle_texts = staticmethod(oracle_texts)
    openai_like = staticmethod(openai_like)


@pytest.fixture(scope="session")
def kit() -> type[Kit]:
    return Kit
