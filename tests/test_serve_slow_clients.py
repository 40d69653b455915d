"""Slow and idle clients against a real ``permsc serve`` process: cut within their deadline,
never more connections than the open-file limit allows, real clients served meanwhile, and a
log that stays a few lines long (benchmarks/serve_slowloris.py measures the full attack)."""

from __future__ import annotations

import asyncio
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")
pytest.importorskip("pydantic")

HEAD = b"POST /v2/rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
SLOW = {  # what each kind sends at once, and what it then trickles, a byte at a time
    "slow head": (HEAD, b"X-Slow: a\r\n"),
    "slow body": (HEAD + b"Content-Length: 100000\r\n\r\n", b'{"query": "x" '),
    "endless chunked": (HEAD + b"Transfer-Encoding: chunked\r\n\r\n", b"1\r\nx\r\n"),
}


async def hold(port: int, kind: str, limit: float = 30.0) -> tuple[float, bytes]:
    """Open a connection of ``kind`` and trickle until the server closes it: the seconds it
    was held, and what the server answered (``b""``: nothing)."""
    head, drip = SLOW[kind]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened, answer, k = time.monotonic(), b"", 0
    writer.write(head)
    try:
        while time.monotonic() - opened < limit:
            try:
                data = await asyncio.wait_for(reader.read(65536), 0.2)
            except asyncio.TimeoutError:
                writer.write(drip[k % len(drip) : k % len(drip) + 1])
                k += 1
                continue
            if not data:
                break
            answer += data
    except OSError:  # reset: closed without a word
        pass
    finally:
        writer.close()
    return time.monotonic() - opened, answer


async def rerank(url: str, docs: tuple[str, ...]) -> int:
    body = {"model": "permsc", "query": "goldfish", "documents": list(docs)}
    async with httpx.AsyncClient(timeout=20) as client:
        return (await client.post(f"{url}/v2/rerank", json=body)).status_code


def problems(log: list[str]) -> list[str]:
    return [line for line in log if "Traceback" in line or "Too many open files" in line]


async def test_slow_clients_are_cut_within_their_deadlines(
    scripted_server, serve_process, serve_case
) -> None:
    upstream = scripted_server(serve_case.responder)
    flags = ["--header-timeout", "1", "--body-timeout", "2", "-m", "2"]
    proc = serve_process(*serve_case.flags(upstream, *flags))
    kinds = [kind for kind in SLOW for _ in range(10)]
    held = [asyncio.create_task(hold(proc.port, kind)) for kind in kinds]
    assert await rerank(proc.url, serve_case.docs) == 200  # served while 30 slow ones hold
    results = await asyncio.gather(*held)
    for kind, (seconds, answer) in zip(kinds, results, strict=True):
        if kind == "slow head":  # closed without an answer: no request was made
            assert answer == b"" and 0.9 <= seconds < 4.0, (kind, seconds)
        else:  # the request is refused once its body is late, and the connection closed
            assert answer.startswith(b"HTTP/1.1 408") and 1.9 <= seconds < 5.0, (kind, seconds)
            assert b"connection: close" in answer.lower()
    assert await rerank(proc.url, serve_case.docs) == 200
    assert proc.stop() == 0
    assert not problems(proc.log) and len(proc.log) < 15, "".join(proc.log)


async def test_more_slow_clients_than_open_files_hold_nothing(
    scripted_server, serve_process, serve_case
) -> None:
    """Under an open-file limit of 160, 200 slow connections: before, the server took every
    connection it could, then logged a traceback for each failed accept, and real clients
    timed out. Now it holds at most what the limit leaves (the longest idle connections are
    closed to make room) and real clients are served."""
    upstream = scripted_server(serve_case.responder)
    proc = serve_process(*serve_case.flags(upstream, "-m", "2", "--concurrency", "4"), nofile=160)
    kinds = [kind for kind in SLOW for _ in range(67)]
    held = [asyncio.create_task(hold(proc.port, kind, limit=6.0)) for kind in kinds]
    await asyncio.sleep(0)
    served = [await rerank(proc.url, serve_case.docs) for _ in range(3)]
    metrics = httpx.get(f"{proc.url}/metrics", timeout=20).text.splitlines()
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)
    assert proc.stop() == 0
    assert served == [200, 200, 200]
    assert not problems(proc.log) and len(proc.log) < 15, "".join(proc.log[:20])
    held_now = [x for x in metrics if x.startswith("permsc_serve_connections_open ")]
    assert float(held_now[0].split()[1]) <= 160 - 64 - 4  # the limit, less upstream and files
    assert any(x.startswith('permsc_serve_slow_clients_total{reason="evicted"}') for x in metrics)
