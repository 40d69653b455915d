"""``permsc mcp``: PSC reranking as an MCP tool, over stdio or streamable HTTP (docs/agents.md).

The flags are ``permsc serve``'s (a model from the flags or ``--config``, client keys, limits),
read the same way; ``--tool-model`` picks the configured model the tool ranks with.

Example:
    $ permsc mcp --backend openai:gpt-4o-mini -m 10
    $ PERMSC_API_KEYS=my-client-key permsc mcp --transport http --port 8765 --config models.toml
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from permsc_integrations.cli._serve import add_server_arguments, config_from_args
from permsc_integrations.errors import MissingDependencyError

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations.cli._common import Subparsers

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "mcp",
        help="serve a rerank tool to agents over MCP (stdio, or --transport http)",
        description="PSC reranking as an MCP tool: stdio by default (docs/agents.md).",
    )
    m = parser.add_argument_group("mcp")
    m.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default: the client starts this process) or streamable HTTP on /mcp",
    )
    m.add_argument(
        "--tool-model",
        metavar="NAME",
        help="the model of --config the tool ranks with (default: the first one)",
    )
    add_server_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes (stdio) or SIGTERM (http); returns 0."""
    config = config_from_args(args)
    try:
        # lazy: the mcp extra
        from permsc_integrations.mcp_server import serve_mcp
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "mcp", "mcp", purpose="permsc mcp") from exc
    # lazy: start-up time (as permsc serve: redacted, bounded, on stderr, never stdout)
    from permsc_integrations.serve import configure_logging

    configure_logging(args.log_level, config.secrets)
    serve_mcp(config, args.tool_model, args.transport)
    return 0
