"""``permsc mcp``: PSC reranking as an MCP tool for agents (docs/agents.md).

One tool, ``rerank``: the agent sends a query and documents (optionally ``top_n``, a budget,
``return_documents``) and gets the documents best first with a ``relevance_score``, the
ranking's confidence and its usage. The model, its keys and the ranking options are the
server's, from flags or a TOML file as for ``permsc serve``; over HTTP the same client keys
apply. Needs the ``mcp`` extra: ``pip install 'permsc-integrations[mcp]'``.

Example:
    $ permsc mcp --backend openai:gpt-4o-mini -m 10                  # stdio
    $ PERMSC_API_KEYS=k-123456 permsc mcp --transport http --port 8765 --config models.toml
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from permsc_integrations._registry import lazy_exports, publish
from permsc_integrations.mcp_server._tool import (
    BUDGETS,
    Budget,
    RerankResult,
    RerankTool,
    ToolError,
)

if TYPE_CHECKING:
    from permsc_integrations.mcp_server._server import serve_mcp as serve_mcp

__all__ = ["Budget", "BUDGETS", "RerankTool", "RerankResult", "ToolError"]

publish(__name__, Budget, RerankTool, RerankResult, ToolError)
# Besides __all__, what ``permsc mcp`` runs (the mcp SDK loads with it).
__getattr__ = lazy_exports(__name__, {"serve_mcp": "permsc_integrations.mcp_server._server"})
