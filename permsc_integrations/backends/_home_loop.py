"""Framework models used from several event loops: async on one loop, sync from the others.

A LangChain chat model or a LlamaIndex LLM keeps one async HTTP client, and that client's
connections belong to the event loop that first used them. The core runs sync calls on its
bridge loop, the app runs async calls on its own loop, and ``asyncio.run`` makes a new loop
each time: a pooled connection reused from another loop writes the request (the server gets
it), then fails to read the answer ("Event loop is closed", a future on another loop), so the
call fails after it was sent and its retry sends it again.

:class:`HomeLoop` remembers the first loop that calls through it (the model's *home*). Calls
on the home loop use the model's async method; calls from any other loop use its sync method
in a worker thread, whose HTTP client belongs to no loop. Once the home loop has closed, every
later call takes the sync path. A call that times out or is cancelled on the sync path
returns at once; its thread ends with the model's own timeout.

Example:
    >>> import asyncio
    >>> home = HomeLoop()
    >>> async def ask():
    ...     return await home.call(lambda: asyncio.sleep(0, "async"), lambda: "sync")
    >>> asyncio.run(ask()), asyncio.run(ask())  # the second loop is not the first one's
    ('async', 'sync')
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio.to_thread

from permsc_integrations._registry import publish

__all__ = ["HomeLoop"]

T = TypeVar("T")


class HomeLoop:
    """The loop a framework model's async client lives on (see the module docstring)."""

    def __init__(self) -> None:
        self._home: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[HomeLoop], tuple[()]]:
        return (HomeLoop, ())  # a copy of the model is a new client: it finds its own home

    def is_home(self) -> bool:
        """Whether the running loop is the home loop (the first running loop becomes it)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): the frameworks' clients are asyncio's
            return True
        with self._lock:
            if self._home is None:
                self._home = weakref.ref(loop)
            return self._home() is loop

    async def call(self, native: Callable[[], Awaitable[T]], blocking: Callable[[], T]) -> T:
        """``await native()`` on the home loop; ``blocking()`` in a worker thread elsewhere."""
        if self.is_home():
            return await native()
        return await anyio.to_thread.run_sync(blocking, abandon_on_cancel=True)


# the adapters' declared API (permsc_integrations.integration) names these; they live here
publish("permsc_integrations.backends", HomeLoop)
