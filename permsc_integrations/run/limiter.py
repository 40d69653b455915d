"""A cap on calls in flight that holds across threads and event loops.

``anyio.CapacityLimiter`` belongs to the event loop that first uses it, so one ranker shared by
sync callers (the bridge's loop), async callers (the app's loop) and worker threads (each
``asyncio.run``) could neither share nor respect it. :class:`CallLimiter` keeps its count under
a thread lock and wakes each waiter on its own loop, first come first served; a waiter that is
cancelled gives its turn (or the slot it was just handed) to the next one.

Example:
    >>> import asyncio
    >>> limiter = CallLimiter(2)
    >>> async def hold():
    ...     await limiter.acquire()
    ...     limiter.release()
    ...     return limiter.borrowed_tokens
    >>> asyncio.run(hold())
    0
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Protocol

from ..checks import positive_int

__all__ = ["CallLimiter", "Limiter"]


class Limiter(Protocol):
    """What the engine needs of a limiter (``CallLimiter`` or ``anyio.CapacityLimiter``)."""

    async def acquire(self) -> None: ...

    def release(self) -> None: ...


class CallLimiter:
    """At most ``total_tokens`` holders at once, across every thread and event loop (asyncio).

    ``await acquire()`` then ``release()``, or ``async with limiter:``.
    """

    def __init__(self, total_tokens: int) -> None:
        positive_int("total_tokens", total_tokens)
        self.total_tokens = total_tokens
        self._borrowed = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def __repr__(self) -> str:
        return f"CallLimiter({self.borrowed_tokens}/{self.total_tokens} in use)"

    @property
    def borrowed_tokens(self) -> int:
        """Slots held right now."""
        return self._borrowed

    async def acquire(self) -> None:
        """Wait for a slot (cancellable: a cancelled waiter holds nothing)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._borrowed < self.total_tokens and not self._waiters:
                self._borrowed += 1
                return
            turn: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, turn))
        try:
            await turn
        except BaseException:
            self._withdraw(loop, turn)
            raise

    def _withdraw(self, loop: asyncio.AbstractEventLoop, turn: asyncio.Future[None]) -> None:
        """A waiter gave up: leave the queue, or pass on the slot it was already handed."""
        with self._lock:
            try:
                self._waiters.remove((loop, turn))
                return
            except ValueError:
                pass  # release() already handed it a slot
        if turn.done() and not turn.cancelled():
            self.release()
        # else: _hand_over will see the cancelled future and pass the slot on

    def release(self) -> None:
        """Give a slot back: to the longest waiter (on its own loop), else to the pool."""
        while True:
            with self._lock:
                if not self._waiters:
                    self._borrowed -= 1
                    if self._borrowed < 0:
                        self._borrowed = 0
                        raise RuntimeError("CallLimiter.release() without a matching acquire()")
                    return
                loop, turn = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(self._hand_over, turn)
                return
            except RuntimeError:  # that waiter's loop is closed: try the next one
                continue

    def _hand_over(self, turn: asyncio.Future[None]) -> None:
        """On the waiter's loop: wake it with the slot, or pass the slot on if it left."""
        if turn.done():
            self.release()
        else:
            turn.set_result(None)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
