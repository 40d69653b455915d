"""``permsc serve`` as a real process (issue 40): a spent cap is a 503 or 413 with a body, a
client key's waiting requests are bounded and have a deadline, an answer nobody reads has a
deadline, and the answer says how far the ranking went (``meta.head``/``stopped``, ``shown``)
with ``top_probability`` scores that never tie."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")
pytest.importorskip("pydantic")

from permsc_integrations.testing import Reply, oracle_responder  # noqa: E402
from permsc_integrations.testing._responders import shown_passages  # noqa: E402

BODY = {"model": "permsc", "query": "goldfish", "documents": ["Goldfish grow.", "Cats purr."]}


class Gate:
    """A responder that holds every answer of ``responder`` until ``released`` is set."""

    def __init__(self, responder: Any) -> None:
        self.responder = responder
        self.released = threading.Event()

    async def __call__(self, request: Any) -> Any:
        while not self.released.is_set():
            await asyncio.sleep(0.005)
        return self.responder(request)


def test_a_spent_cap_is_a_503_or_413_with_a_body_and_one_log_line(
    scripted_server, serve_process, serve_case
) -> None:
    """Before: a 500 "internal error" and a traceback of ~6 kB per request."""
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", "--ranker-cap", "calls=2"))
    assert httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=30).status_code == 200
    answers = [httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=30) for _ in range(3)]
    assert [a.status_code for a in answers] == [503] * 3
    assert "ranker_cap calls=2" in answers[0].json()["message"]
    assert upstream.request_count == 2  # the cap holds
    per_request = serve_process(*serve_case.flags(upstream, "-m", "2", "--request-cap", "calls=1"))
    answer = httpx.post(f"{per_request.url}/v2/rerank", json=BODY, timeout=30)
    assert answer.status_code == 413 and "request_cap calls=1" in answer.json()["message"]
    for server in (proc, per_request):
        assert server.stop() == 0
        log = "".join(server.log)
        assert "Traceback" not in log and len(log) < 3000, log


def test_a_keys_waiting_requests_are_bounded_and_have_a_deadline(
    scripted_server, serve_process, serve_case, wait_until
) -> None:
    """``--key-concurrency 1 --key-queue 1 --queue-timeout 2``: one request ranks, one waits,
    the next is a 429 at once; the waiting one gets a 503 when its wait is over. Before, every
    request waited (holding its body) with no deadline."""
    gate = Gate(serve_case.responder)
    upstream = scripted_server(gate)
    limits = ["--key-concurrency", "1", "--key-queue", "1", "--queue-timeout", "2"]
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", *limits))
    answers: dict[str, httpx.Response] = {}

    def send(name: str) -> None:
        answers[name] = httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=60)

    first = threading.Thread(target=send, args=("first",))
    first.start()
    wait_until(lambda: upstream.in_flight == 2, "the first request's calls", timeout=30, every=0.01)
    second = threading.Thread(target=send, args=("second",))
    second.start()
    wait_until(
        lambda: "permsc_serve_requests_waiting 1.0" in httpx.get(f"{proc.url}/metrics").text,
        "the second request to wait its turn",
        timeout=30,
        every=0.01,
    )
    third = httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=5)
    assert third.status_code == 429 and third.headers["retry-after"] == "1"
    assert "--key-queue" in third.json()["message"]
    second.join(30)
    assert answers["second"].status_code == 503 and "--queue-timeout" in answers["second"].text
    gate.released.set()
    first.join(30)
    assert answers["first"].status_code == 200 and upstream.request_count == 2


def test_an_answer_nobody_reads_is_cut_at_its_deadline(
    scripted_server, serve_process, serve_case, wait_until
) -> None:
    """A client that asks for a large answer and never reads it: before, its connection (and
    the answer in memory) was held for good; now it is closed ``--send-timeout`` after its
    writes stall, and counted."""
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", "--send-timeout", "1"))
    big = {
        **BODY,
        "documents": ["goldfish " * 200_000, "cats " * 300_000],
        "return_documents": True,
    }
    body = httpx.Request("POST", "http://x", json=big).content
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", proc.port))
    head = (
        f"POST /v2/rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)

    def cut() -> bool:
        metrics = httpx.get(f"{proc.url}/metrics").text
        return 'permsc_serve_slow_clients_total{reason="slow_read"} 1.0' in metrics

    wait_until(cut, "the unread answer's connection to be closed", timeout=30, every=0.01)
    sock.setblocking(False)

    def closed() -> bool:  # the kernel's buffered part, then the end (or a reset)
        try:
            while sock.recv(1 << 20):
                pass
        except BlockingIOError:
            return False  # open so far: the close may follow the count by a moment
        except OSError:
            pass
        return True

    try:
        wait_until(closed, "the unread answer's connection to end", timeout=30, every=0.01)
    finally:
        sock.close()
    assert httpx.post(f"{proc.url}/v2/rerank", json=BODY, timeout=30).status_code == 200
    assert proc.stop() == 0 and "Traceback" not in "".join(proc.log)


def test_the_answer_says_how_far_the_ranking_went(
    scripted_server, serve_process, serve_case
) -> None:
    """``--max-calls 1`` over 30 documents (window 20): the model sees the first 20 only.
    Before: no ``head``/``stopped``, and the 10 unseen documents indistinguishable from the
    ones ranked last. The Cohere SDK still reads the answer."""
    cohere = pytest.importorskip("cohere")
    upstream = scripted_server(oracle_responder(serve_case.relevance))
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", "--max-calls", "1"))
    docs = [f"goldfish {'goldfish ' * (k % 7)}doc {k}" for k in range(30)]
    answer = httpx.post(f"{proc.url}/v2/rerank", json={**BODY, "documents": docs}, timeout=30)
    meta, results = answer.json()["meta"], answer.json()["results"]
    assert meta["head"] == 20 and meta["stopped"] == "budget", meta
    assert "10 of 30 documents were never shown" in meta["warnings"][0]
    assert [r["shown"] for r in results] == [True] * 20 + [False] * 10
    assert [r["index"] for r in results[20:]] == list(range(20, 30))  # in the order sent
    client = cohere.ClientV2(api_key="unused", base_url=proc.url)
    parsed = client.rerank(model="permsc", query="goldfish", documents=docs)
    assert [r.index for r in parsed.results] == [r["index"] for r in results]
    assert parsed.meta.billed_units.search_units == 1


def test_the_answer_warns_when_the_model_only_copies_the_order_shown(
    scripted_server, serve_process, serve_case
) -> None:
    """An upstream that answers every prompt with the order it was shown: the ranking stands,
    and ``meta.warnings`` says what it stands on (issue 39)."""

    def copy(request: Any) -> Reply:
        return Reply(" > ".join(f"[{p + 1}]" for p in range(len(shown_passages(request.messages)))))

    upstream = scripted_server(copy)
    proc = serve_process(*serve_case.flags(upstream, "-m", "3"))
    docs = [f"goldfish doc {k}" for k in range(8)]
    answer = httpx.post(f"{proc.url}/v2/rerank", json={**BODY, "documents": docs}, timeout=30)
    assert answer.status_code == 200, answer.text
    [warning] = answer.json()["meta"]["warnings"]
    assert warning.startswith("3 of 3 answers were degenerate (3 echoed the order shown"), warning
    assert sorted(r["index"] for r in answer.json()["results"]) == list(range(8))


def test_top_probability_scores_never_tie(scripted_server, serve_process, serve_case) -> None:
    """``--relevance-score top_probability --top-k 5``: before, the top 5 tied at 1.0."""
    upstream = scripted_server(oracle_responder(serve_case.relevance))
    flags = ["-m", "4", "--top-k", "5", "--relevance-score", "top_probability"]
    proc = serve_process(*serve_case.flags(upstream, *flags))
    body = {**BODY, "documents": list(serve_case.docs)}
    results = httpx.post(f"{proc.url}/v2/rerank", json=body, timeout=30).json()["results"]
    scores = [r["relevance_score"] for r in results]
    assert all(a > b for a, b in zip(scores, scores[1:], strict=False)), scores
    assert 0 <= scores[-1] and scores[0] <= 1.0 and all(r["shown"] for r in results)
