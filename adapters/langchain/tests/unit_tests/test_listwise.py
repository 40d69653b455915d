"""PSCListwiseRanker: listwise ranking of arbitrary items inside LCEL pipelines."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_permsc import PSCListwiseRanker

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import ScriptedOpenAIServer


def ranker(server: ScriptedOpenAIServer, **options: Any) -> PSCListwiseRanker:
    kwargs = {"base_url": server.base_url, "api_key": "test"}
    return PSCListwiseRanker(
        backend="openai:scripted", backend_options=kwargs, num_permutations=3, **options
    )


async def test_lcel_pipeline_sync_and_async(corpus: Any, server: ScriptedOpenAIServer) -> None:
    # prompt | ... | ranker: the query comes out of a prompt template, the items from a lookup
    pipeline = (
        PromptTemplate.from_template("passages about {topic}")
        | RunnableLambda(lambda p: {"query": p.to_string(), "items": corpus.texts})
        | ranker(server)
    )
    rows = pipeline.invoke({"topic": "topics"})
    assert [r["item"] for r in rows] == corpus.expected_order(corpus.texts)
    assert [r["rank"] for r in rows] == list(range(1, 9))
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert all(corpus.texts[r["index"]] == r["item"] for r in rows)
    assert await pipeline.ainvoke({"topic": "topics"}) == rows
    assert server.request_count == 2 * 3
    assert "passages about topics" in server.requests[0].text


def test_mappings_come_back_as_given(corpus: Any, server: ScriptedOpenAIServer) -> None:
    items = [{"text": t, "docid": f"k{i}", "extra": i} for i, t in enumerate(corpus.texts[:4])]
    rows = ranker(server).invoke({"query": "q", "items": items})
    assert [r["item"] for r in rows] == sorted(items, key=lambda m: -corpus.relevance(m["text"]))
    assert rows[0]["item"] is items[rows[0]["index"]]


def test_bad_input_is_a_typed_error(server: ScriptedOpenAIServer) -> None:
    with pytest.raises(ConfigurationError, match="items"):
        ranker(server).invoke(["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="query"):
        ranker(server).invoke({"query": 3, "items": ["a"]})
    assert server.request_count == 0
