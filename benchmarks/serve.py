"""permsc serve against PSCRanker called directly, behind a scripted upstream of latency L.

The scripted OpenAI-compatible server runs in its own process and answers every call
correctly after L seconds; ``permsc serve`` runs in another, as users run it. Side by side:

* (a) one request of 10 documents, m=20, L=1 s: the server's latency (a client's POST) against
  ``PSCRanker.arank`` in this process, interleaved; target: server <= 1.05 x library;
* (b) 500 concurrent client requests, m=6, L=1 s, the ranker's cap C=100: the share of the
  concurrency bound (requests x m / C x L) reached (target >= 85 %), errors, p50/p99 latency;
* (c) the server process's CPU time per request (user + system, from /proc), in (a) and (b).

    python benchmarks/serve.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
from _report import write_section

from permsc_integrations import PSCRanker

N_ITEMS = 10


def grade(text: str) -> int:
    return int(re.search(r"grade (\d+)", text).group(1))  # type: ignore[union-attr]


def upstream(latency: float) -> None:
    """Subprocess mode: serve oracle answers after ``latency`` s until stdin closes."""
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    with ScriptedOpenAIServer(oracle_responder(grade, delay=latency)) as server:
        sys.stdout.write(server.base_url + "\n")
        sys.stdout.flush()
        sys.stdin.read()


class Upstream:
    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--upstream", str(latency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=30)


class Serve:
    """``permsc serve`` in its own process, on a free port."""

    def __init__(self, base_url: str, m: int, cap: int) -> None:
        flags = ["--backend", "openai:bench", "--base-url", base_url, "-m", str(m)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "permsc_integrations.cli", "serve", "--port", "0", *flags,
             "--concurrency", str(cap), "--log-level", "info"],
            env={**os.environ, "OPENAI_API_KEY": "sk-bench"},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for line in self.proc.stderr:  # type: ignore[union-attr]
            if "listening on" in line:
                self.url = f"http://127.0.0.1:{int(line.rsplit(':', 1)[1])}"
                break
        else:
            raise RuntimeError("permsc serve did not start")
        self.log: list[str] = []  # keep draining stderr so the server never blocks on it
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def cpu_s(self) -> float:
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=60)


def documents(seed: int) -> list[str]:
    grades = random.Random(seed).sample(range(100), N_ITEMS)
    return [f"passage {k} about the topic, grade {g}" for k, g in enumerate(grades)]


def body(seed: int) -> dict[str, Any]:
    return {"model": "permsc", "query": f"q{seed}", "documents": documents(seed)}


async def single(up: Upstream, m: int, repeats: int) -> dict[str, Any]:
    """(a): one request at a time, server and library interleaved, after one warm-up each."""
    server = Serve(up.base_url, m, cap=m)
    options = {"base_url": up.base_url, "api_key": "sk-bench"}
    out: dict[str, Any] = {"server": [], "library": []}
    try:
        async with httpx.AsyncClient(timeout=120) as client, PSCRanker(
            "openai:bench", backend_options=options, num_permutations=m, max_concurrency=m
        ) as ranker:
            await client.post(f"{server.url}/v2/rerank", json=body(0))
            await ranker.arank("q0", documents(0))
            cpu = server.cpu_s()
            for r in range(1, repeats + 1):
                started = time.perf_counter()
                answer = await client.post(f"{server.url}/v2/rerank", json=body(r))
                out["server"].append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
                started = time.perf_counter()
                await ranker.arank(f"q{r}", documents(r))
                out["library"].append(time.perf_counter() - started)
            out["cpu_per_request"] = (server.cpu_s() - cpu) / repeats
    finally:
        out["exit"] = server.close()
    return out


async def burst(up: Upstream, requests: int, m: int, cap: int, latency: float) -> dict[str, Any]:
    """(b): ``requests`` clients at once, one connection each."""
    server = Serve(up.base_url, m, cap)
    limits = httpx.Limits(max_connections=requests, max_keepalive_connections=requests)
    latencies: list[float] = []
    errors: list[str] = []
    try:
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            await client.post(f"{server.url}/v2/rerank", json=body(0))

            async def one(k: int) -> None:
                started = time.perf_counter()
                try:
                    answer = await client.post(f"{server.url}/v2/rerank", json=body(k))
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                    return
                if answer.status_code != 200:
                    errors.append(str(answer.status_code))
                latencies.append(time.perf_counter() - started)

            cpu = server.cpu_s()
            started = time.perf_counter()
            await asyncio.gather(*(one(k) for k in range(1, requests + 1)))
            wall = time.perf_counter() - started
            cpu_per_request = (server.cpu_s() - cpu) / requests
    finally:
        exit_code = server.close()
    bound = requests * m / cap * latency
    latencies.sort()
    return {
        "wall": wall,
        "bound": bound,
        "share": bound / wall,
        "errors": errors,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "cpu_per_request": cpu_per_request,
        "exit": exit_code,
    }


async def burst_library(up: Upstream, requests: int, m: int, cap: int) -> float:
    """(b) without the server: the same requests as concurrent ``arank`` calls here."""
    options = {"base_url": up.base_url, "api_key": "sk-bench"}
    async with PSCRanker(
        "openai:bench", backend_options=options, num_permutations=m, max_concurrency=cap
    ) as ranker:
        await ranker.arank("q0", documents(0))
        started = time.perf_counter()
        await asyncio.gather(*(ranker.arank(f"q{k}", documents(k)) for k in range(1, requests + 1)))
        return time.perf_counter() - started


def report(a: dict[str, Any], b: dict[str, Any], args: argparse.Namespace) -> str:
    srv, lib = statistics.median(a["server"]), statistics.median(a["library"])
    errors = len(b["errors"])
    return "\n".join([
        "## permsc serve (benchmarks/serve.py)",
        "",
        f"Scripted upstream in its own process (oracle answers after L = {args.latency} s), "
        "`permsc serve` in another, clients in this one.",
        "",
        "| measure | result | target |",
        "| --- | --- | --- |",
        f"| (a) one request, {N_ITEMS} documents, m = {args.m_single}: server / library "
        f"(medians of {args.repeats}, interleaved) | {srv:.3f} s / {lib:.3f} s = "
        f"**{srv / lib:.3f}** | <= 1.05 |",
        f"| (b) {args.requests} concurrent requests, m = {args.m_many}, cap C = {args.cap}: "
        f"wall vs the bound requests x m / C x L = {b['bound']:.0f} s | {b['wall']:.1f} s: "
        f"**{100 * b['share']:.1f} %** of the bound | >= 85 % |",
        f"| (b) the same requests as concurrent `arank` calls, no server | "
        f"{b['library_wall']:.1f} s: {100 * b['bound'] / b['library_wall']:.1f} % of the bound; "
        f"server / library wall **{b['wall'] / b['library_wall']:.2f}** | |",
        f"| (b) errors | {errors} {sorted(set(b['errors'])) if errors else ''} | 0 |",
        f"| (b) client latency p50 / p99 | {b['p50']:.1f} s / {b['p99']:.1f} s | |",
        f"| (c) server CPU per request: (a) m = {args.m_single} / (b) m = {args.m_many} | "
        f"{1000 * a['cpu_per_request']:.1f} ms / {1000 * b['cpu_per_request']:.1f} ms | |",
        f"| exit status after SIGTERM | {a['exit']}, {b['exit']} | 0 |",
        "",
        f"Load average (1 min) at the start and the end: {args.load[0]:.1f}, "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other jobs share this machine).",
        "",
        "Reading it: the bound assumes the C slots are always full and cost no CPU. Here the "
        "upstream (one process answering every call), the server and the clients share the "
        "machine's cores, so CPU is what limits (b): the same requests as `arank` calls in "
        "one process, with no HTTP in front, reach the share in the row below (b); the gap "
        "between the two is the server's cost, its CPU per request (c): parsing and answering "
        "the client's HTTP besides the engine's work per call. Requests queue for the cap "
        "(per key first, then first come first served), so p99 is close to the whole run. "
        "(a) is the latency a single caller sees: the server adds one local HTTP round trip.",
    ])


async def main(args: argparse.Namespace) -> None:
    args.load = os.getloadavg()
    up = Upstream(args.latency)
    try:
        a = await single(up, args.m_single, args.repeats)
        b = await burst(up, args.requests, args.m_many, args.cap, args.latency)
        b["library_wall"] = await burst_library(up, args.requests, args.m_many, args.cap)
    finally:
        up.close()
    text = report(a, b, args)
    print(text)  # noqa: T201 - a benchmark reports on stdout
    if not args.quick:
        write_section("serve", text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="small sizes; docs not written")
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    if args.upstream is not None:
        upstream(args.upstream)
        sys.exit(0)
    args.m_single, args.repeats = 20, (3 if args.quick else 7)
    args.requests, args.m_many, args.cap = (50, 6, 100) if args.quick else (500, 6, 100)
    asyncio.run(main(args))
