"""The one sync bridge: run async code from sync code on a long-lived portal thread.

One daemon thread per process runs an event loop with an anyio blocking portal; it starts
on first use and stops at interpreter exit. Because the coroutine runs on that thread, a
sync call works even when the calling thread already runs an event loop (a notebook), and
async clients created by sync calls always live on the same loop.

Example:
    >>> import anyio
    >>> async def add(a, b):
    ...     await anyio.sleep(0)
    ...     return a + b
    >>> run_sync(add, 2, b=3)
    5
"""

from __future__ import annotations

import atexit
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from permsc_integrations.errors import ConfigurationError

__all__ = ["run_sync", "shutdown"]

T = TypeVar("T")
_THREAD_NAME = "permsc-bridge"


class _PortalThread:
    """A daemon thread serving one :class:`BlockingPortal` until :meth:`stop`."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._portal: BlockingPortal | None = None
        self._stopped: anyio.Event | None = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=_THREAD_NAME, daemon=True)
        self.thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        try:
            anyio.run(self._serve)
        except BaseException as exc:  # surfaced to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stopped = anyio.Event()
        async with BlockingPortal() as portal:
            self._portal = portal
            self._ready.set()
            await self._stopped.wait()
            await portal.stop(cancel_remaining=True)

    @property
    def portal(self) -> BlockingPortal:
        assert self._portal is not None
        return self._portal

    def stop(self, timeout: float = 5.0) -> None:
        if self._stopped is not None and self.thread.is_alive():
            try:
                self.portal.call(self._stopped.set)
            except RuntimeError:  # the portal already stopped
                pass
            self.thread.join(timeout)


_lock = threading.Lock()
_current: _PortalThread | None = None


def _portal_thread() -> _PortalThread:
    global _current
    with _lock:
        if _current is None or not _current.thread.is_alive():
            _current = _PortalThread()
        return _current


def run_sync(async_fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run ``await async_fn(*args, **kwargs)`` on the bridge's loop and return its result.

    Interrupting the caller (Ctrl-C) cancels the coroutine. Calling this from inside a
    coroutine that itself runs on the bridge would deadlock and raises instead.
    """
    current = _current
    if current is not None and threading.current_thread() is current.thread:
        raise ConfigurationError(
            "a sync entry point (rank, rank_many, close) was called from code already running "
            "on the sync bridge; use the async form (arank, arank_many, aclose) there"
        )
    portal = _portal_thread().portal
    finished = threading.Event()

    async def guarded() -> T:
        try:
            return await async_fn(*args, **kwargs)
        finally:
            finished.set()

    future = portal.start_task_soon(guarded)
    try:
        while True:  # short waits, so that Ctrl-C is seen at once
            try:
                return future.result(timeout=0.25)
            except concurrent.futures.TimeoutError:
                continue
    except BaseException:
        if future.cancel():
            finished.wait(5.0)  # let the cancelled coroutine unwind first
        raise


def shutdown() -> None:
    """Stop the bridge thread (registered at exit; a later :func:`run_sync` starts a new one)."""
    global _current
    with _lock:
        current, _current = _current, None
    if current is not None:
        current.stop()


atexit.register(shutdown)
