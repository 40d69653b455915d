"""One async HTTP client per event loop, closed with its loop.

An HTTP client's connections belong to the event loop that opened them, so a backend used
from several loops (the sync bridge, the app's loop, ``asyncio.run`` in threads) keeps one
client per loop. A client must also be closed *before* its loop closes, or its transports are
left open ("unclosed transport" warnings, sockets kept until garbage collection). asyncio has
no "loop closing" callback, but it does finalise every async generator still alive when a
loop shuts down (``loop.shutdown_asyncgens()``, called by ``asyncio.run``, ``asyncio.Runner``
and ``anyio.run``): so each client is tied to a small suspended async generator whose
``finally`` closes it.

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
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["LoopClients"]


@dataclass
class _Entry:
    loop: asyncio.AbstractEventLoop
    client: Any
    keeper: AsyncGenerator[None, None]


async def _keep(client: Any) -> AsyncGenerator[None, None]:
    """Suspended until the loop finalises it at shutdown (or :meth:`LoopClients.aclose`)."""
    try:
        yield
    finally:
        await client.close()


class LoopClients:
    """Clients made by ``factory()`` (one per running loop) with an async ``close()``."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()

    async def get(self) -> Any:
        """The running loop's client, made (and tied to the loop's shutdown) on first use."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries.get(id(loop))
            if entry is not None and entry.loop is loop:
                return entry.client
            self._entries = {k: e for k, e in self._entries.items() if not e.loop.is_closed()}
            client = self._factory()
            entry = self._entries[id(loop)] = _Entry(loop, client, _keep(client))
        await entry.keeper.__anext__()  # registers the generator with this loop
        return client

    async def aclose(self) -> None:
        """Close every client: on this loop now, on other running loops there; clients of
        closed loops were closed as those loops shut down."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        current = asyncio.get_running_loop()
        for entry in entries:
            if entry.loop is current:
                await entry.keeper.aclose()
            elif entry.loop.is_running():
                asyncio.run_coroutine_threadsafe(entry.keeper.aclose(), entry.loop)
