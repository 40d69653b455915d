"""Prometheus metrics of one server, in a registry of its own (``GET /metrics``).

Labels are the route, the served model name and the HTTP status: never a key, a query or a
document.

Example:
    >>> metrics = ServeMetrics()
    >>> metrics.requests.labels(route="/v2/rerank", model="psc", status="200").inc()
    >>> line = b'permsc_serve_requests_total{model="psc",route="/v2/rerank",status="200"} 1.0'
    >>> line in metrics.render()[0]
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from permsc_integrations.results import Usage
    from permsc_integrations.serve._connections import Connections

__all__ = ["ServeMetrics"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)


class ServeMetrics:
    """Requests by status, upstream calls and tokens, latency, requests in flight and
    waiting for their key's turn, client connections held and closed."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "permsc_serve_requests",
            "HTTP requests answered",
            ["route", "model", "status"],
            registry=r,
        )
        self.upstream_calls = Counter(
            "permsc_serve_upstream_calls", "calls sent to the upstream model", ["model"], registry=r
        )
        self.tokens = Counter(
            "permsc_serve_tokens", "upstream tokens", ["model", "kind"], registry=r
        )
        self.latency = Histogram(
            "permsc_serve_request_seconds",
            "rerank latency, from the body read to the answer",
            ["model"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "permsc_serve_requests_in_flight", "rerank requests being ranked", registry=r
        )
        self.waiting = Gauge(
            "permsc_serve_requests_waiting",
            "rerank requests waiting for their key's turn (--key-concurrency)",
            registry=r,
        )

        self.connections_open = Gauge(
            "permsc_serve_connections_open", "client connections held", registry=r
        )
        self.slow_clients = Counter(
            "permsc_serve_slow_clients",
            "slow or idle clients cut off: slow_head, evicted (at the connection cap), no_fds "
            "(left unaccepted), slow_body (408)",
            ["reason"],
            registry=r,
        )

    def slow_client(self, reason: str) -> None:
        self.slow_clients.labels(reason=reason).inc()

    def watch_connections(self, connections: Connections) -> None:
        """Report ``connections.open`` (a :class:`~._connections.Connections`) at each scrape."""
        self.connections_open.set_function(lambda: connections.open)

    def count_usage(self, model: str, usage: Usage | None) -> None:
        """Add a ranking's upstream calls and tokens (a failed ranking's too)."""
        if usage is None:
            return
        self.upstream_calls.labels(model=model).inc(usage.calls)
        self.tokens.labels(model=model, kind="prompt").inc(usage.prompt_tokens)
        self.tokens.labels(model=model, kind="completion").inc(usage.completion_tokens)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
