"""The MCP server: one ``rerank`` tool (the official SDK's ``MCPServer``) over stdio, or over
streamable HTTP behind ``permsc serve``'s client keys.

The tool's input schema is built from the server's own limits (``max_documents``,
``max_query_chars``, the budgets' caps), so an agent sees them before it calls; its output
schema is :class:`~.tool.RerankResult`.

Example:
    >>> import anyio
    >>> from mcp import Client
    >>> from permsc_integrations import PSCRanker
    >>> from permsc_integrations.serve.config import Limits
    >>> from permsc_integrations.testing import ScriptedBackend, oracle_responder
    >>> backend = ScriptedBackend(oracle_responder(len))  # the longer text is the better
    >>> ranker = PSCRanker(backend, num_permutations=2)
    >>> server = build_server(RerankTool(ranker, "psc"), Limits())
    >>> async def call():
    ...     async with Client(server) as client:
    ...         return await client.call_tool("rerank", {"query": "q", "documents": ["a", "bb"]})
    >>> [r["index"] for r in anyio.run(call).structured_content["results"]]
    [1, 0]
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as SDKToolError
from pydantic import Field
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..errors import ConfigurationError
from ..serve.auth import KeyRing, Unauthorized
from ..serve.config import Limits, ServeConfig
from ..serve.run import serve
from ..serve.scoring import SCALES
from .tool import BUDGETS, RerankResult, RerankTool, ToolError

__all__ = ["build_server", "http_app", "serve_mcp", "TRANSPORTS", "DESCRIPTION"]

DESCRIPTION = (
    "Rerank documents by their relevance to a query with an LLM, robust to the order they "
    "come in: the model ranks several shuffles of the list and the answers are combined "
    "(permutation self-consistency). Returns the documents best first, each with its index "
    "in `documents` and a relevance_score in [0, 1] (its share of pairwise comparisons won), "
    "the ranking's confidence (agreement of the shuffles, -1 to 1) and its usage (model "
    "calls, tokens)."
)


def _parameters(tool: RerankTool, limits: Limits) -> list[inspect.Parameter]:
    def arg(
        name: str, annotation: object, default: object = inspect.Parameter.empty
    ) -> inspect.Parameter:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Parameter(name, kind, default=default, annotation=annotation)

    query = Field(
        description="what the documents are ranked for", max_length=limits.max_query_chars
    )
    documents = Field(
        description="the texts to rank (passages, search results)",
        min_length=1,
        max_length=limits.max_documents,
    )
    top_n = Field(description="return only the best top_n documents (default: all)", ge=1)
    shown = Field(description="include each document's text in the results")
    budgets = [
        arg(
            b.name,
            Annotated[int | None, Field(description=b.description, ge=1, le=tool.cap(b))],
            None,
        )
        for b in BUDGETS
    ]
    return [
        arg("query", Annotated[str, query]),
        arg("documents", Annotated[list[str], documents]),
        arg("top_n", Annotated[int | None, top_n], None),
        *budgets,
        arg("return_documents", Annotated[bool, shown], False),
    ]


def build_server(tool: RerankTool, limits: Limits) -> MCPServer:
    """An ``MCPServer`` named ``permsc`` with the ``rerank`` tool of ``tool``. The tool's
    signature (which the SDK turns into its input schema) is built, not written: it carries
    this server's limits, and each of ``BUDGETS`` is an argument without another change."""

    async def rerank(
        query: str,
        documents: list[str],
        top_n: int | None = None,
        return_documents: bool = False,
        **budgets: int | None,
    ) -> RerankResult:  # called with the arguments of the signature below, by name
        try:
            return await tool.rerank(query, documents, top_n, return_documents, **budgets)
        except ToolError as exc:  # the SDK's own: an is_error result with this message
            raise SDKToolError(str(exc)) from exc

    rerank.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        _parameters(tool, limits), return_annotation=RerankResult
    )
    server: MCPServer = MCPServer("permsc", version=__version__, instructions=DESCRIPTION)
    server.add_tool(rerank, name="rerank", title="Rerank documents (PSC)", description=DESCRIPTION)
    return server


class _RequireKey:
    """ASGI middleware, as ``permsc serve``: every HTTP request needs ``Authorization: Bearer
    KEY`` with one of the server's client keys (none configured: everyone is let in), and
    each key has at most ``key_concurrency`` requests in progress (the others wait)."""

    def __init__(self, app: ASGIApp, keys: KeyRing, key_concurrency: int) -> None:
        self.app, self.keys, self.key_concurrency = app, keys, key_concurrency
        self.per_key: dict[str, anyio.CapacityLimiter] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        try:
            key = self.keys.identify((headers.get(b"authorization") or b"").decode("latin-1"))
        except Unauthorized as exc:
            body = json.dumps({"message": str(exc)}).encode()
            head = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
            await send({"type": "http.response.start", "status": 401, "headers": head})
            await send({"type": "http.response.body", "body": body})
            return None
        limiter = self.per_key.setdefault(key, anyio.CapacityLimiter(self.key_concurrency))
        async with limiter:
            return await self.app(scope, receive, send)


def http_app(server: MCPServer, tool: RerankTool, config: ServeConfig) -> Starlette:
    """The streamable HTTP app (``/mcp``, stateless), behind the client keys of ``config``;
    the tool's rankers close when the app shuts down. On a loopback host the SDK also
    refuses requests whose ``Host`` or ``Origin`` is not loopback (DNS rebinding)."""
    inner = server.streamable_http_app(
        stateless_http=True,
        host=config.host,
        max_request_body_size=config.limits.max_body_bytes,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            try:
                yield
            finally:
                await tool.aclose()

    app = Starlette(routes=inner.routes, lifespan=lifespan)
    keys, concurrency = KeyRing(config.keys), config.limits.key_concurrency
    app.add_middleware(_RequireKey, keys=keys, key_concurrency=concurrency)
    return app


def _tool(config: ServeConfig, model: str | None) -> RerankTool:
    """The tool over ``model`` (a configured name; default: the first configured)."""
    models = {m.name: m for m in config.models}
    chosen = models.get(model) if model else config.models[0]
    if chosen is None:
        raise ConfigurationError(f"unknown model {model!r}; configured: {', '.join(models)}")
    secrets = (*config.keys, os.environ.get(chosen.api_key_env) if chosen.api_key_env else None)
    scale = SCALES[chosen.relevance_score]
    return RerankTool(chosen.build(), chosen.name, secrets=secrets, scale=scale)


async def _stdio(config: ServeConfig, model: str | None) -> None:
    tool = _tool(config, model)
    try:
        await build_server(tool, config.limits).run_stdio_async()
    finally:
        await tool.aclose()


def _run_stdio(config: ServeConfig, model: str | None) -> None:
    anyio.run(_stdio, config, model)


def _run_http(config: ServeConfig, model: str | None) -> None:
    tool = _tool(config, model)
    serve(config, app=http_app(build_server(tool, config.limits), tool, config), name="permsc mcp")


TRANSPORTS: dict[str, Callable[[ServeConfig, str | None], None]] = {
    "stdio": _run_stdio,
    "http": _run_http,
}


def serve_mcp(config: ServeConfig, model: str | None = None, transport: str = "stdio") -> None:
    """Serve the tool over ``transport`` (``"stdio"`` until stdin closes; ``"http"`` on
    ``config.host:port`` until SIGTERM) with the ranker of ``model``."""
    if transport not in TRANSPORTS:
        raise ConfigurationError(f"transport must be one of {', '.join(TRANSPORTS)}")
    TRANSPORTS[transport](config, model)
