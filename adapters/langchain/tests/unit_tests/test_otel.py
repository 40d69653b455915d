"""OpenTelemetry: a reranker run inside the application's span ranks in a ``rerank`` span
that is its child, with one ``chat`` span per model call under it (sync and async)."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from langchain_permsc import PSCReranker  # noqa: E402
from opentelemetry import trace  # noqa: E402

from permsc_integrations.testing._spans import recording_spans  # noqa: E402


async def test_rerank_spans_nest_under_the_applications_span(server, corpus) -> None:
    options = {"base_url": server.base_url, "api_key": "t"}
    reranker = PSCReranker(backend="openai:m", backend_options=options, num_permutations=2, top_n=3)
    docs = corpus.documents()[:4]
    with recording_spans() as exporter:
        with trace.get_tracer("app").start_as_current_span("chain") as parent:
            reranker.compress_documents(docs, "topic")
            await reranker.acompress_documents(docs, "topic")
    spans = exporter.get_finished_spans()
    reranks = [s for s in spans if s.name == "rerank m"]
    parent_id = parent.get_span_context().span_id
    assert [s.parent.span_id for s in reranks] == [parent_id, parent_id]
    assert [s.attributes["gen_ai.rerank.top_n"] for s in reranks] == [3, 3]  # top_k = top_n
    for rerank in reranks:
        calls = [s for s in spans if s.parent and s.parent.span_id == rerank.context.span_id]
        assert [s.name for s in calls] == ["chat m", "chat m"]
