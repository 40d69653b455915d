"""The engine's own CPU per call, without HTTP (section "engine-cpu").

An in-process backend answers every prompt at once with the shown order, so the CPU left is
the engine's: prompts, parsing, retries' bookkeeping, events, picking a round's head.
One blocks ranking of 1,000 items (m = 20, window 20: 370 calls), side by side:

- *now*: passages cleaned once per text (cached);
- *uncached passages*: every prompt cleans its passages again (as before the cache).

Reports the event loop thread's CPU per ranking and per call (the aggregation runs in worker
threads), the median of 5 runs each, and the ratio to *now*.

    python benchmarks/engine_cpu.py     # about 30 seconds
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402
from strategies import items  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.backends.base import Completion  # noqa: E402
from permsc_integrations.prompts import _rankgpt as rankgpt  # noqa: E402
from permsc_integrations.prompts import _truncate as truncate


class Instant:
    """Answers at once: the passages in the order shown."""

    name = "instant"

    async def acomplete(self, messages: Any, settings: Any) -> Completion:
        shown = sum(1 for m in messages if m["role"] == "user" and m["content"].startswith("["))
        await asyncio.sleep(0)
        return Completion(text=" > ".join(f"[{i}]" for i in range(1, shown + 1)))

    async def aclose(self) -> None:
        pass


@contextmanager
def uncached() -> Iterator[None]:
    cached = rankgpt.clean_passage
    rankgpt.clean_passage = truncate.clean_passage.__wrapped__  # type: ignore[attr-defined]
    try:
        yield
    finally:
        rankgpt.clean_passage = cached


async def per_call(runs: int = 5) -> tuple[float, float]:
    """Median main-thread CPU ms per ranking, and calls per ranking."""
    texts = items(1000)
    async with PSCRanker(
        Instant(), strategy="blocks", aggregator="borda", max_concurrency=4096
    ) as ranker:
        await ranker.arank("warm-up", texts)
        costs, calls = [], 0
        for k in range(runs):
            truncate.clean_passage.cache_clear()
            cpu = time.thread_time()
            result = await ranker.arank(f"query {k}", texts)
            costs.append(1000 * (time.thread_time() - cpu))
            calls = result.usage.calls
    return statistics.median(costs), calls


def main() -> None:
    now = asyncio.run(per_call())
    with uncached():
        plain = asyncio.run(per_call())
    lines = [
        "An in-process backend answering at once; one blocks ranking of 1,000 items (Borda, "
        "m = 20, window 20), median of 5 runs; CPU of the event loop's thread.",
        "",
        "| engine | calls | CPU ms per ranking | per call | ratio to now |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, (ms, calls) in (("now", now), ("uncached passages", plain)):
        lines.append(f"| {name} | {calls} | {ms:.0f} | {ms / calls:.2f} | {ms / now[0]:.2f} |")
        print(lines[-1], flush=True)  # noqa: T201
    write_section("engine-cpu", "\n".join(lines))


if __name__ == "__main__":
    main()
