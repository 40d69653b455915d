"""The spans this process finishes, read back with the OpenTelemetry SDK's in-memory exporter.

A process has one global tracer provider, set once. :func:`recording_spans` installs an SDK
``TracerProvider`` as the global one if none is set (adding to it if the application already
set an SDK provider), and records into an ``InMemorySpanExporter`` only inside its ``with``
block: spans finished outside it are not kept. Needs ``opentelemetry-sdk`` (``agents-test``).

Example:
    >>> from opentelemetry import trace
    >>> with recording_spans() as exporter:
    ...     with trace.get_tracer("demo").start_as_current_span("work"):
    ...         pass
    >>> [span.name for span in exporter.get_finished_spans()]
    ['work']
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from permsc_integrations._registry import publish
from permsc_integrations.errors import MissingDependencyError

try:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError as exc:  # the SDK is a test dependency, not the library's
    raise MissingDependencyError("opentelemetry-sdk", "agents-test", purpose="spans") from exc

__all__ = ["recording_spans"]

_lock = threading.Lock()
_gate: _Gate | None = None  # the one gated processor of this process, once installed


class _Gate(SimpleSpanProcessor):  # type: ignore[misc]
    """Exports only while a recording is open."""

    open = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.open:
            super().on_end(span)


def _install() -> _Gate:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise RuntimeError(f"the global tracer provider is a {type(provider).__name__}")
    gate = _Gate(InMemorySpanExporter())
    provider.add_span_processor(gate)
    return gate


@contextlib.contextmanager
def recording_spans() -> Iterator[InMemorySpanExporter]:
    """An ``InMemorySpanExporter`` holding the spans finished inside the block (not thread-
    exclusive: spans other threads finish meanwhile are kept too)."""
    global _gate
    with _lock:
        if _gate is None:
            _gate = _install()
    exporter = _gate.span_exporter
    assert isinstance(exporter, InMemorySpanExporter)  # what _install gave it
    exporter.clear()
    _gate.open = True
    try:
        yield exporter
    finally:
        _gate.open = False


publish("permsc_integrations.testing", recording_spans)
