"""The MCP server: one ``rerank`` tool (the official SDK's ``MCPServer``) over stdio, or over
streamable HTTP behind ``permsc serve``'s client keys.

The tool's input schema is built from the server's own limits (``max_documents``,
``max_query_chars``, the budgets' caps), so an agent sees them before it calls; its output
schema is :class:`~._tool.RerankResult`.

Example:
    >>> import anyio
    >>> from mcp import Client
    >>> from permsc_integrations import PSCRanker
    >>> from permsc_integrations.serve import Limits
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
import logging
import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as SDKToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field, ValidationError

from permsc_integrations import __version__
from permsc_integrations._checks import did_you_mean
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.mcp_server._http import KEY, http_app
from permsc_integrations.mcp_server._tool import BUDGETS, RerankResult, RerankTool, ToolError
from permsc_integrations.serve import SCALES, Busy, KeySlots, Limits, ServeConfig, explain, serve

if sys.version_info < (3, 11):  # pragma: no cover - Python 3.10
    from exceptiongroup import BaseExceptionGroup

__all__ = ["build_server", "http_app", "serve_mcp", "TRANSPORTS", "DESCRIPTION"]

logger = logging.getLogger("permsc_integrations.mcp")

Turn = Callable[[], AbstractAsyncContextManager[object]]
"""What a ranking holds while it runs (over HTTP: its client key's turn)."""

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


class _Server(MCPServer):
    """The SDK's server, with the ``rerank`` tool's arguments checked first: an unknown one
    is refused (never silently dropped), and a bad one is one line naming it (never
    pydantic's dump)."""

    def __init__(self, arguments: tuple[str, ...]) -> None:
        super().__init__("permsc", version=__version__, instructions=DESCRIPTION)
        self.arguments = arguments

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, object],
        context: Context[object, object] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        unknown = [a for a in arguments if a not in self.arguments]
        if name == "rerank" and unknown:
            said = "; ".join(
                f"unknown argument {a[:50]!r}{did_you_mean(a, self.arguments)}" for a in unknown
            )
            raise SDKToolError(f"{said}; rerank takes {', '.join(self.arguments)}")
        try:
            return await super().call_tool(name, arguments, context)
        except SDKToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise SDKToolError(explain(exc.__cause__)) from None
            raise


def build_server(tool: RerankTool, limits: Limits, turn: Turn = nullcontext) -> MCPServer:
    """An ``MCPServer`` named ``permsc`` with the ``rerank`` tool of ``tool``; each ranking
    runs inside ``turn()`` (over HTTP: its client key's turn). The tool's signature (which
    the SDK turns into its input schema) is built, not written: it carries this server's
    limits, and each of ``BUDGETS`` is an argument without another change."""

    async def rerank(
        query: str,
        documents: list[str],
        top_n: int | None = None,
        return_documents: bool = False,
        **budgets: int | None,
    ) -> RerankResult:  # called with the arguments of the signature below, by name
        try:
            async with turn():
                return await tool.rerank(query, documents, top_n, return_documents, **budgets)
        except ToolError as exc:  # the SDK's own: an is_error result with this message
            raise SDKToolError(str(exc)) from exc
        except Busy as busy:
            raise SDKToolError(busy.error.message) from None

    parameters = _parameters(tool, limits)
    signature = inspect.Signature(parameters, return_annotation=RerankResult)
    rerank.__dict__["__signature__"] = signature  # what inspect (and the SDK) read
    server = _Server(tuple(p.name for p in parameters))
    server.add_tool(rerank, name="rerank", title="Rerank documents (PSC)", description=DESCRIPTION)
    return server


def _tool(config: ServeConfig, model: str | None) -> RerankTool:
    """The tool over ``model`` (a configured name; default: the first configured)."""
    models = {m.name: m for m in config.models}
    chosen = models.get(model) if model else config.models[0]
    if chosen is None:
        raise ConfigurationError(f"unknown model {model!r}; configured: {', '.join(models)}")
    secrets = (*config.keys, os.environ.get(chosen.api_key_env) if chosen.api_key_env else None)
    scale = SCALES[chosen.relevance_score]
    return RerankTool(chosen.build(), chosen.name, secrets=secrets, scale=scale)


def _pipe_closed(exc: BaseException) -> bool:
    """Only a broken pipe: the client closed its end of our stdout (it left early)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_pipe_closed(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


async def _stdio(config: ServeConfig, model: str | None) -> None:
    tool = _tool(config, model)
    try:
        await build_server(tool, config.limits).run_stdio_async()
    except BaseException as exc:  # a client that left early is an end, not a crash
        if not _pipe_closed(exc):
            raise
        logger.info("permsc mcp: the client closed stdout before its answer; exiting")
    finally:
        await tool.aclose()


def _run_stdio(config: ServeConfig, model: str | None) -> None:
    anyio.run(_stdio, config, model)


def _run_http(config: ServeConfig, model: str | None) -> None:
    tool, limits = _tool(config, model), config.limits
    slots = KeySlots(limits.key_concurrency, limits.queue, limits.queue_timeout)
    server = build_server(tool, limits, lambda: slots.turn(KEY.get()))
    serve(config, app=http_app(server, tool, config), name="permsc mcp")


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
