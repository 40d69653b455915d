"""Shared parts: documents with known relevance (the ``kit`` fixture), the scripted
OpenAI-compatible server answering as an oracle, and Haystack's real ``OpenAIChatGenerator``
pointed at it. (Tests import nothing from here: pytest runs in importlib mode.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network here

# (text, relevance to QUERY): the oracle ranks by these, higher first.
DOCS: tuple[tuple[str, int], ...] = (
    ("Cats purr when they are content, unlike goldfish.", 0),
    ("Goldfish can live for more than twenty years in a garden pond.", 3),
    ("Goldfish eat flakes, pellets, bloodworms and blanched vegetables.", 5),
    ("A goldfish bowl is too small for an adult goldfish to thrive.", 2),
    ("Parrots can mimic human speech and the goldfish tank's hum.", 1),
)
QUERY = "What do goldfish eat?"


def relevance(text: str) -> float:
    """The relevance of a passage as shown in a prompt (matched by its opening words)."""
    for doc, score in DOCS:
        if doc[:30] in text:
            return float(score)
    raise AssertionError(f"unknown passage shown to the model: {text!r}")


def oracle_texts(top_k: int | None = None) -> list[str]:
    ranked = [doc for doc, _ in sorted(DOCS, key=lambda d: -d[1])]
    return ranked[:top_k] if top_k is not None else ranked


def documents() -> list[Any]:
    from haystack import Document

    return [Document(content=text, id=f"d{k}", meta={"n": k}) for k, (text, _) in enumerate(DOCS)]


def generator(server: Any, **kwargs: Any) -> Any:
    """Haystack's real OpenAIChatGenerator against the scripted server, its retries off."""
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    settings: dict[str, Any] = {
        "model": "scripted-ranker",
        "api_key": Secret.from_env_var("PERMSC_HAYSTACK_TEST_KEY"),
        "api_base_url": server.base_url,
        "max_retries": 0,
        "timeout": 10.0,
        "generation_kwargs": {"temperature": 0.0},
    }
    return OpenAIChatGenerator(**{**settings, **kwargs})


@pytest.fixture(autouse=True)
def _test_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERMSC_HAYSTACK_TEST_KEY", "sk-test-not-a-real-key")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    with ScriptedOpenAIServer(oracle_responder(relevance)) as running:
        yield running


class Kit:
    """The shared test data and helpers, handed to tests by the ``kit`` fixture."""

    DOCS = DOCS
    QUERY = QUERY
    relevance = staticmethod(relevance)
    oracle_texts = staticmethod(oracle_texts)
    documents = staticmethod(documents)
    generator = staticmethod(generator)


@pytest.fixture(scope="session")
def kit() -> type[Kit]:
    return Kit
