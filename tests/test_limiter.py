"""CallLimiter: one cap across threads and event loops, and one ranker shared by sync code,
async code and threads at once (the real openai client against the loopback server)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.testing import Reply

pytestmark = pytest.mark.timeout(60)


class Gauge:
    """Holders in flight, counted across threads."""

    def __init__(self) -> None:
        self.now = self.peak = self.done = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1


def test_the_cap_holds_across_threads_and_event_loops() -> None:
    limiter, gauge = CallLimiter(3), Gauge()

    async def hold() -> None:
        async with limiter:
            gauge.enter()
            while gauge.peak < 3:  # leave once the cap was reached (a wrong cap: a hang)
                await asyncio.sleep(0.001)
            gauge.leave()

    async def many() -> None:
        await asyncio.gather(*(hold() for _ in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(many(),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert gauge.done == 40 and gauge.peak == 3
    assert limiter.borrowed_tokens == 0


async def test_a_cancelled_waiter_holds_nothing() -> None:
    limiter = CallLimiter(1)
    await limiter.acquire()
    waiter = asyncio.ensure_future(limiter.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limiter.release()
    assert limiter.borrowed_tokens == 0
    await asyncio.wait_for(limiter.acquire(), 1)  # the slot is free, not lost
    limiter.release()


async def test_a_waiter_cancelled_after_being_handed_the_slot_passes_it_on() -> None:
    limiter = CallLimiter(1)
    await limiter.acquire()
    first = asyncio.ensure_future(limiter.acquire())
    second = asyncio.ensure_future(limiter.acquire())
    await asyncio.sleep(0)
    limiter.release()  # hands the slot to `first`, on its loop, later
    first.cancel()  # ... which leaves before it wakes
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)  # so the slot went on to `second`
    assert limiter.borrowed_tokens == 1
    limiter.release()
    assert limiter.borrowed_tokens == 0


def test_a_waiter_whose_loop_ended_is_skipped() -> None:
    limiter = CallLimiter(1)
    asyncio.run(limiter.acquire())  # held by a loop that is now closed

    async def abandon() -> None:  # asyncio.run cancels this waiter as its loop shuts down
        asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)

    asyncio.run(abandon())
    limiter.release()
    assert limiter.borrowed_tokens == 0


def test_bad_sizes_and_unmatched_releases_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="total_tokens"):
        CallLimiter(0)
    with pytest.raises(RuntimeError, match="without a matching acquire"):
        CallLimiter(1).release()


def test_one_ranker_from_sync_threads_and_event_loops_at_once(scripted_server, until) -> None:
    """3 sync threads (the bridge's loop) + 3 threads with their own loops, cap 2, m=8:
    every request completes and the server never sees more than 2 calls at once."""

    async def once_two_arrived(request) -> Reply:  # the cap, reached
        await until(lambda: server.max_in_flight >= 2)
        return Reply("[2] > [1] > [3] > [4]")

    server = scripted_server(once_two_arrived)
    items4 = ["a", "b", "c", "d"]  # 24 orders: the 8 shuffles are 8 distinct calls
    ranker = PSCRanker(
        "openai:m",
        num_permutations=8,
        max_concurrency=2,
        backend_options={"base_url": server.base_url},
    )
    results: list[tuple[int, ...]] = []
    lock = threading.Lock()

    def keep(order: tuple[int, ...]) -> None:
        with lock:
            results.append(order)

    def sync_caller() -> None:
        keep(ranker.rank("q", items4).order)

    def async_caller() -> None:
        async def main() -> None:
            keep((await ranker.arank("q", items4)).order)

        asyncio.run(main())

    threads = [threading.Thread(target=f) for f in [sync_caller, async_caller] * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(45)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert len(results) == 6 and server.request_count == 6 * 8
    assert server.max_in_flight == 2
    ranker.close()
