"""OpenTelemetry spans of a ranking (tracing.py), read with the SDK's in-memory exporter: the
real openai client against the scripted loopback server, the global SDK tracer provider."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.errors import AuthenticationError  # noqa: E402
from permsc_integrations.testing import (  # noqa: E402
    Fault,  # noqa: E402
    oracle_responder,
    sequence,
)
from permsc_integrations.testing._spans import recording_spans  # noqa: E402
from permsc_integrations.tracing import CAPTURE_CONTENT_ENV, reported_top_n  # noqa: E402

QUERY = "goldfish growth"
DOCS = [
    "Cats purr when content.",
    "Goldfish goldfish grow with their tank.",
    "The stock market fell today.",
    "A goldfish can live for decades.",
    "Mountains are tall.",
]


def goldfish(text: str) -> float:
    return text.lower().count("goldfish")


@pytest.fixture
def upstream(scripted_server):
    return scripted_server(oracle_responder(goldfish))


def ranker_for(server: Any, **options: Any) -> PSCRanker:
    return server.ranker("scripted", backend_options={"api_key": "sk-test-upstream"}, **options)


def by_kind(spans: Any) -> tuple[Any, list[Any]]:
    reranks = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "rerank"]
    calls = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(reranks) == 1, [s.name for s in spans]
    return reranks[0], calls


def test_one_rerank_span_with_m_chat_spans_under_it(upstream) -> None:
    with recording_spans() as exporter, ranker_for(upstream, num_permutations=4) as ranker:
        result = ranker.rank(QUERY, DOCS)
    rerank, calls = by_kind(exporter.get_finished_spans())
    assert rerank.name == "rerank scripted" and rerank.kind == SpanKind.INTERNAL
    a = rerank.attributes
    assert a["gen_ai.request.model"] == "scripted" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.rerank.candidate.count"] == 5 and "gen_ai.rerank.top_n" not in a
    assert a["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens > 0
    assert a["gen_ai.usage.output_tokens"] == result.usage.completion_tokens > 0
    assert (a["permsc.num_permutations"], a["permsc.calls"]) == (4, 4)
    assert (a["permsc.strategy"], a["permsc.aggregator"]) == ("blocks", "kemeny")
    assert a["permsc.confidence"] == pytest.approx(result.confidence)
    assert a["permsc.failed_samples"] == 0 and rerank.status.status_code == StatusCode.UNSET
    assert len(calls) == 4 == upstream.request_count
    for call in calls:
        assert call.parent.span_id == rerank.context.span_id and call.kind == SpanKind.CLIENT
        assert call.name == "chat scripted" and call.attributes["server.address"] == "127.0.0.1"
        assert call.attributes["gen_ai.request.temperature"] == 0.0
        assert call.attributes["permsc.parse_status"] == "ok"
        assert rerank.start_time <= call.start_time <= call.end_time <= rerank.end_time
    tokens = sorted(c.attributes["gen_ai.usage.input_tokens"] for c in calls)
    assert tokens == sorted(len(r.text.split()) for r in upstream.requests)
    recorded = json.dumps([dict(s.attributes) for s in exporter.get_finished_spans()])
    assert "goldfish" not in recorded.lower() and "Mountains" not in recorded  # no text


@pytest.mark.parametrize("window_size", [20, 3])  # one window; rounds of blocks
def test_text_only_when_the_application_opts_in(upstream, monkeypatch, window_size) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    with recording_spans() as exporter:
        with ranker_for(upstream, num_permutations=3, window_size=window_size) as ranker:
            ranker.rank(QUERY, DOCS)
    _, calls = by_kind(exporter.get_finished_spans())
    shown = sorted(c.attributes["gen_ai.input.messages"] for c in calls)
    sent = sorted(
        json.dumps(
            [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in r],
            ensure_ascii=False,
        )
        for r in (request.messages for request in upstream.requests)
    )
    assert shown == sent and len(sent) == upstream.request_count  # each: the prompt it sent


async def test_the_span_nests_under_the_current_one_sync_and_async(upstream) -> None:
    tracer = trace.get_tracer("app")
    with recording_spans() as exporter, ranker_for(upstream, num_permutations=2) as ranker:
        with tracer.start_as_current_span("request") as parent:
            await ranker.arank(QUERY, DOCS)
            with reported_top_n(2):
                ranker.rank(QUERY, DOCS)  # on the bridge's loop, another thread
    spans = exporter.get_finished_spans()
    reranks = [s for s in spans if s.name.startswith("rerank")]
    assert [s.parent.span_id for s in reranks] == [parent.get_span_context().span_id] * 2
    assert [s.attributes.get("gen_ai.rerank.top_n") for s in reranks] == [None, 2]
    assert {s.context.trace_id for s in spans} == {parent.get_span_context().trace_id}


def test_retries_and_unreadable_answers_show_on_their_call(scripted_server) -> None:
    server = scripted_server(
        sequence(Fault.status(500), "no ranking here", then=oracle_responder(goldfish))
    )
    with recording_spans() as exporter:
        with ranker_for(server, num_permutations=2, reasks=0, max_concurrency=1) as ranker:
            ranker.rank(QUERY, DOCS[:3])
    rerank, calls = by_kind(exporter.get_finished_spans())
    status = sorted(
        (c.attributes["permsc.parse_status"], c.attributes["permsc.retries"]) for c in calls
    )
    assert status == [("invalid", 0), ("ok", 1)] or status == [("invalid", 1), ("ok", 0)]
    assert rerank.attributes["permsc.failed_samples"] == 1
    assert rerank.attributes["permsc.calls"] == 3 == server.request_count


def test_a_failed_ranking_is_an_error_span_with_its_type_only(scripted_server) -> None:
    server = scripted_server(lambda request: Fault.status(401, message="bad key sk-test-upstream"))
    with recording_spans() as exporter, ranker_for(server, num_permutations=3) as ranker:
        with pytest.raises(AuthenticationError):
            ranker.rank(QUERY, DOCS)
    rerank, calls = by_kind(exporter.get_finished_spans())
    assert rerank.status.status_code == StatusCode.ERROR
    assert rerank.status.description == "AuthenticationError"
    assert rerank.attributes["permsc.calls"] >= 1  # what the failure cost
    assert calls and all(c.status.status_code == StatusCode.ERROR for c in calls)
    assert "sk-test" not in json.dumps([dict(s.attributes) for s in (rerank, *calls)])


def test_a_fatal_error_shows_on_the_call_that_got_it_and_counts_as_failed(scripted_server):
    """A 401 (fatal: no retry fixes it) fails the ranking: the call that got it is an error
    span with its type, counted in failed_samples; each of the two waiting for the one slot
    is refused unsent by the open breaker (failed, no call, no span) or cut short
    (cancelled), whichever comes first."""
    server = scripted_server(lambda request: Fault.status(401, message="bad key"))
    with recording_spans() as exporter:
        with ranker_for(server, num_permutations=3, max_concurrency=1) as ranker:
            with pytest.raises(AuthenticationError):
                ranker.rank(QUERY, DOCS)
    rerank, calls = by_kind(exporter.get_finished_spans())
    types = [c.attributes.get("error.type") for c in calls]
    assert server.request_count == 1 and types.count("AuthenticationError") == 1, types
    (failed,) = [c for c in calls if c.attributes["error.type"] == "AuthenticationError"]
    assert failed.attributes["permsc.parse_status"] == "error"
    assert failed.status.description == "AuthenticationError"
    cancelled = types.count("cancelled")
    assert len(types) == 1 + cancelled  # each sample: failed, refused unsent, or cut short
    assert rerank.attributes["permsc.failed_samples"] == 3 - cancelled >= 1
    assert "permsc.stopped" not in rerank.attributes


def test_a_ranking_cut_by_max_calls_says_stopped_budget(upstream) -> None:
    with recording_spans() as exporter:
        with ranker_for(upstream, num_permutations=4, max_calls=2, window_size=3) as ranker:
            cut = ranker.rank(QUERY, DOCS)
        with ranker_for(upstream, num_permutations=2) as ranker:
            whole = ranker.rank(QUERY, DOCS)
    reranks = [s for s in exporter.get_finished_spans() if s.name.startswith("rerank")]
    assert (cut.stopped, whole.stopped) == ("budget", "complete")
    assert [s.attributes.get("permsc.stopped") for s in reranks] == ["budget", "complete"]
    assert reranks[0].attributes["permsc.calls"] == 2


def test_no_tracer_provider_no_opentelemetry_import_and_no_span() -> None:
    code = """
import sys
from permsc_integrations import PSCRanker
from permsc_integrations.testing import ScriptedBackend
from permsc_integrations.tracing import tracer
with PSCRanker(ScriptedBackend(lambda r: "[1] > [2]"), num_permutations=2) as ranker:
    ranker.rank("q", ["a", "b"])
print("opentelemetry" in sys.modules)
import opentelemetry.trace  # imported, but no provider configured: still nothing
print(tracer())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "None"]


def test_the_tracing_snippet_of_docs_agents_md_runs_alone(upstream) -> None:
    """docs/agents.md's set-up snippet sets the global provider, so it runs in its own
    interpreter (tests/test_docs.py only compiles it)."""
    import os
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "agents.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)
    (code,) = [b for b in blocks if "trace.set_tracer_provider" in b]
    env = {**os.environ, "OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "sk-test"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    lines = [line for line in out.splitlines() if not line.startswith(" ")]
    assert lines == [
        *["chat gpt-4o-mini < rerank gpt-4o-mini"] * 3,
        "rerank gpt-4o-mini < answer question",
        "answer question < None",
    ]
    assert "'gen_ai.operation.name': 'rerank'" in out and upstream.request_count == 3
