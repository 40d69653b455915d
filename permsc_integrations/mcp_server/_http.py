"""``permsc mcp --transport http``: the SDK's streamable HTTP app (stateless, ``/mcp``) behind
``permsc serve``'s client keys, browser guard, body limits and per-key turns.

What a connection can hold is bounded as on ``permsc serve`` (docs/serve.md, "Under load and
faults"):

- only ``POST /mcp`` is answered: a stateless server has nothing to push, so the SSE stream a
  ``GET`` would open (and never end) is a 405, as the MCP spec allows;
- the body must come whole within ``body_timeout`` (408) and fit ``max_body_bytes`` (413), the
  connection closed after either; while it comes the connection is one the cap may close;
- a client key's turn (``key_concurrency``, ``key_queue``, ``queue_timeout``:
  :class:`~.serve._slots.KeySlots`) is held by the ranking only, never by reading the body or
  writing the answer, whose reader has ``send_timeout`` s per part (serve's accept loop);
- without client keys on loopback, a foreign ``Host`` (421) or ``Origin`` (403) is refused,
  ``--allowed-host`` and ``--cors-origin`` as for ``permsc serve`` (serve's
  :class:`~.serve._browsers.BrowserGuard`; the SDK's own guard, which knew three host names
  and no flag, is off).

Example:
    >>> KEY.get()  # outside a request: no key
    ''
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from permsc_integrations.mcp_server._tool import RerankTool
from permsc_integrations.serve import (
    BadRequest,
    BrowserGuard,
    HttpError,
    KeyRing,
    ServeConfig,
    Unauthorized,
    read_body,
)

__all__ = ["KEY", "http_app"]

logger = logging.getLogger("permsc_integrations.mcp")

KEY: contextvars.ContextVar[str] = contextvars.ContextVar("permsc_mcp_key", default="")
"""The client key (its id) of the HTTP request being handled: the tool takes its turn."""

_PATH = "/mcp"


async def _answer(send: Send, error: HttpError) -> None:
    body = json.dumps({"message": error.message}).encode()
    head = [(b"content-type", b"application/json"), *_headers(error)]
    await send({"type": "http.response.start", "status": error.status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _headers(error: HttpError) -> list[tuple[bytes, bytes]]:
    extra = [(k.encode(), v.encode()) for k, v in error.headers]
    if error.status == 401:
        extra.append((b"www-authenticate", b"Bearer"))
    return extra


class _Gate:
    """ASGI middleware in front of the SDK's app (see the module)."""

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app, self.limits = app, config.limits
        self.keys, self.guard = KeyRing(config.keys), BrowserGuard.of(config)

    def _refusal(self, scope: Scope) -> HttpError | None:
        if scope["path"].rstrip("/") != _PATH:
            return HttpError(404, f"no such endpoint: {scope['path'][:100]}; MCP is at {_PATH}")
        if scope["method"] != "POST":
            message = f"method {scope['method']} not allowed on {_PATH}: a stateless server "
            return HttpError(405, message + "opens no event stream; POST", (("allow", "POST"),))
        headers = Headers(scope=scope)
        return self.guard.refuse(
            "POST", headers.get("host"), headers.get("content-type"), headers.get("origin")
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope)
        if refusal is not None:
            return await _answer(send, refusal)
        try:
            key = self.keys.identify(Headers(scope=scope).get("authorization"))
        except Unauthorized as exc:
            return await _answer(send, HttpError(401, str(exc)))
        try:
            body = await read_body(Request(scope, receive), self.limits)
        except BadRequest as exc:  # 413 or 408: the rest is not read, the connection closed
            close = (("connection", "close"),)
            return await _answer(send, HttpError(exc.status, str(exc), close))
        except ClientDisconnect:
            return None
        KEY.set(key)
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with ``body`` (already read) as its first message."""
    first: deque[Message] = deque([{"type": "http.request", "body": body, "more_body": False}])

    async def replay() -> Message:
        return first.popleft() if first else await receive()

    return replay


def http_app(server: MCPServer, tool: RerankTool, config: ServeConfig) -> Starlette:
    """The streamable HTTP app (``/mcp``, stateless) of ``server`` behind :class:`_Gate`; the
    tool's rankers close when the app shuts down."""
    inner = server.streamable_http_app(
        stateless_http=True,
        host=config.host,
        max_request_body_size=config.limits.max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            try:
                yield
            finally:
                await tool.aclose()

    app = Starlette(routes=inner.routes, lifespan=lifespan)
    app.add_middleware(_Gate, config=config)
    return app
