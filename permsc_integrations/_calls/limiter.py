"""A cap on calls in flight that holds across threads and event loops.

``anyio.CapacityLimiter`` belongs to the event loop that first uses it, so one ranker shared by
sync callers (the bridge's loop), async callers (the app's loop) and worker threads (each
``asyncio.run``) could neither share nor respect it. :class:`CallLimiter` keeps its count under
a thread lock and wakes each waiter on its own loop (a :class:`~.turn.Turn`), first come first
served; a waiter that is cancelled gives its turn (or the slot it was just handed) to the next
one.

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

import threading
from collections import deque

from permsc_integrations._calls.turn import Turn
from permsc_integrations._checks import positive_int

__all__ = ["CallLimiter"]


class CallLimiter:
    """At most ``total_tokens`` holders at once, across every thread and event loop (asyncio).

    ``await acquire()`` then ``release()``, or ``async with limiter:``.
    """

    def __init__(self, total_tokens: int) -> None:
        positive_int("total_tokens", total_tokens)
        self.total_tokens = total_tokens
        self._borrowed = 0
        self._lock = threading.Lock()
        self._waiters: deque[Turn] = deque()

    def __repr__(self) -> str:
        return f"CallLimiter({self.borrowed_tokens}/{self.total_tokens} in use)"

    @property
    def borrowed_tokens(self) -> int:
        """Slots held right now."""
        return self._borrowed

    @property
    def waiting(self) -> int:
        """Tasks queued for a slot right now."""
        return len(self._waiters)

    async def acquire(self) -> None:
        """Wait for a slot (cancellable: a cancelled waiter holds nothing)."""
        with self._lock:
            if self._borrowed < self.total_tokens and not self._waiters:
                self._borrowed += 1
                return
            turn = Turn()
            self._waiters.append(turn)
        try:
            await turn
        except BaseException:
            self._withdraw(turn)
            raise

    def _withdraw(self, turn: Turn) -> None:
        """A waiter gave up: leave the queue, or pass on the slot it was already handed (a
        slot handed after it gave up is passed on by :meth:`Turn.wake`)."""
        with self._lock:
            if turn in self._waiters:
                self._waiters.remove(turn)
                return
        if turn.future.done() and not turn.future.cancelled():
            self.release()

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
                turn = self._waiters.popleft()
            if turn.wake(gone=self.release):
                return  # else that waiter's loop is closed: the next one

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
