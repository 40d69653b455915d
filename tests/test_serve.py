"""``permsc serve`` as a real subprocess, over raw HTTP, against the scripted upstream."""

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


@pytest.fixture
def keyed(scripted_server, serve_process, serve_case):
    upstream = scripted_server(serve_case.responder)
    flags = serve_case.flags(upstream, "-m", "6")
    proc = serve_process(*flags, env={"PERMSC_API_KEYS": serve_case.key})
    return upstream, proc, serve_case


def test_rerank_gives_psc_order_scores_and_usage(keyed) -> None:
    upstream, proc, case = keyed
    body = {"model": "permsc", "query": case.query, "documents": list(case.docs)}
    answer = httpx.post(f"{proc.url}/v2/rerank", json=body, headers=case.auth, timeout=30)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    calls = upstream.request_count
    expected = case.direct_order(upstream, num_permutations=6)
    assert [r["index"] for r in data["results"]] == list(expected)
    scores = [r["relevance_score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True) and 0 <= scores[-1] <= scores[0] <= 1
    assert scores[0] > scores[-1]
    upstream_tokens = sum(len(r.text.split()) for r in upstream.requests[:calls])
    assert data["meta"]["tokens"]["input_tokens"] == upstream_tokens
    assert data["meta"]["billed_units"]["search_units"] == 1
    assert data["usage"]["upstream_calls"] == calls == 6
    assert data["meta"]["api_version"]["version"] == "2" and data["id"].startswith("permsc-")


def test_every_path_top_n_objects_and_return_documents(keyed) -> None:
    upstream, proc, case = keyed
    objects = [{"text": d, "id": k} for k, d in enumerate(case.docs)]
    body = {"model": "permsc", "query": "goldfish", "documents": objects, "top_n": 3}
    answers = [
        httpx.post(f"{proc.url}{path}", json=body, headers=case.auth, timeout=30).json()
        for path in ("/v2/rerank", "/v1/rerank", "/rerank")
    ]
    orders = [[r["index"] for r in a["results"]] for a in answers]
    assert orders[0] == orders[1] == orders[2] and len(orders[0]) == 3
    assert "document" not in answers[0]["results"][0]
    body["return_documents"] = True
    with_docs = httpx.post(f"{proc.url}/v2/rerank", json=body, headers=case.auth, timeout=30)
    texts = [r["document"]["text"] for r in with_docs.json()["results"]]
    assert texts == [case.docs[i] for i in orders[0]]


def test_max_tokens_per_doc_cuts_documents_to_words(keyed) -> None:
    upstream, proc, case = keyed
    docs = ["alpha beta gamma delta epsilon", "one two three four five six"]
    body = {"model": "permsc", "query": "q", "documents": docs, "max_tokens_per_doc": 2}
    answer = httpx.post(f"{proc.url}/v2/rerank", json=body, headers=case.auth, timeout=30)
    assert answer.status_code == 200
    prompt = upstream.requests[0].text
    assert "alpha beta" in prompt and "gamma" not in prompt and "three" not in prompt


def test_the_bounds_of_top_n_and_max_tokens_per_doc(keyed) -> None:
    """Both bounds are in /openapi.json; within them a request ranks (a top_n above the
    documents sent returns them all: LangChain's CohereRerank sends a fixed top_n), past them
    it is a 400 that sends nothing upstream."""
    from permsc_integrations.serve._schemas import MAX_TOKENS_PER_DOC

    upstream, proc, case = keyed
    schema = httpx.get(f"{proc.url}/openapi.json").json()["components"]["schemas"]
    fields = schema["RerankRequest"]["properties"]
    assert fields["top_n"]["anyOf"][0]["maximum"] == 1000  # --max-documents' default
    assert fields["max_tokens_per_doc"]["anyOf"][0]["maximum"] == MAX_TOKENS_PER_DOC == 100_000
    body = {"model": "permsc", "query": "q", "documents": ["alpha beta", "one two"]}
    bounds = {"top_n": 1000, "max_tokens_per_doc": MAX_TOKENS_PER_DOC}
    answer = httpx.post(f"{proc.url}/v2/rerank", json={**body, **bounds}, headers=case.auth)
    assert answer.status_code == 200, answer.text
    assert sorted(r["index"] for r in answer.json()["results"]) == [0, 1]  # all, whole
    assert "alpha beta" in upstream.requests[0].text and "one two" in upstream.requests[0].text
    sent = upstream.request_count
    # 2**63 was a 500 once (found by the fuzz test: str.split's maxsplit overflowed)
    for field in bounds:
        for value in (bounds[field] + 1, 2**63):
            answer = httpx.post(
                f"{proc.url}/v2/rerank", json={**body, field: value}, headers=case.auth
            )
            assert answer.status_code == 400, (field, value, answer.text)
            assert answer.json() == {"message": f"{field}: must be at most {bounds[field]}"}
    assert upstream.request_count == sent


def test_auth_models_health_and_metrics(keyed) -> None:
    upstream, proc, case = keyed
    auth = case.auth
    assert httpx.get(f"{proc.url}/health").json() == {"status": "ok"}
    for headers in ({}, {"Authorization": "Bearer wrong-key-1"}, {"Authorization": case.key}):
        answer = httpx.post(f"{proc.url}/v2/rerank", json={}, headers=headers)
        assert answer.status_code == 401 and set(answer.json()) == {"message"}
    assert httpx.get(f"{proc.url}/v1/models").status_code == 401
    models = httpx.get(f"{proc.url}/v1/models", headers=auth).json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["permsc"]
    body = {"model": "other", "query": "q", "documents": ["a", "b", "c"]}  # 3! = 6 = m orders
    unknown = httpx.post(f"{proc.url}/v2/rerank", json=body, headers=auth)
    assert unknown.status_code == 404 and "permsc" in unknown.json()["message"]
    body["model"] = "permsc"
    assert httpx.post(f"{proc.url}/v2/rerank", json=body, headers=auth).status_code == 200
    assert httpx.get(f"{proc.url}/metrics").status_code == 401
    text = httpx.get(f"{proc.url}/metrics", headers=auth).text
    for line in (
        'permsc_serve_requests_total{model="permsc",route="/v2/rerank",status="200"} 1.0',
        'permsc_serve_requests_total{model="",route="/v2/rerank",status="401"} 3.0',
        'permsc_serve_upstream_calls_total{model="permsc"} 6.0',
        'permsc_serve_request_seconds_count{model="permsc"} 1.0',
        "permsc_serve_requests_in_flight 0.0",
    ):
        assert line in text, line
    assert 'kind="prompt"' in text
    assert httpx.get(f"{proc.url}/openapi.json").json()["openapi"].startswith("3.")


BAD = [
    (b"{not json", 400, "malformed JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (json.dumps({"model": "permsc", "documents": ["a"]}).encode(), 400, "query"),
    (json.dumps({"model": "permsc", "query": "q"}).encode(), 400, "documents"),
    (json.dumps({"model": "permsc", "query": "q", "documents": []}).encode(), 400, "empty"),
    (json.dumps({"model": "permsc", "query": "q", "documents": "a"}).encode(), 400, "list"),
    (json.dumps({"model": "permsc", "query": "q", "documents": [3]}).encode(), 400, "[0]"),
    (json.dumps({"model": "permsc", "query": "q", "documents": [{"t": 1}]}).encode(), 400, "text"),
    (json.dumps({"model": "permsc", "query": 7, "documents": ["a"]}).encode(), 400, "query"),
    (json.dumps({"model": "permsc", "query": " ", "documents": ["a"]}).encode(), 400, "query"),
    (
        json.dumps({"model": "permsc", "query": "q", "documents": ["a"], "top_n": -1}).encode(),
        400,
        "top_n",
    ),
    (
        json.dumps({"model": "permsc", "query": "q", "documents": ["a"], "top_n": 11}).encode(),
        400,
        "top_n: must be at most 10",
    ),
    (
        json.dumps({"model": "permsc", "query": "q", "documents": ["a"] * 11}).encode(),
        400,
        "limit is 10",
    ),
    (json.dumps({"query": "q", "documents": ["a"]}).encode(), 400, "model"),
]


JSON = {"Content-Type": "application/json"}


def test_bad_input_is_a_4xx_that_says_what(scripted_server, serve_process, serve_case) -> None:
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", "--max-documents", "10"))
    for body, status, words in BAD:
        answer = httpx.post(f"{proc.url}/v2/rerank", content=body, headers=JSON)
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.json()["message"], (body, answer.json())
    assert upstream.request_count == 0


def _raw(port: int, head: bytes, body_parts: Any) -> bytes:
    """Send ``head`` and as much of the body as the server takes; return its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for part in body_parts:
            try:
                sock.sendall(part)
            except OSError:  # the server answered and closed: it read no more
                break
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def test_too_large_bodies_are_413_without_reading_them(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "--max-body-bytes", "65536"))
    declared = (
        b"POST /v2/rerank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1073741824\r\n\r\n"
    )
    assert _raw(proc.port, declared, [b"{"]).startswith(b"HTTP/1.1 413")
    chunked = (
        b"POST /v2/rerank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (1 << 20, b"x" * (1 << 20))
    sent: list[bytes] = []

    def offered() -> Any:  # 2 GiB offered, one MiB at a time
        for _ in range(2048):
            sent.append(chunk)
            yield chunk

    answer = _raw(proc.port, chunked, offered())
    assert answer.startswith(b"HTTP/1.1 413") and b"connection: close" in answer.lower()
    assert len(sent) < 64  # the connection closed: the rest was never read
    assert httpx.get(f"{proc.url}/health").status_code == 200


def test_no_key_in_any_answer_log_or_metric(scripted_server, serve_process, serve_case) -> None:
    alpha, beta = serve_case.key, serve_case.other_key
    upstream_key = "sk-upstream-very-secret-123"
    fault = Fault.status(401, message=f"Incorrect API key provided: {upstream_key}")
    upstream = scripted_server(lambda request: fault)
    proc = serve_process(
        *serve_case.flags(upstream, "-m", "6"),
        env={"OPENAI_API_KEY": upstream_key, "PERMSC_API_KEYS": f"{alpha},{beta}"},
    )
    body = {"model": "permsc", "query": "q", "documents": ["a", "b", "c"]}
    auth = serve_case.auth
    answers = [httpx.post(f"{proc.url}/v2/rerank", json=body, headers=auth) for _ in range(4)]
    assert {a.status_code for a in answers} == {502}
    message = answers[0].json()["message"]
    assert "upstream openai:scripted" in message and "401" in message
    assert upstream.request_count <= 6  # the breaker: later requests send nothing
    wrong = httpx.post(f"{proc.url}/v2/rerank", json=body, headers={"Authorization": "Bearer x"})
    metrics = httpx.get(f"{proc.url}/metrics", headers=auth).text
    proc.stop()
    seen = [a.text for a in answers] + [wrong.text, metrics, "".join(proc.log)]
    for secret in (upstream_key, alpha, beta):
        assert not any(secret in text for text in seen), secret


def test_an_exhausted_quota_is_probed_again_after_the_cooldown(
    scripted_server, serve_process, serve_case
) -> None:
    """A quota fault opens the breaker: requests in the cool-down are 502s that send nothing;
    once the quota is topped up, the first request after the cool-down ranks (its first call
    is the probe)."""
    cooldown = 3.0
    quota = Fault.status(429, code="insufficient_quota", message="You exceeded your quota")
    topped_up = threading.Event()

    async def respond(request: Any) -> Any:
        if topped_up.is_set():
            return serve_case.responder(request)
        while request.index < 4 and upstream.request_count < 4:  # the first request's m calls
            await asyncio.sleep(0.005)
        return quota

    upstream = scripted_server(respond)
    flags = serve_case.flags(upstream, "-m", "4", "--breaker-cooldown", str(cooldown))
    proc = serve_process(*flags)
    body = {"model": "permsc", "query": serve_case.query, "documents": list(serve_case.docs)}
    began = time.monotonic()  # the breaker opens after this
    first = httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=30)
    assert first.status_code == 502 and upstream.request_count == 4
    message = first.json()["message"]
    assert "upstream openai:scripted@" in message and "refused the request (HTTP 429)" in message
    assert "retry-after" not in first.headers  # the upstream's own refusal names no time
    for _ in range(3):
        answer = httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=30)
        assert answer.status_code == 502 and "quota" in answer.json()["message"]
        assert 1 <= int(answer.headers["retry-after"]) <= cooldown  # when the probe may go
    assert time.monotonic() - began < cooldown, "too slow to test the cool-down"
    assert upstream.request_count == 4  # the breaker sent none of the three
    topped_up.set()
    answers = []
    deadline = time.monotonic() + cooldown + 30
    while not answers or answers[-1].status_code != 200:
        assert time.monotonic() < deadline, "the breaker never let a probe through"
        time.sleep(0.05)  # the poll's pace; each poll is a request
        answers.append(httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=30))
    assert {a.status_code for a in answers[:-1]} <= {502}  # refused until the cool-down ended
    assert time.monotonic() - began >= cooldown
    assert answers[-1].json()["usage"]["upstream_calls"] == 4 and upstream.request_count == 8
    ranked = [r["index"] for r in answers[-1].json()["results"]]
    assert ranked == list(serve_case.direct_order(upstream, num_permutations=4))


def test_upstream_rate_limit_is_429_with_retry_after(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(lambda request: Fault.status(429, retry_after=0.01))
    proc = serve_process(*serve_case.flags(upstream, "-m", "2"))
    body = {"model": "permsc", "query": "q", "documents": ["a", "b"]}
    answer = httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=60)
    assert answer.status_code == 429 and int(answer.headers["retry-after"]) >= 1
    assert "rate limited" in answer.json()["message"]


class Gate:
    """A responder that holds every answer of ``responder`` until ``released`` is set."""

    def __init__(self, responder: Any) -> None:
        self.responder = responder
        self.released = threading.Event()

    async def __call__(self, request: Any) -> Reply:
        while not self.released.is_set():
            await asyncio.sleep(0.005)
        return self.responder(request)  # type: ignore[no-any-return]


def test_a_client_that_disconnects_cancels_its_upstream_calls(
    scripted_server, serve_process, serve_case, wait_until
) -> None:
    gate = Gate(serve_case.responder)
    upstream = scripted_server(gate)
    proc = serve_process(*serve_case.flags(upstream, "-m", "6", "--concurrency", "2"))
    body = json.dumps({"model": "permsc", "query": "q", "documents": serve_case.docs}).encode()
    head = b"POST /v2/rerank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    head += b"Content-Length: %d\r\n\r\n" % len(body)
    with socket.create_connection(("127.0.0.1", proc.port)) as sock:
        sock.sendall(head + body)
        wait_until(lambda: upstream.in_flight == 2, "two upstream calls in flight", timeout=30)

    def abandoned() -> bool:  # counted once the ranking has ended: no call can start after
        return 'status="499"} 1.0' in httpx.get(f"{proc.url}/metrics").text

    wait_until(abandoned, "the server to give the request up", timeout=30)
    # the upstream still holds both calls: the ranking ended only because they were cancelled
    assert upstream.in_flight == 2 and upstream.request_count == 2
    assert "permsc_serve_requests_in_flight 0.0" in httpx.get(f"{proc.url}/metrics").text
    gate.released.set()
    wait_until(lambda: upstream.in_flight == 0, "the upstream to finish", timeout=30)
    assert upstream.request_count == 2  # none of the other four calls was ever sent


def test_per_key_cap_lets_other_clients_in(
    scripted_server, serve_process, serve_case, wait_until
) -> None:
    alpha, beta = serve_case.key, serve_case.other_key
    gate = Gate(serve_case.responder)
    upstream = scripted_server(gate)
    flags = serve_case.flags(upstream, "-m", "2", "--key-concurrency", "1", "--key-queue", "2")
    proc = serve_process(*flags, env={"PERMSC_API_KEYS": f"{alpha},{beta}"})
    body = {"model": "permsc", "query": "q", "documents": ["a", "b", "c"]}
    results: list[int] = []

    def send(key: str) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        answer = httpx.post(f"{proc.url}/v2/rerank", json=body, headers=headers, timeout=60)
        results.append(answer.status_code)

    threads = [threading.Thread(target=send, args=(alpha,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: upstream.request_count == 2, "the first request's two calls", timeout=30)

    def waiting() -> bool:
        text = httpx.get(f"{proc.url}/metrics", headers={"Authorization": f"Bearer {alpha}"}).text
        return "permsc_serve_requests_waiting 2.0" in text

    wait_until(waiting, "the first key's other two requests to wait their turn", timeout=30)
    other = threading.Thread(target=send, args=(beta,))
    other.start()
    wait_until(lambda: upstream.request_count == 4, "the other key's calls", timeout=30)
    assert upstream.in_flight == 4  # the first key's queued requests sent nothing
    gate.released.set()
    for thread in [*threads, other]:
        thread.join(60)
    assert results == [200] * 4


def test_sigterm_drains_in_flight_requests_and_exits_0(
    scripted_server, serve_process, serve_case, wait_until
) -> None:
    gate = Gate(serve_case.responder)
    upstream = scripted_server(gate)
    proc = serve_process(*serve_case.flags(upstream, "-m", "3"))
    body = {"model": "permsc", "query": "q", "documents": ["a", "b", "c"]}
    answers: list[Any] = []
    client = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=60))
    )
    client.start()
    wait_until(lambda: upstream.in_flight == 3, "the request's calls in flight", timeout=30)
    proc.proc.send_signal(signal.SIGTERM)

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", proc.port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        return False

    wait_until(refused, "the server to stop accepting", timeout=30)
    assert proc.proc.poll() is None  # still draining
    gate.released.set()
    client.join(60)
    assert answers[0].status_code == 200
    assert proc.proc.wait(30) == 0


def test_public_host_without_keys_refuses_to_start(scripted_server, serve_case) -> None:
    from permsc_integrations.cli import main

    upstream = scripted_server(serve_case.responder)
    code = main(["serve", "--host", "0.0.0.0", *serve_case.flags(upstream)])
    assert code == 2


def test_several_named_models_from_a_toml_file(
    scripted_server, serve_process, serve_case, tmp_path
) -> None:
    upstream = scripted_server(serve_case.responder)
    config = tmp_path / "models.toml"
    config.write_text(
        f'[models.psc-fast]\nbackend = "openai:scripted"\nbase_url = "{upstream.base_url}"\n'
        "num_permutations = 2\n\n"
        f'[models.psc-best]\nbackend = "openai:scripted"\nbase_url = "{upstream.base_url}"\n'
        'num_permutations = 5\naggregator = "borda"\n'
    )
    proc = serve_process("--config", str(config))
    names = [m["id"] for m in httpx.get(f"{proc.url}/v1/models").json()["data"]]
    assert names == ["psc-fast", "psc-best"]
    calls = []
    for name in names:
        body = {"model": name, "query": "goldfish", "documents": serve_case.docs[:4]}
        answer = httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=30).json()
        calls.append(answer["usage"]["upstream_calls"])
    assert calls == [2, 5]
    unknown = httpx.post(f"{proc.url}/v2/rerank", json={**body, "model": "x"})
    assert unknown.status_code == 404
    assert "psc-fast, psc-best" in unknown.json()["message"]
