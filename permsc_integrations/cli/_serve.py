"""``permsc serve``: a Cohere-compatible rerank API (``POST /v2/rerank``) over PSC.

Example:
    $ PERMSC_API_KEYS=my-client-key permsc serve --backend openai:gpt-4o-mini -m 20
    $ permsc serve --config models.toml --host 0.0.0.0 --api-key-file keys.txt
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from permsc_integrations.cli._common import (
    add_backend_arguments,
    add_ranking_arguments,
    backend_spec,
    ranker_options,
    ranking_flags,
)

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations.cli._common import Subparsers
    from permsc_integrations.serve import ServeConfig

__all__ = ["add_parser", "add_server_arguments", "run", "config_from_args"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve",
        help="serve PSC reranking over HTTP (Cohere's rerank API)",
        description="A rerank service that Cohere's clients call: POST /v2/rerank (docs/serve.md).",
    )
    add_server_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's flags (host, port, models, keys, limits, logs), the ranking flags and the
    backend flags: ``permsc serve``'s, also ``permsc mcp``'s (:func:`config_from_args`)."""
    s = parser.add_argument_group("server")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    s.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0: any free)")
    s.add_argument("--config", help="TOML file of named models ([models.NAME] tables)")
    s.add_argument("--name", default="permsc", help="the model name the flags' model answers to")
    s.add_argument(
        "--relevance-score",
        default="win_share",
        choices=("win_share", "top_probability"),
        help="the scale of the flags' model's scores: pairwise win share (default) or each "
        "document's probability of the top k (needs --top-k or --max-calls; docs/scores.md)",
    )
    s.add_argument("--api-key-file", help="client keys, one a line (also: PERMSC_API_KEYS)")
    s.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve a non-loopback --host without client keys",
    )
    s.add_argument("--max-documents", type=int, default=1000, help="per request (default 1000)")
    s.add_argument(
        "--max-body-bytes", type=int, default=4 * 1024 * 1024, help="request size (default 4 MiB)"
    )
    s.add_argument(
        "--max-query-chars", type=int, default=10_000, help="query length (default 10000)"
    )
    s.add_argument(
        "--key-concurrency",
        type=int,
        default=32,
        help="requests of one client key ranked at once; the rest wait (default 32)",
    )
    s.add_argument(
        "--grace-period",
        type=float,
        default=30.0,
        help="seconds in-flight requests get to finish after SIGTERM (default 30)",
    )
    _add_client_limits(parser)
    s.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="(default: info)",
    )
    add_ranking_arguments(parser, ranking_flags(service=True))
    add_backend_arguments(parser)


def _add_client_limits(parser: argparse.ArgumentParser) -> None:
    c = parser.add_argument_group("slow clients and browsers (docs/serve.md)")
    c.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a connection gets to send a request head, after it opens or after its "
        "previous answer; then it is closed (default 10)",
    )
    c.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        help="seconds a request gets to send its whole body after its head; then a 408 "
        "(default 30)",
    )
    c.add_argument(
        "--send-timeout",
        type=float,
        default=30.0,
        help="seconds a client gets to read each part of an answer; then its connection is "
        "closed (default 30)",
    )
    c.add_argument(
        "--key-queue",
        type=int,
        help="requests of one client key waiting for a turn to rank (default: as many as "
        "--key-concurrency); past it a 429 at once",
    )
    c.add_argument(
        "--queue-timeout",
        type=float,
        default=60.0,
        help="seconds a request waits for its key's turn to rank; then a 503 (default 60)",
    )
    c.add_argument(
        "--max-connections",
        type=int,
        help="client connections held at once (default: what the open-file limit leaves, "
        "at most 4096); at the cap the longest idle one is closed to make room",
    )
    c.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="without client keys on loopback, also answer this Host ('*': any); repeatable",
    )
    c.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="grant CORS to this browser origin (e.g. https://app.example); repeatable",
    )


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The :class:`~permsc_integrations.serve.ServeConfig` of the parsed flags."""
    # lazy: start-up time (the ranker and its backends load only when serving)
    from permsc_integrations import serve as serving

    if args.config:
        models = serving.load_models(args.config)
    else:
        spec = backend_spec(args)
        models = (
            serving.ModelConfig(
                args.name,
                spec,
                ranker_options(args, spec),
                args.base_url,
                device=args.device,
                relevance_score=args.relevance_score,
            ),
        )
    limits = serving.Limits(
        max_documents=args.max_documents,
        max_body_bytes=args.max_body_bytes,
        max_query_chars=args.max_query_chars,
        key_concurrency=args.key_concurrency,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_connections=args.max_connections,
        key_queue=args.key_queue,
        queue_timeout=args.queue_timeout,
        send_timeout=args.send_timeout,
    )
    return serving.ServeConfig(
        models=models,
        keys=serving.load_keys(os.environ.get(serving.ENV_KEYS), args.api_key_file),
        limits=limits,
        host=args.host,
        port=args.port,
        allow_public_without_keys=args.allow_unauthenticated,
        grace_period=args.grace_period,
        allowed_hosts=tuple(args.allowed_host),
        cors_origins=tuple(args.cors_origin),
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; returns 0 after a clean drain."""
    config = config_from_args(args)
    # lazy: start-up time, and uvicorn is the serve extra's
    from permsc_integrations.serve import configure_logging, serve

    configure_logging(args.log_level, config.secrets)
    serve(config)
    return 0
