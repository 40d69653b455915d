"""How many HTTP clients should one event loop spread its calls over, and does aiohttp's
transport beat them? (section "client-shards")

One httpcore connection pool scans every connection for each waiting request, so its CPU cost
per call grows with the calls in flight; the openai backend spreads calls over up to
``client_shards`` clients, adding one every ``grow_every`` calls (backends/openai.py). This
ranks one list with the blocks strategy without screening (window 20, m = 20: 120 calls at
n = 100, 1,020 at n = 1000, all at once in the first round) against the scripted server in
its own process (answers after L seconds, the paper's noise model), for each setting in
turn, twice, and
reports wall time in units of L and the client process's CPU seconds, with ratios to the
first setting (the old default). The last setting is ``http="aiohttp"``: the SDK's aiohttp
transport, one client a loop.

    python benchmarks/client_shards.py            # about 2 minutes
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402
from strategies import items, server_process  # noqa: E402

import permsc_integrations.backends.openai._backend as openai_backend  # noqa: E402
from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.strategies import Blocks  # noqa: E402

# (http, client_shards, grow_every); the first: the old default; aiohttp: one client a loop
SETTINGS = (("httpx", 8, 64), ("httpx", 16, 16), ("httpx", 32, 16), ("aiohttp", 1, 16))
SHARDS = openai_backend.Shards


def once(
    url: str, n: int, http: str, shards: int, grow: int, latency: float
) -> tuple[float, float]:
    """Wall time (x L) and client CPU seconds of one blocks ranking of n items."""
    openai_backend.Shards = functools.partial(SHARDS, grow_every=grow)  # type: ignore[misc]
    options = {"base_url": url, "client_shards": shards, "http": http}
    with PSCRanker(
        "openai:m",
        strategy=Blocks(screen_to=10**6),  # no screening: all of a long list's calls at once
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
    stack = ExitStack()
    lines = [
        "## HTTP clients: one event loop's calls over several httpx clients, or aiohttp\n",
        f"The blocks strategy (window 20, m = 20) against the scripted server in its own process, "
        f"L = {args.latency} s; each setting in turn, {args.repeats} runs each, means shown. "
        "*CPU*: the client process's CPU seconds. Ratios: to the first row of each n.\n",
        "| n | calls | http | client_shards | grow_every | wall (x L) | CPU s | wall ratio "
        "| CPU ratio |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    try:
        url = stack.enter_context(server_process(args.latency))
        for n in (int(k) for k in args.sizes.split(",")):
            runs = {
                s: [once(url, n, *s, args.latency) for _ in range(args.repeats)] for s in SETTINGS
            }
            base = [statistics.fmean(r[i] for r in runs[SETTINGS[0]]) for i in (0, 1)]
            for (http, shards, grow), rows in runs.items():
                wall, cpu = (statistics.fmean(r[i] for r in rows) for i in (0, 1))
                calls = 20 * -(-n // 20) + 20
                lines.append(
                    f"| {n} | {calls} | {http} | {shards} | {grow} | {wall:.1f} | {cpu:.2f} | "
                    f"{wall / base[0]:.2f} | {cpu / base[1]:.2f} |"
                )
                print(lines[-1], flush=True)  # noqa: T201
    finally:
        openai_backend.Shards = SHARDS  # type: ignore[misc]
        stack.close()
    write_section("client-shards", "\n".join(lines))


if __name__ == "__main__":
    main()
