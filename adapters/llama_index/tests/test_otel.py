"""OpenTelemetry: a postprocessor run inside the application's span ranks in a ``rerank``
span that is its child, with one ``chat`` span per model call under it (sync and async)."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.postprocessor.permsc import PSCRerank  # noqa: E402
from opentelemetry import trace  # noqa: E402

from permsc_integrations.testing._spans import recording_spans  # noqa: E402


async def test_rerank_spans_nest_under_the_applications_span(kit, server) -> None:
    nodes = [NodeWithScore(node=TextNode(text=text)) for text, _ in kit.DOCS]
    rerank = PSCRerank(backend=kit.openai_like(server), num_permutations=2, top_n=2)
    with recording_spans() as exporter:
        with trace.get_tracer("app").start_as_current_span("query") as parent:
            rerank.postprocess_nodes(nodes, query_str=kit.QUERY)
            await rerank.apostprocess_nodes(nodes, query_str=kit.QUERY)
    spans = exporter.get_finished_spans()
    reranks = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "rerank"]
    parent_id = parent.get_span_context().span_id
    assert [s.parent.span_id for s in reranks] == [parent_id, parent_id]
    for span in reranks:
        assert span.attributes["gen_ai.request.model"] == "scripted-ranker"
        assert span.attributes["gen_ai.rerank.candidate.count"] == len(kit.DOCS)
        calls = [s for s in spans if s.parent and s.parent.span_id == span.context.span_id]
        assert len([s for s in calls if s.name == "chat scripted-ranker"]) == 2
