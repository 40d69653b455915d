"""One async HTTP client per event loop, closed with its loop.

An HTTP client's connections belong to the event loop that opened them, so a backend used
from several loops (the sync bridge, the app's loop, ``asyncio.run`` in threads) keeps one
client per loop. A client must also be closed *before* its loop closes, or its transports are
left open ("unclosed transport" warnings, sockets kept until garbage collection). asyncio has
no "loop closing" callback, but it does finalise every async generator still alive when a
loop shuts down (``loop.shutdown_asyncgens()``, called by ``asyncio.run``, ``asyncio.Runner``
and ``anyio.run``): so each client is tied to a small suspended async generator whose
``finally`` closes it.

A ``LoopClients`` dropped without :meth:`LoopClients.aclose` (a ranker nobody closed) closes
its clients on their own loops as it is collected, so that they never become the garbage
collector's: collected in a reference cycle, a client's finalisers ran in whichever thread
collected it, beside the loop's own cleanup, and a new connection's pending connect was
seen unregistered from the loop (its file descriptor reused) and never completed.

Example:
    >>> import asyncio
    >>> class Client:
    ...     closed = False
    ...     async def close(self):
    ...         self.closed = True
    >>> clients = LoopClients(Client)
    >>> async def use():
    ...     return await clients.get()
    >>> made = asyncio.run(use())
    >>> made.closed  # closed as its loop shut down
    True
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["LoopClients"]


class _Client(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Client)


@dataclass
class _Entry(Generic[C]):
    loop: asyncio.AbstractEventLoop
    client: C
    keeper: AsyncGenerator[None, None]


async def _keep(client: _Client) -> AsyncGenerator[None, None]:
    """Suspended until the loop finalises it at shutdown (or :meth:`LoopClients.aclose`)."""
    try:
        yield
    finally:
        await client.close()


class LoopClients(Generic[C]):
    """Clients made by ``factory()`` (one per running loop) with an async ``close()``."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._entries: dict[int, _Entry[C]] = {}  # changed in place: the finaliser holds it
        self._lock = threading.Lock()
        done = weakref.finalize(self, _close_all, self._entries)
        done.atexit = False  # at exit the loops' own shutdown closes what is left

    async def get(self) -> C:
        """The running loop's client, made (and tied to the loop's shutdown) on first use."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries.get(id(loop))
            if entry is not None and entry.loop is loop:
                return entry.client
            for key in [k for k, e in self._entries.items() if e.loop.is_closed()]:
                del self._entries[key]
            client = self._factory()
            entry = self._entries[id(loop)] = _Entry(loop, client, _keep(client))
        await entry.keeper.__anext__()  # registers the generator with this loop
        return client

    async def aclose(self) -> None:
        """Close every client: on this loop now, on other running loops there; clients of
        closed loops were closed as those loops shut down."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        current = asyncio.get_running_loop()
        for entry in entries:
            if entry.loop is current:
                await entry.keeper.aclose()
            elif entry.loop.is_running():
                asyncio.run_coroutine_threadsafe(entry.keeper.aclose(), entry.loop)


def _close_all(entries: dict[int, _Entry[C]]) -> None:
    """Close each client on its own loop (called from any thread, as its owner is collected)."""
    for entry in list(entries.values()):
        if not entry.loop.is_closed():
            asyncio.run_coroutine_threadsafe(entry.keeper.aclose(), entry.loop)
    entries.clear()
