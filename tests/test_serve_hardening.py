"""``permsc serve`` against hostile and careless clients, as a real process: secrets out of
the log at every level, keyless mode closed to web pages, the end of the grace period,
clients leaving mid-upload, long upstream Retry-After, empty documents, repeated JSON keys."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")
pytest.importorskip("pydantic")

from permsc_integrations.testing import Fault, Reply  # noqa: E402

BODY = {"model": "permsc", "query": "goldfish", "documents": ["Goldfish grow.", "Cats purr."]}


def wait_for(condition: Any, what: str, limit: float = 30.0) -> None:
    """Poll ``condition()`` until true (a state, not a time); fail after ``limit`` s."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def between(log: list[str]) -> list[str]:
    """The log lines written while the server was serving (after start, before shutdown)."""
    start = next(k for k, line in enumerate(log) if "listening on" in line) + 1
    stop = next((k for k, line in enumerate(log) if "Shutting down" in line), len(log))
    return log[start:stop]


@pytest.mark.parametrize("level", ["info", "debug"])
def test_no_credential_query_or_document_reaches_the_log(
    scripted_server, serve_process, serve_case, level: str
) -> None:
    """A base URL with ``user:password@``, documents and queries: none of them in the log at
    any level, and at info one line per refused request, none per upstream call (before, at
    debug the SDK's lines carried the URL's password and the documents)."""
    upstream = scripted_server(serve_case.responder)
    secret_url = upstream.base_url.replace("http://", "http://bob:hunter2pw@")
    flags = ["--backend", "openai:m", "--base-url", secret_url, "-m", "3", "--log-level", level]
    proc = serve_process(*flags)
    documents = ["doc-private-1", "doc-private-2", "doc-private-3"]  # 3 of their 6 orders
    body = {**BODY, "query": "q-private-words", "documents": documents}
    for _ in range(2):
        assert httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=30).status_code == 200
    refused = httpx.post(f"{proc.url}/v2/rerank", json={**body, "model": "nope"}, timeout=30)
    assert refused.status_code == 404 and upstream.request_count == 6
    assert proc.stop() == 0
    text = "".join(proc.log)
    for secret in ("hunter2pw", "sk-test-upstream", "q-private-words", "doc-private"):
        assert secret not in text, secret
    if level == "info":
        assert [line.split(" ", 3)[3] for line in between(proc.log)] == [
            "/v2/rerank - -> 404: unknown model 'nope'; this server serves: permsc\n"
        ]


def test_keyless_mode_refuses_what_a_web_page_can_send(
    scripted_server, serve_process, serve_case
) -> None:
    """Before, a text/plain POST from another origin, and a JSON POST with a foreign Host
    (DNS rebinding), were ranked (4 upstream calls each)."""
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2"))
    url, page = f"{proc.url}/v2/rerank", {"Origin": "http://evil.example"}
    text = {**page, "Content-Type": "text/plain"}
    plain = httpx.post(url, content=json.dumps(BODY), headers=text)
    assert plain.status_code == 415 and "application/json" in plain.json()["message"]
    bare = httpx.post(url, content=json.dumps(BODY).encode(), headers=page)  # no Content-Type
    assert bare.status_code == 415
    rebound = httpx.post(url, json=BODY, headers={**page, "Host": f"evil.example:{proc.port}"})
    assert rebound.status_code == 421 and "--allowed-host" in rebound.json()["message"]
    preflight = httpx.options(
        url,
        headers={
            **page,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code >= 400
    assert not any(h.startswith("access-control-") for h in preflight.headers)
    assert upstream.request_count == 0
    for host in ("localhost", "127.0.0.1", "[::1]"):
        answer = httpx.post(url, json=BODY, headers={"Host": f"{host}:{proc.port}"})
        assert answer.status_code == 200, (host, answer.text)


def test_the_operator_can_open_keyless_mode_to_named_hosts_and_origins(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(serve_case.responder)
    flags = ["-m", "2", "--allowed-host", "rerank.internal", "--cors-origin", "http://app.example"]
    proc = serve_process(*serve_case.flags(upstream, *flags))
    url = f"{proc.url}/v2/rerank"
    assert httpx.post(url, json=BODY, headers={"Host": "rerank.internal"}).status_code == 200
    assert httpx.post(url, json=BODY, headers={"Host": "other.internal"}).status_code == 421
    ask = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    granted = httpx.options(url, headers={**ask, "Origin": "http://app.example"})
    assert granted.headers["access-control-allow-origin"] == "http://app.example"
    refused = httpx.options(url, headers={**ask, "Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in refused.headers
    plain = httpx.post(url, content=json.dumps(BODY), headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415


def test_with_client_keys_the_browser_checks_do_not_apply(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2"), env={"PERMSC_API_KEYS": "k" * 12})
    headers = {"Authorization": f"Bearer {'k' * 12}", "Host": "rerank.example.com"}
    answer = httpx.post(f"{proc.url}/v2/rerank", content=json.dumps(BODY), headers=headers)
    assert answer.status_code == 200, answer.text


class Held:
    """A responder that never answers (until the test ends)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    async def __call__(self, request: Any) -> Reply:
        while not self.released.is_set():
            await asyncio.sleep(0.005)
        return Reply("[1] > [2]")


def test_requests_left_at_the_end_of_the_grace_period_get_a_503(
    scripted_server, serve_process, serve_case
) -> None:
    """Before: a 500 each (and a traceback) though the process exited 0."""
    held = Held()
    upstream = scripted_server(held)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", "--grace-period", "1"))
    answers: list[Any] = []

    def send() -> None:
        answers.append(httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=60))

    clients = [threading.Thread(target=send) for _ in range(3)]
    for client in clients:
        client.start()
    wait_for(lambda: upstream.in_flight == 6, "the three requests' calls in flight")
    proc.proc.send_signal(signal.SIGTERM)
    for client in clients:
        client.join(60)
    held.released.set()
    assert proc.proc.wait(30) == 0
    assert [a.status_code for a in answers] == [503] * 3
    assert all(a.headers["retry-after"] == "1" for a in answers)
    assert "shutting down" in answers[0].json()["message"]
    log = "".join(proc.log)
    assert "Traceback" not in log and log.count("-> 503") == 3


def test_a_client_leaving_mid_upload_writes_no_traceback(
    scripted_server, serve_process, serve_case
) -> None:
    """Before: two tracebacks (the app's and uvicorn's) and a 500 to nobody."""
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2"))
    head = (
        b"POST /v2/rerank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", proc.port)) as sock:
        sock.sendall(head + b'{"model": "permsc", ')

    def counted() -> bool:
        text = httpx.get(f"{proc.url}/metrics").text
        return 'route="/v2/rerank",status="499"} 1.0' in text

    wait_for(counted, "the server to count the client gone")
    assert proc.stop() == 0
    assert "Traceback" not in "".join(proc.log) and len(between(proc.log)) <= 1


def test_a_long_upstream_retry_after_is_passed_on_at_once(
    scripted_server, serve_process, serve_case
) -> None:
    """Before: the server waited 60 s (its retry cap) before asking again and answering 429."""
    upstream = scripted_server(lambda request: Fault.status(429, retry_after=3600))
    proc = serve_process(*serve_case.flags(upstream, "-m", "3"))
    answer = httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=20)
    assert answer.status_code == 429 and answer.headers["retry-after"] == "3600"
    assert upstream.request_count == 2  # one call per order of the two: none was retried


def test_empty_documents_rank_last_without_a_call(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2"))
    docs = ["", "Goldfish goldfish grow.", "  \n", "Cats purr.", "Goldfish."]
    answer = httpx.post(f"{proc.url}/v2/rerank", json={**BODY, "documents": docs}, timeout=30)
    results = answer.json()["results"]
    assert [r["index"] for r in results][3:] == [0, 2]
    assert [r["relevance_score"] for r in results][3:] == [0.0, 0.0]
    assert upstream.request_count == 2 and "[4]" not in upstream.requests[0].text
    assert answer.json()["usage"]["upstream_calls"] == 2
    alone = {**BODY, "documents": ["", "Goldfish.", " "], "top_n": 2}
    answer = httpx.post(f"{proc.url}/v2/rerank", json=alone, timeout=30)
    assert [(r["index"], r["relevance_score"]) for r in answer.json()["results"]] == [
        (1, 1.0),
        (0, 0.0),
    ]
    assert upstream.request_count == 2  # one document to rank: nothing to ask


def test_repeated_json_keys_are_refused(scripted_server, serve_process, serve_case) -> None:
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2"))
    body = b'{"model": "permsc", "query": "goldfish", "query": "cats", "documents": ["a", "b"]}'
    headers = {"Content-Type": "application/json"}
    answer = httpx.post(f"{proc.url}/v2/rerank", content=body, headers=headers)
    assert answer.status_code == 422 and "'query'" in answer.json()["message"]
    nested = b'{"model": "permsc", "query": "q", "documents": [{"text": "a", "text": "b"}]}'
    assert httpx.post(f"{proc.url}/v2/rerank", content=nested, headers=headers).status_code == 422
    assert upstream.request_count == 0
