"""Run the app under uvicorn; SIGTERM drains in-flight requests and exits cleanly.

Connections are accepted by :class:`~._connections.Connections` (a cap on open connections,
a deadline for each request head), uvicorn's HTTP protocol parses them. On SIGTERM (or
Ctrl-C) the server stops accepting connections, lets the requests in flight finish for up to
``grace_period`` seconds (then cancels their rankings, and their upstream calls, and answers
them 503 with ``Retry-After``), closes the rankers and returns; ``permsc serve`` then exits 0.

Example:
    $ PERMSC_API_KEYS=my-client-key permsc serve --backend openai:gpt-4o-mini -m 20
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Protocol

from permsc_integrations._registry import publish
from permsc_integrations.errors import MissingDependencyError
from permsc_integrations.serve._config import ServeConfig
from permsc_integrations.serve._connections import Connections, Tally, TrackRequests

if TYPE_CHECKING:  # the serve extra's, imported when a server starts
    from starlette.applications import Starlette
    from uvicorn import Server

__all__ = ["serve", "bind", "load_app"]

logger = logging.getLogger("permsc_integrations.serve")
_BACKSTOP = 10.0  # seconds past the grace period before uvicorn cancels what is left


class _Rankings(Protocol):
    """The rerank app's service, as the server stops it."""

    def stop_rankings(self) -> None: ...


def load_app() -> Callable[[ServeConfig], Starlette]:
    """:func:`~permsc_integrations.serve._app.create_app`, or the install line if the ``serve``
    extra is missing."""
    try:
        # lazy: starlette, pydantic and prometheus-client are the serve extra's
        from permsc_integrations.serve._app import create_app
    except ImportError as exc:
        missing = exc.name or "a dependency"
        raise MissingDependencyError(missing, "serve", purpose="permsc serve") from exc
    return create_app


def _uvicorn() -> ModuleType:
    try:
        # lazy: the serve extra's
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "serve", purpose="permsc serve") from exc
    return uvicorn


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one) with a queue of 4096 connections waiting to
    be accepted (:class:`~._connections.Connections` accepts them)."""
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


def _open_files() -> int | None:
    """The soft open-file limit (None: unlimited, or no such limit on this system)."""
    try:
        # lazy: Unix only
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _server_class(
    uvicorn: ModuleType,
    config: ServeConfig,
    service: _Rankings | None,
    connections: Connections,
    sock: socket.socket,
    name: str,
) -> type[Server]:
    """uvicorn's server, with ``connections`` accepting on ``sock`` (uvicorn's HTTP protocol
    inside), a drained SIGTERM as a clean exit, and (the rerank app's ``service``) 503s once
    the grace period is over."""

    class Server(uvicorn.Server):  # type: ignore[misc,name-defined]
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and captured and captured[-1] == sig:
                captured.pop()  # a drained SIGTERM is a clean exit, not a death by signal

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=[])  # uvicorn's own server accepts nothing here
            if self.should_exit:  # the app's start-up failed
                return

            def protocol(state: dict[str, object]) -> asyncio.Protocol:
                return self.config.http_protocol_class(
                    config=self.config,
                    server_state=self.server_state,
                    app_state={**self.lifespan.state, **state},
                )

            connections.listen(sock, protocol)
            logger.info("%s: listening on %s:%d", name, config.host, sock.getsockname()[1])

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            connections.close()
            if service is not None:  # the rankings still running then are answered 503
                asyncio.get_running_loop().call_later(config.grace_period, service.stop_rankings)
            await super().shutdown(sockets=sockets)

    return Server


def serve(config: ServeConfig, app: Starlette | None = None, name: str = "permsc serve") -> None:
    """Serve ``config`` (its rerank app, or the ASGI ``app`` given: ``permsc mcp``) until
    SIGTERM or SIGINT, behind the same connection limits; logs ``NAME: listening on
    HOST:PORT`` once ready (the port a ``port`` of 0 was given)."""
    uvicorn = _uvicorn()
    app = load_app()(config) if app is None else app
    service = getattr(app.state, "service", None)  # the rerank app's; another app has none
    connections = Connections(
        config.connection_cap(_open_files()),
        config.limits.header_timeout,
        service.slow if service is not None else Tally(),
        config.limits.send_timeout,
    )
    if service is not None:
        service.metrics.watch_connections(connections)
    sock = bind(config.host, config.port)
    server = _server_class(uvicorn, config, service, connections, sock, name)(
        uvicorn.Config(
            TrackRequests(app),
            loop="asyncio",
            lifespan="on",
            log_config=None,
            access_log=False,  # our own log lines carry no key; uvicorn's carry the path only
            proxy_headers=False,
            ws="none",
            # a backstop only: the app answers its own requests once the grace period ends
            timeout_graceful_shutdown=config.grace_period + _BACKSTOP,
            timeout_keep_alive=config.limits.header_timeout,
        )
    )
    server.run()


publish("permsc_integrations.serve", serve)
