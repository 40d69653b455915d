"""Each client key's turn to rank: at most ``key_concurrency`` rankings at once, at most
``key_queue`` more waiting for a turn, each for at most ``queue_timeout`` seconds.

What a waiting request holds (its parsed body, up to ``max_body_bytes``) is bounded by the
queue; past it a request is refused at once (429), and one that waited its whole
``queue_timeout`` gets a 503 (both with ``Retry-After``). The turn covers the ranking only:
reading a request's body and writing its answer have their own deadlines and count against
the connection cap (:mod:`._connections`), never against the key's turns. ``permsc serve``
and ``permsc mcp --transport http`` share this (docs/serve.md, "Under load and faults").

Example:
    >>> import anyio
    >>> slots = KeySlots(concurrency=1, queue=0, timeout=1.0)
    >>> async def two():
    ...     async with slots.turn("k"):
    ...         try:
    ...             async with slots.turn("k"):
    ...                 pass
    ...         except Busy as busy:
    ...             return busy.error.status
    >>> anyio.run(two)
    429
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext

import anyio

from permsc_integrations.serve._errors import HttpError

__all__ = ["Busy", "KeySlots"]


class Busy(Exception):
    """No turn for this request: ``error`` is its answer (429 or 503, with Retry-After)."""

    def __init__(self, error: HttpError) -> None:
        super().__init__(error.message)
        self.error = error


class KeySlots:
    """The turns of every client key (keys are the server's, so their number is bounded)."""

    def __init__(self, concurrency: int, queue: int, timeout: float) -> None:
        self.concurrency, self.queue, self.timeout = concurrency, queue, timeout
        self._limiters: dict[str, anyio.CapacityLimiter] = {}

    def _limiter(self, key: str) -> anyio.CapacityLimiter:
        if key not in self._limiters:
            self._limiters[key] = anyio.CapacityLimiter(self.concurrency)
        return self._limiters[key]

    @asynccontextmanager
    async def turn(
        self, key: str, waiting: AbstractContextManager[object] | None = None
    ) -> AsyncIterator[None]:
        """Hold one of ``key``'s turns for the block; :class:`Busy` when none comes. The
        wait runs inside ``waiting`` (a metric's gauge)."""
        limiter = self._limiter(key)
        busy = limiter.available_tokens == 0
        if busy and limiter.statistics().tasks_waiting >= self.queue:
            raise Busy(
                HttpError(
                    429,
                    f"this client key has {self.concurrency} rankings running and "
                    f"{self.queue} waiting, the most it may (--key-concurrency, --key-queue); "
                    "retry later",
                    (("retry-after", "1"),),
                )
            )
        acquired = False
        with waiting or nullcontext(), anyio.move_on_after(self.timeout):
            await limiter.acquire()
            acquired = True
        if not acquired:
            raise Busy(
                HttpError(
                    503,
                    f"no ranking turn for this client key within {self.timeout:g} s "
                    "(--queue-timeout): the server is busy; retry later",
                    (("retry-after", "1"),),
                )
            )
        try:
            yield
        finally:
            limiter.release()
