"""The one cross-loop wait of the way out: a task waits on its own event loop for a
:class:`Turn`, which any thread can end.

``asyncio`` futures belong to their loop, and one ranker is shared by sync callers (the
bridge's loop), async callers (the app's loop) and worker threads (each ``asyncio.run``). So
whatever makes a task wait for another one (a slot of the :class:`~.limiter.CallLimiter`, the
:class:`~.breaker.Breaker`'s probe, room under a ranker's cap in :mod:`.admission`) queues a
:class:`Turn` under its own thread lock and wakes it with :meth:`Turn.wake`.

Example:
    >>> import asyncio
    >>> async def woken():
    ...     turn = Turn()
    ...     turn.wake()
    ...     await turn
    ...     return turn.future.done()
    >>> asyncio.run(woken())
    True
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator

__all__ = ["Turn"]


class Turn:
    """One task's wait on its own event loop, which any thread can end (:meth:`wake`)."""

    __slots__ = ("loop", "future")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()

    def __await__(self) -> Generator[object, None, None]:
        return self.future.__await__()

    def wake(self, gone: Callable[[], None] | None = None) -> bool:
        """End the wait; ``gone()`` runs (on the waiter's loop) instead if the waiter stopped
        waiting meanwhile. False when that loop is closed: no one to wake."""
        try:
            self.loop.call_soon_threadsafe(self._end, gone)
        except RuntimeError:
            return False
        return True

    def _end(self, gone: Callable[[], None] | None) -> None:
        if not self.future.done():
            self.future.set_result(None)
        elif gone is not None:
            gone()
