"""``permsc mcp`` driven by the MCP SDK's own client: over stdio (a real subprocess) and over
streamable HTTP (a real server process), against the scripted upstream."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client, StdioServerParameters  # noqa: E402

from permsc_integrations.testing import Fault  # noqa: E402

KEY = "client-key-alpha"


def flags(upstream: Any, *extra: str) -> list[str]:
    """``permsc serve``'s flags for the scripted upstream, m = 4 (its key: OPENAI_API_KEY)."""
    return ["--backend", "openai:scripted", "--base-url", upstream.base_url, "-m", "4", *extra]


def config_file(upstream: Any, folder: Path) -> Path:
    """A models file as ``permsc serve`` reads it; no retries, so a 429 answers at once."""
    path = folder / "models.toml"
    path.write_text(
        f'[models.psc]\nbackend = "openai:scripted"\nbase_url = "{upstream.base_url}"\n'
        'api_key_env = "UPSTREAM_KEY"\nnum_permutations = 4\nretry = {max_attempts = 1}\n'
    )
    return path


def stdio(*args: str) -> Client:
    env = {k: v for k, v in os.environ.items() if k not in ("PERMSC_API_KEYS", "OPENAI_API_KEY")}
    env["UPSTREAM_KEY"] = "sk-test-upstream"
    command = ["-m", "permsc_integrations.cli", "mcp", *args]
    return Client(StdioServerParameters(command=sys.executable, args=command, env=env))


@asynccontextmanager
async def over_http(url: str, key: str | None = KEY) -> AsyncIterator[Client]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            yield client


def text_of(result: Any) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "text", None))


async def check_tool_and_ranking(client: Client, upstream: Any, case: Any, model: str) -> None:
    """The tool's schema, then one ranking: PSC's order, scores, confidence and usage."""
    (tool,) = (await client.list_tools()).tools
    assert tool.name == "rerank" and "relevance_score" in tool.description
    properties = tool.input_schema["properties"]
    assert list(properties) == [
        "query",
        "documents",
        "top_n",
        "num_permutations",
        "max_calls",
        "max_total_tokens",
        "return_documents",
    ]
    assert tool.input_schema["required"] == ["query", "documents"]
    assert properties["documents"]["maxItems"] == 1000  # the server's --max-documents
    assert properties["num_permutations"]["anyOf"][0]["maximum"] == 4  # the server's -m
    assert "maximum" not in properties["max_calls"]["anyOf"][0]  # the server sets no budget
    assert set(tool.output_schema["properties"]) == {
        *("model", "results", "confidence", "usage", "head", "stopped", "warnings")
    }
    arguments = {"query": case.query, "documents": list(case.docs), "top_n": 3}
    result = await client.call_tool("rerank", {**arguments, "return_documents": True})
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    expected = case.direct_order(upstream, num_permutations=4)
    assert [r["index"] for r in answer["results"]] == list(expected[:3])
    assert [r["text"] for r in answer["results"]] == [case.docs[i] for i in expected[:3]]
    scores = [r["relevance_score"] for r in answer["results"]]
    assert scores == sorted(scores, reverse=True) and 0 <= scores[-1] <= scores[0] <= 1
    assert answer["usage"]["calls"] == 4 and answer["usage"]["input_tokens"] > 0
    assert answer["model"] == model and -1 <= answer["confidence"] <= 1
    cheaper = await client.call_tool("rerank", {**arguments, "num_permutations": 2})
    assert cheaper.structured_content["usage"]["calls"] == 2
    assert "text" not in cheaper.structured_content["results"][0]
    budget = await client.call_tool("rerank", {**arguments, "max_calls": 3})
    assert budget.structured_content["usage"]["calls"] == 3
    assert budget.structured_content["warnings"] == []
    usage = answer["usage"]
    per_call = (usage["input_tokens"] + usage["output_tokens"]) / usage["calls"]
    within = {**arguments, "max_total_tokens": int(2.5 * per_call)}
    spent = (await client.call_tool("rerank", within)).structured_content["usage"]
    assert spent["input_tokens"] + spent["output_tokens"] <= 2.5 * per_call
    assert 1 <= spent["calls"] <= 2


async def check_bad_calls(client: Client, upstream: Any) -> None:
    """Bad arguments are tool errors that name what is wrong; nothing goes upstream."""
    sent = upstream.request_count
    bad = {
        "documents": {"query": "q", "documents": []},
        "top_n": {"query": "q", "documents": ["a"], "top_n": 0},
        "num_permutations": {"query": "q", "documents": ["a", "b"], "num_permutations": 9},
        "query: must not be empty": {"query": "  ", "documents": ["a"]},
    }
    for what, arguments in bad.items():
        result = await client.call_tool("rerank", arguments)
        assert result.is_error and what in text_of(result), text_of(result)
    assert upstream.request_count == sent


async def check_upstream_failure(client: Client, upstream: Any, rate_limit: bool) -> None:
    """An upstream failure is a tool error in serve's words, without the upstream key."""
    if rate_limit:
        upstream.responder = lambda request: Fault.status(429, message="slow down")
        result = await client.call_tool("rerank", {"query": "q", "documents": ["a", "b"]})
        assert result.is_error and "rate limited; retry later" in text_of(result)
    upstream.responder = lambda request: Fault.status(401, message="bad key sk-test-upstream")
    result = await client.call_tool("rerank", {"query": "q", "documents": ["a", "b"]})
    assert result.is_error and "refused the request (HTTP 401)" in text_of(result)
    assert "sk-test-upstream" not in text_of(result)


async def test_stdio_lists_ranks_refuses_and_reports_upstream_failures(
    scripted_server, serve_case, tmp_path
) -> None:
    upstream = scripted_server(serve_case.responder)
    async with stdio("--config", str(config_file(upstream, tmp_path))) as client:
        await check_tool_and_ranking(client, upstream, serve_case, "psc")
        await check_bad_calls(client, upstream)
        await check_upstream_failure(client, upstream, rate_limit=True)


async def check_one_call_at_a_time_per_key(client: Client, upstream: Any) -> None:
    """``--key-concurrency 1``: a key's second call starts upstream once its first is done."""
    import anyio

    from permsc_integrations.testing import Reply, oracle_responder

    upstream.responder = lambda r: Reply(oracle_responder(len)(r).text, delay=0.2)
    upstream.reset()
    async with anyio.create_task_group() as group:
        for query in ("first", "second"):
            arguments = {"query": query, "documents": ["a", "b", "c"]}  # 4 of 3! orders
            group.start_soon(client.call_tool, "rerank", arguments)
    calls = sorted(upstream.records, key=lambda record: record.start)
    first, second = calls[:4], calls[4:]
    assert len(calls) == 8 and len({c.request.text.split("query: ")[1][:5] for c in first}) == 1
    assert max(c.end for c in first) <= min(c.start for c in second)


async def test_http_behind_the_client_keys(scripted_server, serve_process, serve_case) -> None:
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(
        *flags(upstream, "--transport", "http", "--key-concurrency", "1"),
        env={"PERMSC_API_KEYS": KEY},
        command="mcp",
    )
    assert "permsc mcp: listening on" in "".join(proc.log)
    for headers in ({}, {"Authorization": "Bearer wrong-key-1"}):
        answer = httpx.post(f"{proc.url}/mcp", json={}, headers=headers)
        assert answer.status_code == 401 and "API key" in answer.json()["message"]
    async with over_http(proc.url) as client:
        await check_tool_and_ranking(client, upstream, serve_case, "permsc")
        await check_bad_calls(client, upstream)
        await check_one_call_at_a_time_per_key(client, upstream)
        await check_upstream_failure(client, upstream, rate_limit=False)


def test_refuses_a_public_host_without_keys(serve_case) -> None:
    from permsc_integrations.cli import main

    args = ["mcp", "--transport", "http", "--host", "0.0.0.0", "--backend", "openai:m"]
    assert main(args) == 2  # ServeConfig's rule, before anything is bound


async def test_in_process_the_rerank_span_is_a_child_of_the_tool_call_span() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from permsc_integrations import PSCRanker
    from permsc_integrations.mcp_server import RerankTool
    from permsc_integrations.mcp_server._server import build_server
    from permsc_integrations.serve._config import Limits
    from permsc_integrations.testing import ScriptedBackend, oracle_responder
    from permsc_integrations.testing._spans import recording_spans

    ranker = PSCRanker(ScriptedBackend(oracle_responder(len)), num_permutations=3)
    tool = RerankTool(ranker, "psc")
    with recording_spans() as exporter:
        async with Client(build_server(tool, Limits())) as client:
            arguments = {"query": "q", "documents": ["a", "bbb", "cc"], "top_n": 2}
            result = await client.call_tool("rerank", arguments)
    await tool.aclose()
    assert [r["index"] for r in result.structured_content["results"]] == [1, 2]
    spans = {s.name: s for s in exporter.get_finished_spans()}
    call, rerank = spans["tools/call rerank"], spans["rerank scripted"]
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"  # the SDK's own span
    assert rerank.parent.span_id == call.context.span_id
    assert rerank.attributes["gen_ai.rerank.top_n"] == 2
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat scripted"]
    assert len(chats) == 3


async def test_the_documented_client_configs_and_answer_match_the_tool() -> None:
    """docs/agents.md's JSON: each client config starts a valid ``permsc mcp`` (or names its
    HTTP endpoint), and the example answer is valid under the tool's output schema."""
    import json
    import re

    import jsonschema

    from permsc_integrations import PSCRanker
    from permsc_integrations.cli import build_parser
    from permsc_integrations.mcp_server import RerankTool
    from permsc_integrations.mcp_server._server import build_server
    from permsc_integrations.serve._config import Limits
    from permsc_integrations.testing import ScriptedBackend

    doc = Path(__file__).resolve().parents[1] / "docs" / "agents.md"
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", doc.read_text(), re.S)]
    configs = [b["mcpServers"]["permsc"] for b in blocks if "mcpServers" in b]
    (answer,) = [b for b in blocks if "results" in b]
    assert [c.get("command") for c in configs] == ["permsc", None]
    args = build_parser().parse_args(configs[0]["args"])
    assert (args.command, args.backend, args.num_permutations) == ("mcp", "openai:gpt-4o-mini", 10)
    assert configs[1]["url"].endswith("/mcp") and "Bearer" in configs[1]["headers"]["Authorization"]
    tool = RerankTool(PSCRanker(ScriptedBackend(lambda r: "[1]"), num_permutations=2), "permsc")
    (listed,) = await build_server(tool, Limits()).list_tools()
    jsonschema.validate(answer, listed.output_schema)
    await tool.aclose()


async def test_under_opentelemetry_instrument_the_server_emits_its_spans(
    scripted_server, serve_case, tmp_path, until
) -> None:
    """``opentelemetry-instrument permsc mcp``: the SDK provider the distro configures turns
    the spans on in the server process (here printed by the console exporter, as the SDK's
    JSON, when the server exits; over stdio use a network exporter: stdout is MCP's)."""
    import json
    import shutil
    import subprocess

    instrument = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    if instrument is None:
        pytest.skip("opentelemetry-distro is not installed (the agents-test extra)")
    upstream = scripted_server(serve_case.responder)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-upstream", "OTEL_TRACES_EXPORTER": "console"}
    env.update(OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
    env.pop("PERMSC_API_KEYS", None)
    cli = [sys.executable, "-m", "permsc_integrations.cli", "mcp", "--transport", "http"]
    log = tmp_path / "stderr.txt"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [instrument, *cli, "--port", "0", *flags(upstream)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        await until(lambda: "listening on" in log.read_text() or proc.poll() is not None)
        port = log.read_text().split("listening on ")[1].split()[0].rsplit(":", 1)[1]
        async with over_http(f"http://127.0.0.1:{port}", key=None) as client:
            documents = list(serve_case.docs[:3])
            result = await client.call_tool("rerank", {"query": "goldfish", "documents": documents})
            assert not result.is_error
    finally:
        proc.terminate()
        out = proc.communicate(timeout=60)[0]
    decoder, spans, at = json.JSONDecoder(), [], out.find("{")
    while at != -1:
        span, end = decoder.raw_decode(out, at)
        spans.append(span)
        at = out.find("{", end)
    names = [span["name"] for span in spans]
    assert names.count("chat scripted") == 4 and names.count("rerank scripted") == 1
    (rerank,) = [s for s in spans if s["name"] == "rerank scripted"]
    (call,) = [s for s in spans if s["name"] == "tools/call rerank"]
    assert rerank["parent_id"] == call["context"]["span_id"]
    assert rerank["attributes"]["gen_ai.rerank.candidate.count"] == 3
