"""Sending each call as it is built, or building a round's calls first (section "send-order").

A round of blocks starts all its calls at once. Started as plain tasks, every request of the
round was built (prompt, SDK request, headers) before the first one was written to its
socket, so the first answer came back one latency after the *last* request was built, and
all the answers arrived together to be read. Now the engine yields once after starting each
call (``sampling._yield_to_started_call``), so each request goes out before the next is built
and the answers come back spread over the same interval.

Side by side in one run, alternating list by list: the scripted server of
benchmarks/strategies.py (its own process, latency L), the default blocks strategy, m = 20,
window 20, top 10; *before* is the engine with that yield replaced by nothing.

    python benchmarks/send_order.py     # about a minute
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402
from strategies import client_stack, items, server_process  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations._run import sampling  # noqa: E402


async def _nothing() -> None:
    return None


@contextmanager
def built_first() -> Iterator[None]:
    """The engine as before: no yield between starting a round's calls."""
    now: Callable[[], Awaitable[None]] = sampling._yield_to_started_call
    sampling._yield_to_started_call = _nothing  # type: ignore[assignment]
    try:
        yield
    finally:
        sampling._yield_to_started_call = now  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--lists", type=int, default=4, help="lists per size and variant")
    args = ap.parse_args()
    lines = [
        f"L = {args.latency} s; default blocks, m = 20, window 20, top_k=10; {args.lists} lists "
        f"per cell, the two variants alternating; client: {client_stack()}.",
        "",
        "| n | calls | sent as built (x L) | built first (x L) | ratio |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    with server_process(args.latency) as url:
        options = {"base_url": url}
        with PSCRanker(
            "openai:m",
            num_permutations=20,
            top_k=10,
            max_concurrency=4096,
            backend_options=options,
        ) as ranker:
            ranker.rank("warm-up", items(1000))
            for n in (100, 1000):
                walls: dict[str, list[float]] = {"now": [], "before": []}
                calls = 0
                for q in range(2 * args.lists):
                    variant = "before" if q % 2 else "now"
                    with built_first() if variant == "before" else nullcontext():
                        began = time.perf_counter()
                        calls = ranker.rank(f"query {q}", items(n)).usage.calls
                    walls[variant].append((time.perf_counter() - began) / args.latency)
                now, before = (statistics.fmean(walls[k]) for k in ("now", "before"))
                lines.append(f"| {n} | {calls} | {now:.2f} | {before:.2f} | {before / now:.2f} |")
                sys.stdout.write(lines[-1] + "\n")
                sys.stdout.flush()
    write_section("send-order", "\n".join(lines))


if __name__ == "__main__":
    main()
