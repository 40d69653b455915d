"""Slow clients against ``permsc serve``: what they hold, and whether real clients get through.

On loopback only, bounded in time, and stopping by itself. Each server variant runs in its own
process under an open-file limit of ``--nofile`` (1,024, as ``ulimit -n 1024``), behind a scripted
upstream in another process. This process opens ``--slow`` connections (a third each):

* slow head: a request head that never ends, one byte every ``--trickle`` s;
* slow body: a complete head (``Content-Length: 1000000``), then the body one byte at a time;
* endless chunked: ``Transfer-Encoding: chunked``, then chunks one byte at a time, forever;

and reopens each one the server closes, so the attack keeps ``--slow`` connections for the
whole ``--hold`` seconds. Meanwhile a real client sends one rerank request a second (a new
connection each, 10 s timeout). Reported per variant: the real requests answered, their
latency, the slow connections the server closed (and after how long), the server's log.

Variants (side by side in one run):

* ``main``: the code of ``--baseline PATH`` (a checkout of an older commit), if given;
* ``uvicorn-limits``: this checkout's app under stock uvicorn with its own limits
  (``limit_concurrency``, ``timeout_keep_alive=5``), no connection guard;
* ``guard``: ``permsc serve`` as shipped (its connection guard and deadlines);
* ``guard (no attack)``: the same with no slow clients, for the real requests' latency.

Also reported: the most files the server held (sampled each second from /proc) and the CPU
seconds it spent during the hold.

    python benchmarks/serve_slowloris.py [--hold 60] [--baseline /path/to/old/checkout]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _report import write_section

ROOT = Path(__file__).resolve().parents[1]
HEAD = b"POST /v2/rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
SHAPES = {  # what each kind sends at once, then what it trickles (cycled), one byte a time
    "slow head": (HEAD, b"X-Slow: a\r\n"),
    "slow body": (HEAD + b"Content-Length: 1000000\r\n\r\n", b'{"query": "x" '),
    "endless chunked": (HEAD + b"Transfer-Encoding: chunked\r\n\r\n", b"1\r\nx\r\n"),
}
BODY = {"model": "permsc", "query": "goldfish", "documents": ["Goldfish grow.", "Cats purr."]}


def upstream() -> None:
    """Subprocess mode: a scripted upstream (answers after 50 ms) until stdin closes."""
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    with ScriptedOpenAIServer(oracle_responder(lambda t: t.count("oldfish"), delay=0.05)) as s:
        sys.stdout.write(s.base_url + "\n")
        sys.stdout.flush()
        sys.stdin.read()


def uvicorn_limits(base_url: str) -> None:
    """Subprocess mode: this checkout's app under stock uvicorn and its own limits."""
    import logging

    import uvicorn

    from permsc_integrations.serve import ModelConfig, ServeConfig
    from permsc_integrations.serve._app import create_app
    from permsc_integrations.serve._run import bind

    logging.basicConfig(level="INFO", format="%(asctime)s %(name)s %(message)s")
    config = ServeConfig(models=(ModelConfig("permsc", "openai:bench", {}, base_url),))
    sock = bind("127.0.0.1", 0)
    logging.getLogger("bench").info("listening on 127.0.0.1:%d", sock.getsockname()[1])
    uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            log_config=None,
            access_log=False,
            lifespan="on",
            limit_concurrency=900,
            timeout_keep_alive=5,
        )
    ).run(sockets=[sock])


def nofile(limit: int) -> Any:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


class Server:
    """One variant in its own process under the open-file limit; stderr to a file."""

    def __init__(self, variant: str, base_url: str, args: argparse.Namespace, log: Path) -> None:
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench"}
        serve = [
            sys.executable,
            "-m",
            "permsc_integrations.cli",
            "serve",
            "--port",
            "0",
            "--backend",
            "openai:bench",
            "--base-url",
            base_url,
            "-m",
            "4",
        ]
        env["PYTHONPATH"] = str(args.baseline if variant == "main" else ROOT)
        if variant == "main":
            command = serve
        elif variant == "uvicorn-limits":
            command = [sys.executable, __file__, "--uvicorn-limits", base_url]
        else:
            command = serve
        self.log = log
        self.err = log.open("w")
        self.proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.err,
            preexec_fn=nofile(args.nofile),
        )
        deadline = time.monotonic() + 60
        while "listening on" not in log.read_text():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{variant} did not start:\n{log.read_text()}")
            time.sleep(0.05)
        line = next(x for x in log.read_text().splitlines() if "listening on" in x)
        self.port = int(line.rsplit(":", 1)[1])

    def close(self) -> int:
        self.proc.terminate()
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.err.close()
        return code


@dataclass
class Tally:
    opened: Counter[str] = field(default_factory=Counter)
    cut: dict[str, list[float]] = field(default_factory=dict)
    answered: list[tuple[int | str, float]] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)  # the server's open files, each second


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def slow_client(port: int, kind: str, trickle: float, tally: Tally, end: float) -> None:
    """Keep one slow connection of ``kind`` open until ``end``, reopening it when cut."""
    head, drip = SHAPES[kind]
    while time.monotonic() < end:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
        except (OSError, asyncio.TimeoutError):
            await asyncio.sleep(1)
            continue
        tally.opened[kind] += 1
        opened, k = time.monotonic(), 0
        try:
            writer.write(head)
            while time.monotonic() < end:
                try:
                    data = await asyncio.wait_for(reader.read(65536), trickle)
                except asyncio.TimeoutError:
                    writer.write(drip[k % len(drip) : k % len(drip) + 1])
                    k += 1
                    continue
                if not data:  # the server closed it (after an answer or not)
                    tally.cut.setdefault(kind, []).append(time.monotonic() - opened)
                    break
        except OSError:  # reset by the server
            tally.cut.setdefault(kind, []).append(time.monotonic() - opened)
        finally:
            writer.close()


async def real_client(port: int, pid: int, tally: Tally, end: float) -> None:
    """One rerank request a second, each on a new connection, until ``end``; the server's
    open files counted each second."""

    async def one() -> None:
        started = time.monotonic()
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                answer = await client.post(f"http://127.0.0.1:{port}/v2/rerank", json=BODY)
            tally.answered.append((answer.status_code, time.monotonic() - started))
        except httpx.HTTPError as exc:
            tally.answered.append((type(exc).__name__, time.monotonic() - started))

    tasks = []
    while time.monotonic() < end:
        tasks.append(asyncio.create_task(one()))
        tally.fds.append(open_files(pid))
        await asyncio.sleep(1)
    await asyncio.gather(*tasks)


async def attack(port: int, pid: int, slow: int, args: argparse.Namespace) -> Tally:
    tally = Tally()
    end = time.monotonic() + args.hold
    kinds = list(SHAPES)
    clients = [slow_client(port, kinds[i % 3], args.trickle, tally, end) for i in range(slow)]
    await asyncio.gather(real_client(port, pid, tally, end), *clients)
    return tally


def run_variant(variant: str, base_url: str, args: argparse.Namespace, work: Path) -> dict:
    log = work / f"{variant.replace(' ', '_')}.log"
    quiet = variant.endswith("(no attack)")
    server = Server(variant.split(" ")[0], base_url, args, log)
    try:
        cpu = cpu_seconds(server.proc.pid)
        tally = asyncio.run(attack(server.port, server.proc.pid, 0 if quiet else args.slow, args))
        cpu = cpu_seconds(server.proc.pid) - cpu
        after = httpx.post(f"http://127.0.0.1:{server.port}/v2/rerank", json=BODY, timeout=30)
    finally:
        code = server.close()
    text = log.read_text(errors="replace")
    if args.show_log:
        sys.stderr.write("".join(text.splitlines(keepends=True)[:40]))
        sys.stderr.write(f"{Counter(str(status) for status, _ in tally.answered)}\n")
    ok = [s for status, s in tally.answered if status == 200]
    return {
        "variant": variant,
        "tally": tally,
        "cpu": cpu,
        "ok": ok,
        "after": after.status_code,
        "exit": code,
        "log_bytes": len(text.encode()),
        "log_lines": text.count("\n"),
        "tracebacks": text.count("Traceback"),
        "emfile": text.count("Too many open files"),
    }


def row(r: dict[str, Any]) -> str:
    t: Tally = r["tally"]
    sent = len(t.answered)
    ok = r["ok"]
    latency = f"{statistics.median(ok):.2f} / {max(ok):.2f} s" if ok else "-"
    cuts = "; ".join(
        f"{kind}: {len(t.cut.get(kind, []))} (median {statistics.median(t.cut[kind]):.1f} s)"
        if t.cut.get(kind)
        else f"{kind}: 0"
        for kind in SHAPES
    )
    return (
        f"| {r['variant']} | {len(ok)} / {sent} | {latency} | {cuts} | {max(t.fds, default=0)} | "
        f"{r['cpu']:.1f} s | {r['log_lines']:,} lines, {r['log_bytes'] / 1e6:.2f} MB, "
        f"{r['tracebacks']:,} tracebacks, {r['emfile']:,} EMFILE | {r['after']} |"
    )


READING = (
    "Reading it: asyncio's own server (under uvicorn) accepts every connection until the "
    "process runs out of file descriptors, then logs a traceback for each failed accept, up "
    "to its backlog per wake-up, and real requests wait for a descriptor that slow clients "
    "never give back. uvicorn's own limits do not help: `limit_concurrency` answers 503 at "
    "the cap, to real clients as well, and stops no accept; `timeout_keep_alive` runs only "
    "between requests, and nothing times a request head. So permsc serve accepts connections "
    "itself (serve/_connections.py): it holds at most what the open-file limit leaves, closes "
    "the longest-waiting connection without a request being ranked to make room (after 1 s), "
    "times each request head (`--header-timeout`) and body (`--body-timeout`), and sums the "
    "slow clients up in one log line every 10 s. Slow connections are then cut in about 3 s "
    "(the attack reopens them at once: it is the cap, not the 10 s head deadline, that cuts "
    "them), and a real request waits for one to be closed: its latency under attack."
)


def baseline_commit(path: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or str(path)


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    return "\n".join(
        [
            "## Slow clients against permsc serve (benchmarks/serve_slowloris.py)",
            "",
            f"Loopback. Each server under an open-file limit of {args.nofile}; {args.slow} "
            "slow connections (a third each: a head that never ends, a body of one byte every "
            f"{args.trickle:g} s, an endless chunked body), each reopened when the server "
            f"closes it, held for {args.hold:g} s; meanwhile one real rerank request a second "
            "on a new connection (10 s timeout). *Cut*: slow connections the server closed "
            "during the hold (median seconds from open to close). *After*: a request once the "
            "attack stopped.",
            "",
            "| variant | real requests answered | their latency (median / max) | slow connections "
            "cut | server's open files (max) | server CPU | server log | after |",
            "| --- | ---: | --- | --- | ---: | ---: | --- | --- |",
            *(row(r) for r in results),
            "",
            f"Load average (1 min) at the start and the end: {args.load:.1f}, "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other jobs share this machine)."
            + (f" *main*: commit {baseline_commit(args.baseline)}." if args.baseline else ""),
            "",
            READING,
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hold", type=float, default=60.0)
    ap.add_argument("--slow", type=int, default=1100)
    ap.add_argument("--trickle", type=float, default=5.0)
    ap.add_argument("--nofile", type=int, default=1024)
    ap.add_argument("--baseline", type=Path, help="a checkout of the code to compare against")
    ap.add_argument("--variants", default="main,uvicorn-limits,guard,guard (no attack)")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch the docs")
    ap.add_argument("--show-log", action="store_true", help="the server log's first lines")
    ap.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--uvicorn-limits", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.upstream:
        return upstream()
    if args.uvicorn_limits:
        return uvicorn_limits(args.uvicorn_limits)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.slow + 512)), hard))
    up = subprocess.Popen(
        [sys.executable, __file__, "--upstream"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    base_url = up.stdout.readline().strip()  # type: ignore[union-attr]
    args.load = os.getloadavg()[0]
    variants = [v for v in args.variants.split(",") if v != "main" or args.baseline]
    try:
        with tempfile.TemporaryDirectory(prefix="permsc-slowloris-") as work:
            results = []
            for variant in variants:
                results.append(run_variant(variant, base_url, args, Path(work)))
                sys.stdout.write(row(results[-1]) + "\n")
                sys.stdout.flush()
    finally:
        up.stdin.close()  # type: ignore[union-attr]
        up.wait(30)
    text = report(results, args)
    sys.stdout.write(text + "\n")
    if not args.no_write:
        write_section("serve_slowloris", text)


if __name__ == "__main__":
    main()
