"""How many HTTP clients should one event loop spread its calls over? (section "client-shards")

One httpcore connection pool scans every connection for each waiting request, so its CPU cost
per call grows with the calls in flight; the openai backend spreads calls over up to
``client_shards`` clients, adding one every ``grow_every`` calls (backends/openai.py). This
ranks one list with the blocks strategy (window 20, m = 20: 120 calls at n = 100, 1,020 at
n = 1000, all at once in the first round) against the scripted server in its own process
(answers after L seconds, the paper's noise model), for each setting in turn, twice, and
reports wall time in units of L and the client process's CPU seconds, with ratios to the
first setting (the old default).

    python benchmarks/client_shards.py            # about 2 minutes
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402
from strategies import items, relevance  # noqa: E402

import permsc_integrations.backends.openai as openai_backend  # noqa: E402
from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.testing import Reply, ScriptedOpenAIServer, noisy_responder  # noqa: E402

SETTINGS = ((8, 64), (16, 16), (32, 16))  # (client_shards, grow_every); the first: before
SHARDS = openai_backend._Shards


def serve(latency: float, urls: Any, stop: Any) -> None:
    model = noisy_responder(relevance, keep=0.7, position_bias=0.5, seed=3)
    with ScriptedOpenAIServer(lambda request: Reply(model(request).text, delay=latency)) as s:
        urls.put(s.base_url)
        stop.wait()


def once(url: str, n: int, shards: int, grow: int, latency: float) -> tuple[float, float]:
    """Wall time (x L) and client CPU seconds of one blocks ranking of n items."""
    openai_backend._Shards = functools.partial(SHARDS, grow_every=grow)  # type: ignore[misc]
    options = {"base_url": url, "client_shards": shards}
    with PSCRanker(
        "openai:m",
        strategy="blocks",
        num_permutations=20,
        window_size=20,
        top_k=10,
        max_concurrency=4096,
        backend_options=options,
    ) as ranker:
        wall, cpu = time.perf_counter(), time.process_time()
        ranker.rank("query", items(n))
        return (time.perf_counter() - wall) / latency, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    ctx = mp.get_context("fork")
    urls, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=serve, args=(args.latency, urls, stop))
    server.start()
    url = urls.get()
    lines = [
        "## Client shards: one event loop's calls over several HTTP clients\n",
        f"The blocks strategy (window 20, m = 20) against the scripted server in its own process, "
        f"L = {args.latency} s; each setting in turn, {args.repeats} runs each, means shown. "
        "*CPU*: the client process's CPU seconds. Ratios: to the first row of each n.\n",
        "| n | calls | client_shards | grow_every | wall (x L) | CPU s | wall ratio | CPU ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    try:
        for n in (int(k) for k in args.sizes.split(",")):
            runs = {
                s: [once(url, n, *s, args.latency) for _ in range(args.repeats)] for s in SETTINGS
            }
            base = [statistics.fmean(r[i] for r in runs[SETTINGS[0]]) for i in (0, 1)]
            for (shards, grow), rows in runs.items():
                wall, cpu = (statistics.fmean(r[i] for r in rows) for i in (0, 1))
                calls = 20 * -(-n // 20) + 20
                lines.append(
                    f"| {n} | {calls} | {shards} | {grow} | {wall:.1f} | {cpu:.2f} | "
                    f"{wall / base[0]:.2f} | {cpu / base[1]:.2f} |"
                )
                print(lines[-1], flush=True)  # noqa: T201
    finally:
        openai_backend._Shards = SHARDS  # type: ignore[misc]
        stop.set()
        server.join()
    write_section("client-shards", "\n".join(lines))


if __name__ == "__main__":
    main()
