"""The ranker's breaker: a bad key stays open until reset; an exhausted quota is probed again
after the cool-down (one call; the others wait for its outcome). Time is a clock the test
moves, never a sleep."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest

from permsc_integrations import PSCRanker, RankingOptions
from permsc_integrations._calls.breaker import Breaker
from permsc_integrations.errors import (
    AuthenticationError,
    BackendTimeoutError,
    ConfigurationError,
    ModelNotFoundError,
    QuotaExceededError,
)
from permsc_integrations.testing import Fault, Reply, ScriptedBackend, oracle_responder

pytestmark = pytest.mark.timeout(60)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def quota() -> QuotaExceededError:
    return QuotaExceededError("You exceeded your current quota", status_code=429)


async def half_open(clock: Clock) -> tuple[Breaker, Any]:
    """A breaker opened by a quota, its cooldown passed, and the probe it let through."""
    breaker = Breaker(cooldown=60, clock=clock)
    breaker.trip(quota())
    clock.now += 60
    return breaker, await breaker.admit()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_cause_that_cannot_recover_stays_open_until_reset(clock: Clock) -> None:
    breaker = Breaker(cooldown=60, clock=clock)
    for error in (AuthenticationError("bad key", status_code=401), ModelNotFoundError("no")):
        breaker.trip(error)
        clock.now += 10**6
        assert breaker.state == "open"
        with pytest.raises(type(error), match="bad key|no") as refused:
            breaker.check()
        assert "reset_breaker()" in refused.value.__notes__[0]
        assert refused.value is not error and refused.value.usage is None
        breaker.reset()
        assert breaker.state == "closed" and breaker.error is None
        breaker.check()  # closed: nothing raised


def test_an_error_that_does_not_trip_leaves_it_closed(clock: Clock) -> None:
    breaker = Breaker(clock=clock)
    breaker.trip(BackendTimeoutError("slow"))
    assert breaker.state == "closed"


async def test_a_quota_is_refused_for_the_cooldown_then_probed_once(clock: Clock) -> None:
    breaker = Breaker(cooldown=60, clock=clock)
    breaker.trip(quota())
    clock.now += 30
    with pytest.raises(QuotaExceededError) as refused:
        await breaker.admit()
    assert "probes the upstream again in 30 s" in refused.value.__notes__[0]
    assert refused.value.retry_after == 30  # seconds until the probe may go
    clock.now += 29.9
    with pytest.raises(QuotaExceededError):
        breaker.check()
    clock.now += 0.1
    assert breaker.state == "half-open"
    breaker.check()  # half-open: a request may start; its calls ask admit()
    probe = await breaker.admit()
    assert probe is not None
    breaker.settle(probe, None)  # an answer
    assert breaker.state == "closed" and await breaker.admit() is None


async def test_calls_wait_for_the_probe_and_go_once_it_answers(clock: Clock, until) -> None:
    breaker, probe = await half_open(clock)
    admitted: list[Any] = []

    async def call() -> None:
        admitted.append(await breaker.admit())

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(call)
        await until(lambda: breaker.waiting == 3)
        assert admitted == []  # all three wait while the probe is out
        breaker.settle(probe, None)
    assert admitted == [None, None, None]  # closed: they go as plain calls


async def test_a_failed_probe_opens_it_for_another_cooldown(clock: Clock, until) -> None:
    breaker, probe = await half_open(clock)
    outcome: list[BaseException] = []

    async def call() -> None:
        try:
            await breaker.admit()
        except QuotaExceededError as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await until(lambda: breaker.waiting == 1)
        again = quota()
        breaker.settle(probe, again)
    assert len(outcome) == 1 and "not sent" in outcome[0].__notes__[0]  # refused, not sent
    assert breaker.error is again and breaker.state == "open"
    clock.now += 59.9
    assert breaker.state == "open"
    clock.now += 0.1
    assert breaker.state == "half-open"


async def test_a_probe_that_tells_nothing_hands_the_probe_on(clock: Clock, until) -> None:
    breaker, first = await half_open(clock)
    nxt: list[Any] = []

    async def call() -> None:
        nxt.append(await breaker.admit())

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await until(lambda: breaker.waiting == 1)
        breaker.settle(first, BackendTimeoutError("slow"))  # a timeout says nothing of quota
        await until(lambda: len(nxt) == 1)
    assert nxt[0] is not None and nxt[0] is not first  # the waiter is the next probe
    assert breaker.state == "half-open"
    breaker.settle(first, None)  # a stale probe changes nothing
    assert breaker.state == "half-open"
    breaker.settle(nxt[0], asyncio.CancelledError())  # a cancelled probe hands it on too
    assert await breaker.admit() is not None


def test_a_cause_that_cannot_recover_replaces_a_quota(clock: Clock) -> None:
    breaker = Breaker(cooldown=60, clock=clock)
    breaker.trip(quota())
    key = AuthenticationError("bad key", status_code=401)
    breaker.trip(key)
    clock.now += 10**6
    assert breaker.error is key and breaker.state == "open"
    breaker.trip(quota())  # ... and is never replaced by one
    assert breaker.error is key


def test_a_waiter_on_another_event_loop_is_woken(clock: Clock, wait_until) -> None:
    breaker = Breaker(cooldown=0, clock=clock)
    breaker.trip(quota())
    probe = asyncio.run(breaker.admit())
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(asyncio.run(breaker.admit())))
    thread.start()
    wait_until(lambda: breaker.waiting == 1, "the other loop's call to wait")
    breaker.settle(probe, None)
    thread.join(10)
    assert got == [None]


def test_the_cooldown_is_a_checked_option() -> None:
    assert RankingOptions().breaker_cooldown == 60.0
    with pytest.raises(ConfigurationError, match="breaker_cooldown must be a number >= 0"):
        RankingOptions(breaker_cooldown=-1)
    with pytest.raises(ConfigurationError, match="breaker_cooldown"):
        Breaker(cooldown=float("nan"))
    assert PSCRanker(ScriptedBackend(), breaker_cooldown=5)._breaker.cooldown == 5.0


async def test_a_ranker_probes_a_topped_up_quota_through_the_real_client(
    scripted_server, clock: Clock, until
) -> None:
    """One window of m = 4 calls against a real loopback server: while the quota is out, no
    call; after the cool-down one probe (the other three wait for it), then all of them."""
    pytest.importorskip("openai")
    oracle = oracle_responder(lambda text: text.count("gold"))
    topped_up, release = threading.Event(), threading.Event()

    async def respond(request: Any) -> Any:
        if not topped_up.is_set():
            while request.index < 4 and server.request_count < 4:  # the first window: all out
                await asyncio.sleep(0.005)
            return Fault.status(429, code="insufficient_quota", message="out of credit")
        while not release.is_set():
            await asyncio.sleep(0.005)
        return Reply(oracle(request).text)

    server = scripted_server(respond)
    items = ["gold gold", "tin", "gold", "iron"]
    options = {"base_url": server.base_url, "api_key": "sk-test"}
    async with PSCRanker(
        "openai:m", backend_options=options, num_permutations=4, breaker_cooldown=60
    ) as ranker:
        ranker._breaker.clock = clock
        with pytest.raises(QuotaExceededError):
            await ranker.arank("q", items)
        tripped = server.request_count
        assert tripped == 4
        with pytest.raises(QuotaExceededError, match="out of credit"):
            await ranker.arank("q", items)  # in the cool-down: refused, nothing sent
        assert server.request_count == tripped
        clock.now += 60
        with pytest.raises(QuotaExceededError):
            await ranker.arank("q", items)  # still out: the one probe fails
        assert server.request_count == tripped + 1 and ranker._breaker.state == "open"
        clock.now += 60
        topped_up.set()
        results: list[Any] = []

        async def rank() -> None:
            results.append(await ranker.arank("q", items))

        async with anyio.create_task_group() as tg:
            tg.start_soon(rank)
            await until(lambda: server.in_flight == 1 and ranker._breaker.waiting == 3)
            assert server.request_count == tripped + 2  # the probe; three calls wait for it
            release.set()
        assert results[0].order[0] == 0 and server.request_count == tripped + 1 + 4
        assert ranker._breaker.state == "closed"
