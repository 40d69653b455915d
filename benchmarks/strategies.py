"""Sliding window vs blocks, side by side in one run: wall time in units of L, calls, quality.

The scripted OpenAI-compatible server answers every call after ``L`` seconds, from its own
process (the real openai client over loopback, enough concurrency for every call of a
round; the client's CPU per call is part of the wall time, the server's is not). Its model is the
paper's noise model with a documented position bias (``noisy_responder``): each answer keeps a
random share ``keep`` of the true order in place and shuffles the rest, items shown first or
last taking the better free places (``position_bias``). Quality: Kendall tau of the whole
order, precision of the top 10 and nDCG@10 against the true relevance (graded 3/2/1/0 by
quartile of the truth).

Run: ``.venv/bin/python benchmarks/strategies.py`` (about 5 minutes; ``--quick``: 1 minute).
Writes the "strategies" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.metrics import kendall_tau, ndcg_at_k  # noqa: E402
from permsc_integrations.strategies import Blocks  # noqa: E402
from permsc_integrations.testing import Reply, ScriptedOpenAIServer, noisy_responder  # noqa: E402

STRATEGIES: dict[str, tuple[str | Blocks, str]] = {  # name: (strategy, the backend's http)
    "sliding": ("sliding", "httpx"),
    "blocks": ("blocks", "httpx"),
    "blocks, head 2 windows": (Blocks(head_windows=2), "httpx"),
    "blocks, head by Kemeny": (Blocks(head_by="kemeny"), "httpx"),
    "blocks, no screening": (Blocks(screen_to=10**6), "httpx"),
    "blocks, http=aiohttp": ("blocks", "aiohttp"),
    "blocks, screen 4 shuffles": (Blocks(screen_shuffles=4), "httpx"),
    "blocks, screen 3 shuffles": (Blocks(screen_shuffles=3), "httpx"),
}


def items(n: int) -> list[str]:
    """n items whose true relevance is their number of x's (all distinct)."""
    return [f"item {k} " + "x" * ((k * 7919) % n + 1) for k in range(n)]


def relevance(text: str) -> float:
    return float(text.count("x"))


def quality(order: tuple[int, ...], texts: list[str]) -> tuple[float, float, float]:
    truth = sorted(range(len(texts)), key=lambda i: -relevance(texts[i]))
    grades = {str(i): 3 - 4 * rank // len(texts) for rank, i in enumerate(truth)}
    top = len(set(order[:10]) & set(truth[:10])) / 10
    return kendall_tau(order, truth), top, ndcg_at_k([str(i) for i in order], grades, 10)


def measure(
    url: str,
    latency: float,
    n: int,
    m: int,
    strategy: str | Blocks,
    http: str,
    top_k: int | None,
    lists: int,
) -> dict[str, float]:
    opts = dict(
        num_permutations=m,
        strategy=strategy,
        window_size=20,
        step=10,
        top_k=top_k,
        max_concurrency=4096,
        backend_options={"base_url": url, "http": http},
    )
    rows = []
    with PSCRanker("openai:m", **opts) as ranker:
        for q in range(lists):
            texts = items(n)
            began = time.perf_counter()
            result = ranker.rank(f"query {q}", texts)
            wall = (time.perf_counter() - began) / latency
            rows.append((wall, result.usage.calls, *quality(result.order, texts)))
    return {
        k: statistics.fmean(r[i] for r in rows)
        for i, k in enumerate(("wall_L", "calls", "tau", "p10", "ndcg10"))
    }


def serve(latency: float, urls: Any, stop: Any) -> None:
    """The scripted server with the noise model, answering after ``latency`` s (a process)."""
    model = noisy_responder(relevance, keep=0.7, position_bias=0.5, seed=3)
    with ScriptedOpenAIServer(lambda request: Reply(model(request).text, delay=latency)) as s:
        urls.put(s.base_url)
        stop.wait()


@contextmanager
def server_process(latency: float) -> Iterator[str]:
    """The base URL of :func:`serve` running in its own process."""
    ctx = mp.get_context("fork")
    urls, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=serve, args=(latency, urls, stop))
    server.start()
    try:
        yield urls.get()
    finally:
        stop.set()
        server.join()


def client_stack() -> str:
    """The openai SDK and the HTTP library under it, with their versions."""
    http = "httpx2" if _version("openai").startswith("3") else "httpx"
    return ", ".join(f"{name} {_version(name)}" for name in ("openai", http))


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--latency", type=float, default=0.25, help="L, seconds per call")
    ap.add_argument("--lists", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", help="list lengths, e.g. 100,1000 (default: the full grid)")
    ap.add_argument("--ms", help="values of m, e.g. 20")
    ap.add_argument("--only", help="strategy rows by name, separated by | (default: all)")
    ap.add_argument("--section", default="strategies", help="docs/benchmarks.md section")
    args = ap.parse_args()
    sizes = [20, 50, 100] if args.quick else [20, 50, 100, 200, 1000]
    ms = [5, 20] if args.quick else [5, 10, 20]
    sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else sizes
    ms = [int(m) for m in args.ms.split(",")] if args.ms else ms
    lines = [
        f"L = {args.latency} s per call; noise model keep=0.7, position_bias=0.5; "
        f"{args.lists} lists per cell; window 20, step 10; top_k=10 for n=1000 (sliding: "
        "passes until the top 10 is settled; blocks: the head window, or blocks over the top two "
        "windows). Blocks screen a list longer than 5 windows with 5 shuffles first (no "
        f"screening: every round m shuffles). Client: {client_stack()}.",
        "",
        "| n | m | strategy | wall (x L) | calls | Kendall tau | P@10 | nDCG@10 |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    with server_process(args.latency) as url:
        for n in sizes:
            for m in ms:
                top_k = 10 if n >= 1000 else None
                for name, (strategy, http) in STRATEGIES.items():
                    if args.only and name not in args.only.split("|"):
                        continue
                    r = measure(url, args.latency, n, m, strategy, http, top_k, args.lists)
                    lines.append(
                        f"| {n} | {m} | {name} | {r['wall_L']:.1f} | {r['calls']:.0f} | "
                        f"{r['tau']:.3f} | {r['p10']:.2f} | {r['ndcg10']:.3f} |"
                    )
                    sys.stdout.write(lines[-1] + "\n")
                    sys.stdout.flush()
    write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
