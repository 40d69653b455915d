"""OpenTelemetry spans for every ranking, when the application traces (docs/agents.md).

Tracing turns on by itself once the application has configured a tracer provider
(``opentelemetry.trace.set_tracer_provider``): each ``PSCRanker.arank`` (and so ``rank``, the
adapters, ``permsc serve`` and ``permsc mcp``) emits one ``rerank`` span, a child of whatever
span is current, and under it one ``chat`` client span per model call, following the GenAI
semantic conventions; PSC's own attributes are prefixed ``permsc.``. The ``rerank`` names
follow the proposal semantic-conventions-genai#253 (``gen_ai.rerank.candidate.count``,
``gen_ai.rerank.top_n``). No text of the query or the documents is recorded unless the
application opts in with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the
GenAI instrumentations' switch); then each call span carries ``gen_ai.input.messages``.

Nothing here imports OpenTelemetry until a provider is configured: a process that never
imported ``opentelemetry`` pays one dictionary lookup per ranking.

Example:
    >>> model_of("openai:gpt-4o-mini@api.openai.com"), model_of("embedded")
    ('gpt-4o-mini', 'embedded')
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence, Sized
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

from permsc_integrations._events import Event, EventHook, emit
from permsc_integrations._items import normalize_items
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.results import Usage

if TYPE_CHECKING:  # optional: OpenTelemetry is imported only once the application traces
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer
    from opentelemetry.util.types import AttributeValue

    Attributes = dict[str, AttributeValue]

__all__ = ["reported_top_n"]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_PROVIDERS = {"openai": "openai"}  # backend kind -> gen_ai.provider.name, where one is known
_FAILED = frozenset({"error", "invalid"})  # sample_end statuses of a sample without a ranking
_top_n: ContextVar[int | None] = ContextVar("permsc_top_n", default=None)


@contextlib.contextmanager
def reported_top_n(top_n: int | None) -> Iterator[None]:
    """Report ``top_n`` (the results the caller keeps) on the ``rerank`` spans of the rankings
    made inside; without it the span shows the ranker's ``top_k``, if set."""
    token = _top_n.set(top_n)
    try:
        yield
    finally:
        _top_n.reset(token)


def tracer() -> Tracer | None:
    """The application's tracer, or None when it traces nothing: OpenTelemetry never imported,
    or no tracer provider configured (the API's default proxy)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    # lazy: optional, and only imported once the application has imported it
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer("permsc_integrations")


def model_of(backend_name: str) -> str:
    """The model a backend name (``kind:model@host``) names; the whole name if it has no kind."""
    kind, _, rest = backend_name.partition(":")
    return (rest.rpartition("@")[0] or rest) if rest else kind


def _server(backend_name: str) -> Attributes:
    """``server.address``/``server.port`` of a backend name ending in ``@host[:port]``."""
    _, at, where = backend_name.rpartition("@")
    if not at:
        return {}
    host, colon, port = where.rpartition(":")
    if colon and port.isdigit():
        return {"server.address": host.strip("[]"), "server.port": int(port)}
    return {"server.address": where}


def _name_of(value: object) -> str:
    return value if isinstance(value, str) else getattr(value, "__name__", type(value).__name__)


def _common(backend_name: str) -> Attributes:
    provider = _PROVIDERS.get(backend_name.partition(":")[0])
    common = {"gen_ai.request.model": model_of(backend_name), "permsc.backend": backend_name}
    return {**common, **({"gen_ai.provider.name": provider} if provider else {})}


def _request_attributes(backend_name: str, options: RankingOptions, items: object) -> Attributes:
    top_n = _top_n.get()
    top_n = options.top_k if top_n is None else top_n
    return {
        "gen_ai.operation.name": "rerank",
        **_common(backend_name),
        **({"gen_ai.rerank.candidate.count": len(items)} if isinstance(items, Sized) else {}),
        **({"gen_ai.rerank.top_n": top_n} if top_n is not None else {}),
        "permsc.num_permutations": options.num_permutations,
        "permsc.strategy": _name_of(options.strategy),
        "permsc.aggregator": _name_of(options.aggregator),
        "permsc.scoring": options.scoring,
        "permsc.window_size": options.window_size,
        **({"permsc.max_calls": options.max_calls} if options.max_calls is not None else {}),
    }


def _usage_attributes(usage: Usage) -> Attributes:
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "permsc.calls": usage.calls,
        "permsc.retries": usage.retries,
        "permsc.cached_calls": usage.cached_calls,
        "permsc.saved_calls": usage.saved_calls,
    }


def _ints(value: object) -> tuple[int, ...]:
    """An event's ``items`` or ``permutation`` (positions), or none."""
    return tuple(value) if isinstance(value, (tuple, list)) else ()


def _messages_json(messages: Sequence[Mapping[str, object]]) -> str:
    """``gen_ai.input.messages`` as the conventions shape it, serialised as JSON."""
    parts = [
        {"role": m["role"], "parts": [{"type": "text", "content": str(m["content"])}]}
        for m in messages
    ]
    return json.dumps(parts, ensure_ascii=False)


class RankingSpan:
    """One ranking's ``rerank`` span and, fed by its events (:attr:`hook`), one ``chat`` span
    per model call. Used by ``PSCRanker.arank`` as ``with span: ...``: the span is current
    inside (spans made there nest under it) and ends on exit, with the error if one is raised.
    """

    def __init__(
        self,
        otel_tracer: Tracer,
        backend_name: str,
        options: RankingOptions,
        query: str,
        items: Sequence[object],
    ) -> None:
        # lazy: optional, and only imported once the application traces
        from opentelemetry import context, trace

        self._trace, self._context = trace, context
        self.tracer, self.backend_name, self.options = otel_tracer, backend_name, options
        self.content = None  # (query, texts, prompt) when the application opts in to text
        if os.environ.get(CAPTURE_CONTENT_ENV, "").lower() == "true":  # bad items: raised here
            self.content = (query, normalize_items(items)[0], options.build_prompt())
        self.started: dict[tuple[int | None, int | None], int] = {}  # (window, sample) -> ns
        self.windows: dict[int | None, Sequence[int]] = {}  # window -> its items (caller's)
        self.failed = 0
        attributes = _request_attributes(backend_name, options, items)
        name = f"rerank {model_of(backend_name)}"
        self.span = otel_tracer.start_span(name, attributes=attributes)
        self.parent = trace.set_span_in_context(self.span)
        self._token: Token[Context] | None = None

    @classmethod
    def start(
        cls, backend_name: str, options: RankingOptions, query: str, items: Sequence[object]
    ) -> RankingSpan | None:
        """The span of a ranking about to start, or None when the application traces nothing."""
        found = tracer()
        return None if found is None else cls(found, backend_name, options, query, items)

    def hooked(self, on_event: EventHook | None) -> EventHook:
        """``on_event`` and this span's hook, as one hook."""
        if on_event is None:
            return self.hook

        async def both(event: Event) -> None:
            await emit((on_event, self.hook), event)

        return both

    def hook(self, event: Event) -> None:
        """Take one event of the ranking: a call's start or end, or the request's end."""
        key = (event.window, event.sample)
        if event.kind == "window_start":
            self.windows[event.window] = _ints(event.detail.get("items"))
        elif event.kind == "sample_start":
            self.started[key] = time.time_ns()
        elif event.kind == "sample_end":
            self._call(event, self.started.pop(key, None))
        elif event.kind == "request_end":
            usage, confidence = event.detail.get("usage"), event.detail.get("confidence")
            self.span.set_attributes(_usage_attributes(usage) if isinstance(usage, Usage) else {})
            if isinstance(confidence, float):
                self.span.set_attribute("permsc.confidence", confidence)
            if isinstance(stopped := event.detail.get("stopped"), str):
                self.span.set_attribute("permsc.stopped", stopped)

    def _call(self, event: Event, start: int | None) -> None:
        """The ``chat`` span of one finished sample. A sample that made no call has none: a
        cache hit, one the call budget skipped, or one an open breaker refused unsent (after a
        fatal error), which still counts as failed."""
        usage = event.detail.get("usage")
        usage = usage if isinstance(usage, Usage) else Usage()
        status = event.detail.get("status")
        self.failed += status in _FAILED
        if not usage.calls and (usage.cached_calls or status in ("skipped", "error")):
            return
        attempts, retries = event.detail.get("attempts", 1), event.detail.get("retries", 0)
        attributes: Attributes = {
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
            "permsc.attempts": attempts if isinstance(attempts, int) else 1,
            "permsc.retries": retries if isinstance(retries, int) else 0,
            "permsc.parse_status": str(status),
            **({"gen_ai.input.messages": self._prompt(event)} if self.content else {}),
        }
        span = self._call_span(event.window, event.sample, start, attributes)
        error = event.detail.get("error")
        if status == "error" and error:  # "TypeName: message": the type only, never the text
            self._fail(span, str(error).partition(":")[0])
        span.end()

    def _prompt(self, event: Event) -> str:
        """The first ask's messages of a sample (re-asks add to them), rendered again."""
        assert self.content is not None
        query, texts, prompt = self.content
        inside = self.windows.get(event.window, ())
        shown = [texts[inside[p]] for p in _ints(event.detail.get("permutation"))]
        return _messages_json(prompt.render(query, shown))

    def _call_span(
        self, window: int | None, sample: int | None, start: int | None, attributes: Attributes
    ) -> Span:
        settings = self.options.generation
        common = {
            "gen_ai.operation.name": "chat",
            **_common(self.backend_name),
            **_server(self.backend_name),
            "gen_ai.request.temperature": settings.temperature,
            **({"gen_ai.request.max_tokens": settings.max_tokens} if settings.max_tokens else {}),
            "permsc.window": -1 if window is None else window,
            "permsc.sample": -1 if sample is None else sample,
        }
        return self.tracer.start_span(
            f"chat {model_of(self.backend_name)}",
            context=self.parent,
            kind=self._trace.SpanKind.CLIENT,
            attributes={**common, **attributes},
            start_time=start,
        )

    def _fail(self, span: Span, error_type: str) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error_type))

    def __enter__(self) -> RankingSpan:
        self._token = self._context.attach(self.parent)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        if self._token is not None:
            self._context.detach(self._token)
        for window, sample in self.started:  # calls cut short: a fatal error or a cancel
            span = self._call_span(window, sample, self.started[(window, sample)], {})
            self._fail(span, "cancelled")
            span.end()
        self.span.set_attribute("permsc.failed_samples", self.failed)
        if kind is not None:
            self._fail(self.span, kind.__qualname__)
        self.span.end()
