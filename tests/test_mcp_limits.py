"""``permsc mcp`` against what issue 40 found: connections that never end (idle ``GET /mcp``
streams, trickled bodies, unread answers) holding the per-key cap, no DNS-rebinding guard on
other loopback addresses, ``--allowed-host`` ignored, unknown arguments dropped, pydantic's
raw dump, blank documents paid for, a spent cap as "internal error", a budget's ranker kept
(with a cap of its own), a traceback when a stdio client leaves. A real server process and
the SDK's own client, or the SDK's in-process client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.testing import Reply, oracle_responder  # noqa: E402

CALL = {"query": "goldfish", "documents": ["Goldfish grow.", "Cats purr.", "Goldfish goldfish."]}


def flags(upstream: Any, *extra: str) -> list[str]:
    return ["--transport", "http", "--backend", "openai:m", "--base-url", upstream.base_url, *extra]


def rpc(name: str, arguments: dict[str, Any]) -> bytes:
    params = {"name": name, "arguments": arguments}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    ).encode()


def head(port: int, length: int | None, method: str = "POST", host: str = "127.0.0.1") -> bytes:
    lines = [
        f"{method} /mcp HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 2025-06-18",
    ]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def call(url: str, arguments: dict[str, Any]) -> Any:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client() as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return await client.call_tool("rerank", arguments)


async def held(port: int, data: bytes, drip: bytes = b"", limit: float = 20.0) -> bytes:
    """Send ``data``, then ``drip`` a byte every 0.2 s, until the server closes: its answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    answer, opened, k = b"", time.monotonic(), 0
    try:
        while time.monotonic() - opened < limit:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 0.2)
            except asyncio.TimeoutError:
                if drip:
                    writer.write(drip[k % len(drip) : k % len(drip) + 1])
                    k += 1
                continue
            if not chunk:
                return answer
            answer += chunk
    except OSError:
        return answer
    finally:
        writer.close()
    raise AssertionError(f"still open after {limit} s: {answer[:200]!r}")


async def test_long_lived_connections_have_deadlines_and_hold_no_key_turn(
    scripted_server, serve_process
) -> None:
    """Keyless (everyone shares one key), ``--key-concurrency 1``: four idle ``GET /mcp``
    streams and four trickled bodies. Before, the first of them held the key's only turn for
    good: a real call got no answer, and nothing was ever closed. Now a GET is a 405 at once,
    a trickled body a 408 at ``--body-timeout``, and the real call is answered meanwhile."""
    upstream = scripted_server(oracle_responder(len))
    limits = ["--key-concurrency", "1", "--body-timeout", "2", "-m", "2"]
    proc = serve_process(*flags(upstream, *limits), command="mcp")
    body = rpc("rerank", CALL)
    gets = [asyncio.create_task(held(proc.port, head(proc.port, None, "GET"))) for _ in range(4)]
    slow = head(proc.port, len(body)) + body[:10]
    trickled = [asyncio.create_task(held(proc.port, slow, drip=b" ")) for _ in range(4)]
    result = await asyncio.wait_for(call(proc.url, CALL), 20)
    assert not result.is_error and result.structured_content["usage"]["calls"] == 2
    for answer in await asyncio.gather(*gets):
        assert answer.startswith(b"HTTP/1.1 405") and b"allow: POST" in answer
    for answer in await asyncio.gather(*trickled):
        assert answer.startswith(b"HTTP/1.1 408") and b"connection: close" in answer
    assert proc.stop() == 0 and "Traceback" not in "".join(proc.log)


async def test_an_unread_answer_is_cut_and_holds_no_key_turn(
    scripted_server, serve_process
) -> None:
    """A client that asks for a large answer and never reads it. Before, it held the
    connection, the answer in memory and the key's turn for good; now the connection is
    closed ``--send-timeout`` after its writes stall, and other calls are answered."""
    upstream = scripted_server(oracle_responder(len))
    limits = ["--key-concurrency", "1", "--send-timeout", "1", "-m", "2"]
    proc = serve_process(*flags(upstream, *limits), command="mcp")
    big = {"query": "q", "documents": ["a " * 600_000, "b " * 500_000], "return_documents": True}
    body = rpc("rerank", big)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", proc.port))
    sock.sendall(head(proc.port, len(body)) + body)
    result = await asyncio.wait_for(call(proc.url, CALL), 20)  # answered meanwhile
    assert not result.is_error
    sock.settimeout(20)
    try:  # what the kernel holds, then the end: the server closed the connection
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    assert proc.stop() == 0 and "Traceback" not in "".join(proc.log)


async def test_keyless_on_any_loopback_address_refuses_foreign_hosts_and_origins(
    scripted_server, serve_process
) -> None:
    """``--host 127.0.0.2``: before, a foreign Host or Origin got a 200 and spent; and
    ``--allowed-host`` was accepted and ignored."""
    upstream = scripted_server(oracle_responder(len))
    proc = serve_process(
        *flags(upstream, "--host", "127.0.0.2", "--allowed-host", "rerank.internal", "-m", "2"),
        command="mcp",
    )
    url, body = f"http://127.0.0.2:{proc.port}/mcp", rpc("rerank", CALL)
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    rebound = httpx.post(url, content=body, headers={**base, "Host": "evil.example"})
    assert rebound.status_code == 421 and "--allowed-host" in rebound.json()["message"]
    page = httpx.post(url, content=body, headers={**base, "Origin": "http://evil.example"})
    assert page.status_code == 403 and "Origin" in page.json()["message"]
    assert upstream.request_count == 0
    named = httpx.post(url, content=body, headers={**base, "Host": "rerank.internal"})
    assert named.status_code == 200 and '"isError":false' in named.text.replace(" ", "")
    local = httpx.post(
        url, content=body, headers={**base, "Origin": f"http://127.0.0.2:{proc.port}"}
    )
    assert local.status_code == 200


def in_process(**options: Any) -> tuple[Any, Any]:
    from permsc_integrations import PSCRanker
    from permsc_integrations.mcp_server import RerankTool
    from permsc_integrations.mcp_server._server import build_server
    from permsc_integrations.serve._config import Limits
    from permsc_integrations.testing import ScriptedBackend

    backend = ScriptedBackend(oracle_responder(len))
    tool = RerankTool(PSCRanker(backend, **options), "psc")
    return build_server(tool, Limits()), backend


def text_of(result: Any) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "text", None))


async def test_arguments_are_checked_in_one_line_and_blank_documents_cost_nothing() -> None:
    """Before: ``top_k`` was dropped (every document came back), ``top_n: 0`` answered
    pydantic's multi-line dump with its URL, and blank documents were sent to the model."""
    server, backend = in_process(num_permutations=2)
    async with Client(server) as client:
        unknown = await client.call_tool("rerank", {**CALL, "top_k": 2})
        assert unknown.is_error and "unknown argument 'top_k' (did you mean 'top_n'?)" in text_of(
            unknown
        )
        bad = await client.call_tool("rerank", {**CALL, "top_n": 0})
        assert bad.is_error and text_of(bad) == "top_n: must be at least 1", text_of(bad)
        typed = await client.call_tool("rerank", {**CALL, "documents": "abc"})
        assert typed.is_error and "\n" not in text_of(typed) and "http" not in text_of(typed)
        assert backend.request_count == 0
        documents = ["", "bb", "  ", "a", "ccc"]
        result = await client.call_tool("rerank", {"query": "q", "documents": documents})
    answer = result.structured_content
    assert [r["index"] for r in answer["results"]] == [4, 1, 3, 0, 2]
    assert [r["shown"] for r in answer["results"]] == [True, True, True, False, False]
    assert answer["results"][3]["relevance_score"] == 0.0
    assert all("[4]" not in request.text for request in backend.requests)  # 3 items a prompt
    assert answer["head"] == 3 and answer["stopped"] == "complete"


async def test_the_answer_says_what_the_model_never_saw() -> None:
    """``max_calls: 1`` over 30 documents: the model sees the first 20. Before: no head or
    stopped, and the 10 others looked ranked last."""
    server, _ = in_process(num_permutations=2, max_calls=4)
    documents = [f"doc {'x' * k}" for k in range(30)]
    async with Client(server) as client:
        result = await client.call_tool(
            "rerank", {"query": "q", "documents": documents, "max_calls": 1}
        )
    answer = result.structured_content
    assert answer["head"] == 20 and answer["stopped"] == "budget"
    unseen = [r for r in answer["results"] if not r["shown"]]
    assert [r["index"] for r in unseen] == list(range(20, 30))
    assert all(r["top_probability"] is None for r in unseen)
    assert all(isinstance(r["top_probability"], float) for r in answer["results"] if r["shown"])


async def test_the_answer_warns_when_the_model_only_copies_the_order_shown() -> None:
    """A model that answers every prompt with the order it was shown: the answer says so
    (serve's meta.warnings says the same). Before: nothing told the agent."""
    from permsc_integrations.mcp_server import RerankTool
    from permsc_integrations.mcp_server._server import build_server
    from permsc_integrations.serve._config import Limits
    from permsc_integrations.testing import ScriptedBackend
    from permsc_integrations.testing._responders import shown_passages

    def copies(request):
        return " > ".join(f"[{k + 1}]" for k in range(len(shown_passages(request.messages))))

    tool = RerankTool(PSCRanker(ScriptedBackend(copies), num_permutations=4), "psc")
    documents = [f"doc {'x' * k}" for k in range(8)]
    async with Client(build_server(tool, Limits())) as client:
        result = await client.call_tool("rerank", {"query": "q", "documents": documents})
    (warning,) = result.structured_content["warnings"]
    assert warning.startswith("4 of 4 answers were degenerate (4 echoed the order shown"), warning


async def test_budgets_share_the_servers_cap_and_a_spent_cap_says_so() -> None:
    """Before: each budget value built a ranker kept for good, with a ranker cap of its own
    (a budget argument spent past the server's cap), and a spent cap was "internal error"."""
    from permsc_integrations import SpendingCap

    server, backend = in_process(num_permutations=3, ranker_cap=SpendingCap(calls=5))
    async with Client(server) as client:
        for m in (1, 2):
            result = await client.call_tool("rerank", {**CALL, "num_permutations": m})
            assert not result.is_error, text_of(result)
        spent = await client.call_tool("rerank", {**CALL, "num_permutations": 3})
    assert spent.is_error and "ranker_cap calls=5" in text_of(spent)
    assert "internal error" not in text_of(spent) and backend.request_count == 3


def test_a_stdio_client_that_leaves_early_gets_no_traceback(scripted_server, tmp_path) -> None:
    """The client closes its end of the server's stdout during a call. Before: a traceback
    (BrokenPipeError in an exception group) and exit 1."""
    upstream = scripted_server(lambda r: Reply(oracle_responder(len)(r).text, delay=0.5))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-upstream"}
    command = [sys.executable, "-m", "permsc_integrations.cli", "mcp", "--backend", "openai:m"]
    command += ["--base-url", upstream.base_url, "-m", "2"]
    proc = subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    for message in (
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    assert b'"id":0' in proc.stdout.readline()  # initialized
    proc.stdin.write(rpc("rerank", CALL) + b"\n")
    proc.stdin.flush()
    proc.stdout.close()  # leaves before the answer
    proc.stdout = None
    deadline = time.monotonic() + 30
    while upstream.request_count < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    err = b""
    try:
        _, err = proc.communicate(timeout=30)  # closes stdin: the server ends
    finally:
        proc.kill()
    assert b"Traceback" not in err, err.decode()[-2000:]
    assert proc.returncode == 0
