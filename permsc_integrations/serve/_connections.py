"""What slow and idle clients can hold: a cap on open connections, a deadline for each request
head, and a log that stays bounded while they try (docs/serve.md, "Slow and idle clients").

``permsc serve`` accepts connections itself rather than through asyncio's server, which
accepts until the process runs out of file descriptors and then logs a traceback for every
failed ``accept`` (hundreds of thousands a minute under attack). Here at most
``max_connections`` sockets are held. At the cap, the connection that has waited longest
without a request being handled is closed to make room (an idle keep-alive connection, or a
client still trickling its request head); when every connection has a request being handled,
new ones wait in the kernel's queue until one ends. A connection must send a complete request
head within ``header_timeout`` seconds of opening, or of its previous answer, or it is closed
(the body's deadline is the app's: ``Limits.body_timeout``). The connections closed are
counted (``on_close``) and summed up in at most one log line every ``report_every`` seconds.

The app learns which connection a request came on through :class:`TrackRequests`, an ASGI
middleware: the connection is busy while the app handles its request, idle otherwise.

Example:
    >>> connections = Connections(max_connections=100, header_timeout=10.0, tally=Tally())
    >>> connections.open, connections.max_connections
    (0, 100)
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from permsc_integrations._checks import number, positive_int

if TYPE_CHECKING:  # the serve extra's, imported by the app
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Connections", "Tally", "TrackRequests", "CONNECTION_KEY", "REASONS"]

logger = logging.getLogger("permsc_integrations.serve")

CONNECTION_KEY = "permsc.connection"
"""Where a request's :class:`_Connection` is found in its ASGI scope's ``state``."""

_ACCEPT_BATCH = 64  # accepts per wake-up: others get their turn on the event loop
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
MIN_AGE = 1.0  # seconds a connection (or a request body) has before it can be closed for room
SLOW_HEAD, EVICTED, NO_FDS, SLOW_BODY = "slow_head", "evicted", "no_fds", "slow_body"
SLOW_READ = "slow_read"
REASONS = {  # the log's words for each reason (the metric's label)
    SLOW_HEAD: "connections closed without a request head in time (--header-timeout)",
    SLOW_READ: "connections closed: their answer was not read in time (--send-timeout)",
    EVICTED: "connections closed at the cap to make room (--max-connections)",
    NO_FDS: "connections left unaccepted: no file descriptor free",
    SLOW_BODY: "requests refused 408: the body did not come in time (--body-timeout)",
}


class _Connection(asyncio.Protocol):
    """One accepted connection: the HTTP protocol (uvicorn's) inside, and its deadline."""

    def __init__(self, owner: Connections) -> None:
        self.owner = owner
        self.inner: asyncio.Protocol = asyncio.Protocol()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.unread: asyncio.TimerHandle | None = None  # the deadline of a paused write
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)
        self.owner.idle(self)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        """The client reads slower than we write: it has ``send_timeout`` s to catch up."""
        self.inner.pause_writing()
        if self.unread is None:
            self.unread = self.owner.deadline(self.owner.send_timeout, self, SLOW_READ)

    def resume_writing(self) -> None:
        self._read()
        self.inner.resume_writing()

    def _read(self) -> None:
        if self.unread is not None:
            self.unread.cancel()
            self.unread = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._read()
        self.lost = True
        self.owner.lost(self)
        self.inner.connection_lost(exc)


class Tally:
    """Slow-client events, counted (``on_count``, for the metrics) and logged as one line
    every ``every`` seconds at most, never one line each."""

    def __init__(self, every: float = 10.0, on_count: Callable[[str], None] | None = None):
        self.every, self.on_count = every, on_count
        self._counts: Counter[str] = Counter()
        self._report: asyncio.TimerHandle | None = None

    def count(self, reason: str) -> None:
        """One event of ``reason`` (a key of :data:`REASONS`)."""
        self._counts[reason] += 1
        if self.on_count is not None:
            self.on_count(reason)
        if self._report is None:
            self._report = asyncio.get_running_loop().call_later(self.every, self._log)

    def _log(self) -> None:
        self._report = None
        said = ", ".join(f"{n} {REASONS[reason]}" for reason, n in self._counts.most_common())
        logger.warning("slow or idle clients in the last %g s: %s", self.every, said)
        self._counts.clear()


class Connections:
    """The connections of one server: accepted up to ``max_connections``; each must send a
    request head within ``header_timeout`` s of opening or of its previous answer, and read
    what it is sent: a write that waits ``send_timeout`` s for the client closes it."""

    def __init__(
        self, max_connections: int, header_timeout: float, tally: Tally, send_timeout: float = 30.0
    ) -> None:
        self.max_connections = positive_int("max_connections", max_connections)
        self.header_timeout = number(positive=True)("header_timeout", header_timeout)
        self.send_timeout = number(positive=True)("send_timeout", send_timeout)
        self.tally = tally
        self.open = 0  # sockets held: accepted and not yet lost
        # connections with no request being handled, or whose body is still coming: the
        # ones to close at the cap, longest first (with when they became one)
        self._candidates: OrderedDict[_Connection, float] = OrderedDict()
        self._closing: set[_Connection] = set()  # closed by us, not yet lost
        self._tasks: set[asyncio.Task[object]] = set()
        self._listener: socket.socket | None = None
        self._reading = False
        self._retry: asyncio.TimerHandle | None = None
        self._make: Callable[[dict[str, object]], asyncio.Protocol] = lambda s: asyncio.Protocol()

    # ---------------------------------------------------------------- accepting

    def listen(
        self, sock: socket.socket, make: Callable[[dict[str, object]], asyncio.Protocol]
    ) -> None:
        """Accept on ``sock``; ``make(state)`` builds a connection's HTTP protocol, with
        ``state`` to add to its app state (the connection, under :data:`CONNECTION_KEY`)."""
        self._loop = asyncio.get_running_loop()
        sock.setblocking(False)
        self._listener, self._make = sock, make
        self._resume()

    def close(self) -> None:
        """Stop accepting and close the listening socket (connections stay open)."""
        if self._listener is not None:
            self._pause()
            self._listener.close()
            self._listener = None

    def _pause(self) -> None:
        if self._reading and self._listener is not None:
            self._loop.remove_reader(self._listener.fileno())
            self._reading = False

    def _resume(self) -> None:
        if not self._reading and self._listener is not None:
            self._loop.add_reader(self._listener.fileno(), self._accept)
            self._reading = True

    def _accept(self) -> None:
        assert self._listener is not None
        for _ in range(_ACCEPT_BATCH):
            if self.open >= self.max_connections:
                self._pause()  # until a connection is lost, or one can be closed
                if not self._closing:
                    self._make_room()
                return
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_FDS:  # files held elsewhere: try again in a second
                    self.tally.count(NO_FDS)
                    self._pause()
                    self._loop.call_later(1.0, self._resume)
                    return
                continue  # the client gave up before we accepted (ECONNABORTED)
            self._adopt(sock)

    def _adopt(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # pragma: no cover - not TCP
            pass
        self.open += 1
        connection = _Connection(self)
        connection.inner = self._make({CONNECTION_KEY: connection})
        made = self._loop.connect_accepted_socket(lambda: connection, sock)
        task = self._loop.create_task(made)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._made(t, connection, sock))

    def _made(
        self, task: asyncio.Task[object], connection: _Connection, sock: socket.socket
    ) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is None:
            return
        if connection.transport is None:  # never became a connection
            sock.close()
            self.open -= 1
            self._resume()

    def _make_room(self) -> None:
        """At the cap: close the longest-waiting candidate, once it has waited ``MIN_AGE``
        seconds (a new connection gets that long to send its request); else accept again
        when it has."""
        if not self._candidates:
            return  # every connection has a request being handled: the next one ends it
        connection, since = next(iter(self._candidates.items()))
        wait = since + MIN_AGE - self._loop.time()
        if wait <= 0:
            self._close(connection, EVICTED)
        elif self._retry is None:
            self._retry = self._loop.call_later(wait, self._retried)

    def _retried(self) -> None:
        self._retry = None
        self._resume()

    # ---------------------------------------------------------------- a connection's state

    def idle(self, connection: _Connection) -> None:
        """No request of ``connection`` is being handled: its next head is due in time."""
        if connection.lost or connection in self._closing:
            return
        self._candidate(connection)
        connection.timer = self.deadline(self.header_timeout, connection, SLOW_HEAD)
        if not self._closing:
            self._resume()  # at the cap, there may now be a connection to close

    def reading(self, connection: _Connection) -> None:
        """The app has ``connection``'s request head; its body is still coming."""
        self._candidate(connection)

    def working(self, connection: _Connection) -> None:
        """The app has ``connection``'s whole request: it is never closed to make room."""
        self._candidates.pop(connection, None)
        self._stop_timer(connection)

    def lost(self, connection: _Connection) -> None:
        self.working(connection)
        self._closing.discard(connection)
        self.open -= 1
        self._resume()

    def _candidate(self, connection: _Connection) -> None:
        self._stop_timer(connection)
        self._candidates[connection] = self._loop.time()
        self._candidates.move_to_end(connection)

    @staticmethod
    def _stop_timer(connection: _Connection) -> None:
        if connection.timer is not None:
            connection.timer.cancel()
            connection.timer = None

    def deadline(self, seconds: float, connection: _Connection, reason: str) -> asyncio.TimerHandle:
        """Close ``connection`` for ``reason`` in ``seconds`` (unless the timer is cancelled)."""
        return self._loop.call_later(seconds, self._expire, connection, reason)

    def _expire(self, connection: _Connection, reason: str) -> None:
        if reason == SLOW_HEAD:
            connection.timer = None
        else:
            connection.unread = None
        self._close(connection, reason)

    def _close(self, connection: _Connection, reason: str) -> None:
        self.working(connection)
        if connection.transport is not None and not connection.lost:
            self._closing.add(connection)
            connection.transport.abort()  # at once: a client that reads nothing holds nothing
        self.tally.count(reason)


class TrackRequests:
    """ASGI middleware: tells :class:`Connections` where each request stands (its body
    coming, then complete, then answered); a request on a connection that
    :class:`Connections` did not accept passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.get("state") if scope["type"] == "http" else None
        connection = state.get(CONNECTION_KEY) if isinstance(state, dict) else None
        if not isinstance(connection, _Connection):
            await self.app(scope, receive, send)
            return
        owner = connection.owner

        async def received() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                owner.working(connection)
            return message

        owner.reading(connection)
        try:
            await self.app(scope, received, send)
        finally:
            owner.idle(connection)
