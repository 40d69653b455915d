"""The sync bridge: one long-lived portal thread, usable from inside a running loop."""

from __future__ import annotations

import _thread
import asyncio
import signal
import threading

import anyio
import pytest

from permsc_integrations._calls import bridge
from permsc_integrations.errors import ConfigurationError


async def where(tag: str, *, sleep: float = 0.0) -> tuple[str, int, int]:
    await anyio.sleep(sleep)
    return tag, threading.get_ident(), id(asyncio.get_running_loop())


def test_returns_the_result_and_passes_arguments() -> None:
    tag, thread_id, _ = bridge.run_sync(where, "x", sleep=0.01)
    assert tag == "x" and thread_id != threading.get_ident()


def test_every_call_uses_the_same_thread_and_loop() -> None:
    first = bridge.run_sync(where, "a")
    second = bridge.run_sync(where, "b")
    assert first[1:] == second[1:]


def test_errors_propagate_with_their_type() -> None:
    async def fail() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        bridge.run_sync(fail)


def test_works_inside_a_running_event_loop() -> None:
    async def notebook_cell() -> tuple[str, int, int]:
        return bridge.run_sync(where, "nested", sleep=0.01)  # a sync call in async code

    tag, thread_id, loop_id = asyncio.run(notebook_cell())
    assert tag == "nested" and thread_id != threading.get_ident()


def test_concurrent_sync_callers_share_the_portal() -> None:
    out: list[tuple[str, int, int]] = []
    threads = [
        threading.Thread(target=lambda i=i: out.append(bridge.run_sync(where, str(i), sleep=0.05)))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o[0] for o in out) == [str(i) for i in range(8)]
    assert len({o[1] for o in out}) == 1


def test_calling_the_bridge_from_the_bridge_raises_instead_of_deadlocking() -> None:
    async def reenter() -> None:
        bridge.run_sync(where, "inner")

    with pytest.raises(ConfigurationError, match="async form"):
        bridge.run_sync(reenter)


def test_interrupting_the_caller_cancels_the_coroutine() -> None:
    state = {"cancelled": False}

    async def long_job() -> None:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            state["cancelled"] = True
            raise

    # A shell that starts a job in the background (CI runners, nohup ... &) makes it ignore
    # SIGINT, and then interrupt_main() does nothing: install Python's own handler meanwhile.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bridge.run_sync(long_job)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert state["cancelled"]


def test_shutdown_stops_the_thread_and_a_later_call_restarts_it() -> None:
    bridge.run_sync(where, "warm")
    old = bridge._current
    assert old is not None and old.thread.daemon
    bridge.shutdown()
    assert not old.thread.is_alive()
    assert bridge.run_sync(where, "again")[0] == "again"
