"""Run the app under uvicorn; SIGTERM drains in-flight requests and exits cleanly.

On SIGTERM (or Ctrl-C) the server stops accepting connections, lets the requests in flight
finish for up to ``grace_period`` seconds (then cancels them, and their upstream calls), closes
the rankers and returns; ``permsc serve`` then exits 0.

Example:
    $ PERMSC_API_KEYS=my-client-key permsc serve --backend openai:gpt-4o-mini -m 20
"""

from __future__ import annotations

import logging
import signal
import socket
from typing import Any

from ..errors import MissingDependencyError
from .config import ServeConfig

__all__ = ["serve", "bind", "load_app"]

logger = logging.getLogger("permsc_integrations.serve")


def load_app() -> Any:
    """:func:`~permsc_integrations.serve.app.create_app`, or the install line if the ``serve``
    extra is missing."""
    try:
        # lazy: starlette, pydantic and prometheus-client are the serve extra's
        from .app import create_app
    except ImportError as exc:
        missing = exc.name or "a dependency"
        raise MissingDependencyError(missing, "serve", purpose="permsc serve") from exc
    return create_app


def _uvicorn() -> Any:
    try:
        # lazy: the serve extra's
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "serve", purpose="permsc serve") from exc
    return uvicorn


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one), TCP_NODELAY on accepted connections."""
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


def serve(config: ServeConfig, app: Any = None, name: str = "permsc serve") -> None:
    """Serve ``config`` (its rerank app, or the ASGI ``app`` given) until SIGTERM or SIGINT;
    logs ``NAME: listening on HOST:PORT`` once ready (the port a ``port`` of 0 was given)."""
    uvicorn = _uvicorn()
    app = load_app()(config) if app is None else app
    listening = bind(config.host, config.port)

    class Server(uvicorn.Server):  # type: ignore[misc,name-defined]
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and captured and captured[-1] == sig:
                captured.pop()  # a drained SIGTERM is a clean exit, not a death by signal

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            port = listening.getsockname()[1]
            logger.info("%s: listening on %s:%d", name, config.host, port)

    server = Server(
        uvicorn.Config(
            app,
            loop="asyncio",
            lifespan="on",
            log_config=None,
            access_log=False,  # our own log lines carry no key; uvicorn's carry the path only
            proxy_headers=False,
            timeout_graceful_shutdown=config.grace_period,
            timeout_keep_alive=30,
            backlog=4096,
        )
    )
    server.run(sockets=[listening])
