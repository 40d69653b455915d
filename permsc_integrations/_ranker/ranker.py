"""PSCRanker: permutation self-consistency over whole lists, one or many at a time.

Example:
    >>> from permsc_integrations.backends.base import Completion
    >>> class ByLength:  # a toy backend: longer passages rank first
    ...     name = "by-length"
    ...     async def acomplete(self, messages, settings):
    ...         shown = [m["content"] for m in messages[3:-1:2]]
    ...         best = sorted(range(len(shown)), key=lambda p: -len(shown[p]))
    ...         return Completion(text=" > ".join(f"[{p + 1}]" for p in best))
    ...     async def aclose(self):
    ...         pass
    >>> with PSCRanker(ByLength(), num_permutations=4, aggregator="borda") as ranker:
    ...     result = ranker.rank("longest?", ["aa", "a", "aaaa", "aaa"])
    >>> result.order, result.usage.calls
    ((2, 3, 0, 1), 4)
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio

from permsc_integrations._calls.breaker import Breaker
from permsc_integrations._calls.bridge import run_sync
from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations._calls.spending import Meter, admitted
from permsc_integrations._events import EventHook
from permsc_integrations._items import normalize_items
from permsc_integrations._options.keywords import RankingKeywords
from permsc_integrations._options.options import DEFAULT_MAX_CONCURRENCY, RankingOptions
from permsc_integrations._ranker._request import run
from permsc_integrations._run.engine import Engine
from permsc_integrations.backends import check_backend_options, resolve_backend
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import (
    ConfigurationError,
    SpendingCapError,
    add_note,
    grouped,
)
from permsc_integrations.results import RankingResult, Usage
from permsc_integrations.strategies import (
    choose,
    planned_tokens,
)
from permsc_integrations.tracing import RankingSpan

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # Python 3.10
    from typing_extensions import Unpack

__all__ = ["PSCRanker", "RankRequest", "RankingKeywords", "DEFAULT_MAX_CONCURRENCY"]


@dataclass(frozen=True)
class RankRequest:
    """One list to rank: ``items`` are strings, documents or mappings; ``id`` tags events."""

    query: str
    items: Sequence[Any]
    id: Any = None


class PSCRanker:
    """Rank lists with an LLM, robust to position bias (see ``docs/architecture.md``).

    ``backend`` is a backend object or a spec string (``"openai:gpt-4o-mini"``; built with
    ``backend_options`` and closed by :meth:`aclose`; a backend object stays the caller's to
    close). The options are those of :class:`~permsc_integrations.RankingOptions`,
    given as keywords or as ``options=`` (keywords override it); an unknown one is refused.
    Every call this ranker makes (all windows, all requests, from any thread or event loop)
    shares one :class:`~.run.limiter.CallLimiter` of ``max_concurrency`` slots;
    ``request_concurrency`` caps each request further. One ranker may be used from sync code,
    async code and threads at once. Lists
    longer than ``window_size`` are ranked by ``strategy`` (:mod:`.strategies`): by default
    rounds of blocks, all of a round's calls at once, the last round one PSC window over the
    head; ``"sliding"``: RankGPT's windows, one after another. Each window or round needs
    ``min_successful`` good samples (default ``max(1, m // 2)``) or raises
    :class:`InsufficientSamplesError`.
    """

    def __init__(
        self,
        backend: str | Backend,
        *,
        options: RankingOptions | None = None,
        on_event: EventHook | None = None,
        **overrides: Unpack[RankingKeywords],
    ) -> None:
        if options is not None and not isinstance(options, RankingOptions):
            raise ConfigurationError(
                f"options must be a RankingOptions, got {type(options).__name__}"
            )
        opts = (options or RankingOptions()).replace(**overrides) if overrides else options
        self.options: RankingOptions = opts or RankingOptions()
        o = self.options
        self._owns_backend = isinstance(backend, str)
        check_backend_options(backend, o.backend_options)
        self.backend = resolve_backend(backend, **o.backend_options)
        self.on_event = on_event
        self._limiter = CallLimiter(o.max_concurrency)
        self._breaker = Breaker(o.breaker_cooldown)
        self._meter = Meter(o.ranker_cap, "ranker", o.prices) if o.ranker_cap else None
        self._engine = Engine.build(o, self.backend, limiter=self._limiter, breaker=self._breaker)
        self._built = True  # from here on, __setattr__ refuses what the ranker would ignore

    def _set(self, name: str, value: object) -> None:
        """``__setattr__``: a built ranker refuses a write it would ignore (an option, a part
        made from the options, a misspelt name), with what to do instead; its own private
        attributes and :data:`_SETTABLE` stay writable."""
        if name.startswith("_") or name in _SETTABLE or "_built" not in vars(self):
            object.__setattr__(self, name, value)
        else:
            raise ConfigurationError(_refusal(self, name))

    if not TYPE_CHECKING:  # so that mypy refuses a misspelt attribute too
        __setattr__ = _set

    def __repr__(self) -> str:
        return f"PSCRanker({self.backend.name!r}, {self.options!r})"

    async def arank(
        self,
        query: str,
        items: Sequence[Any],
        *,
        on_event: EventHook | None = None,
        request_id: Any = None,
    ) -> RankingResult:
        """Rank ``items`` for ``query``; ``result.order`` indexes ``items``, best first.

        ``on_event`` receives this request's events besides the ranker's hook; ``request_id``
        tags them. Cancelling the caller cancels every call in flight. When the application
        has configured an OpenTelemetry tracer provider, the ranking is one span (tracing.py).
        """
        span = RankingSpan.start(self.backend.name, self.options, query, items)
        if span is None:
            return await self._arank(query, items, on_event, request_id)
        with span:
            return await self._arank(query, items, span.hooked(on_event), request_id)

    async def _arank(
        self, query: str, items: Sequence[Any], on_event: EventHook | None, request_id: Any
    ) -> RankingResult:
        if not isinstance(query, str):
            raise ConfigurationError(f"query must be a str, got {type(query).__name__}")
        texts, _ = normalize_items(items)
        hooks = (self.on_event, on_event)
        choice = choose(self.options.strategy, len(texts), self.options)  # once per request
        plan = choice.plan
        need = functools.partial(
            planned_tokens, plan, functools.partial(self._engine.prompt.render, query), texts
        )
        try:  # a ranker's cap first holds what the plan needs (_admission.py), or refuses
            async with admitted(self._meter, (plan.calls.low, plan.calls.high), need) as hold:
                state = self._engine.open(
                    query, texts, hooks=hooks, request_id=request_id, ranker_meter=hold, plan=plan
                )
                return await run(self._engine, state, choice)
        except SpendingCapError as exc:
            if exc.usage is None:  # refused before it started: it spent nothing
                exc.usage = Usage()
            raise

    @property
    def spent(self) -> Usage | None:
        """What the ranker has spent against ``ranker_cap`` (None without one): calls sent
        and tokens reported by every request, thread and loop, with ``cost`` if priced."""
        return self._meter.spent if self._meter is not None else None

    def rank(
        self, query: str, items: Sequence[Any], *, on_event: EventHook | None = None
    ) -> RankingResult:
        """Sync :meth:`arank`, through the one bridge (works inside a running event loop)."""
        return run_sync(self.arank, query, items, on_event=on_event)

    async def arank_many(
        self,
        requests: Iterable[RankRequest | tuple[str, Sequence[Any]]],
        *,
        on_event: EventHook | None = None,
        return_exceptions: bool = False,
    ) -> AsyncIterator[RankingResult | BaseException]:
        """Rank many lists at once; yield each result as it completes (``result.request``).

        All calls share the ranker's limiter, and at most ``max_concurrency`` requests are
        under way at once (the others wait their turn, in order). A failed request never
        stops the others: with ``return_exceptions=True`` its exception (with ``.request``
        set) is yielded in its place; otherwise every other result is yielded first and then
        the first failure is raised, with a note counting any further ones. Wrap the iterator
        in ``contextlib.aclosing`` if you may ``break`` out of the loop: closing it cancels
        the requests still under way.
        """
        failures: list[BaseException] = []
        stream = self._stream([_as_request(r) for r in requests], on_event)
        async with contextlib.aclosing(stream):
            async for _, outcome in stream:
                if isinstance(outcome, BaseException) and not return_exceptions:
                    failures.append(outcome)
                else:
                    yield outcome
        if failures:
            raise _first_failure(failures)

    async def _stream(
        self, todo: list[RankRequest], on_event: EventHook | None
    ) -> AsyncGenerator[tuple[int, Any], None]:
        """``(position, result or exception)`` for every request, as each completes."""
        send, receive = anyio.create_memory_object_stream[Any](len(todo) or 1)
        active = anyio.CapacityLimiter(self.options.max_concurrency)  # requests started at once
        async with anyio.create_task_group() as tg:
            for number, request in enumerate(todo):
                tg.start_soon(self._one_of_many, request, number, on_event, send.clone(), active)
            send.close()
            try:
                async with receive:
                    async for item in receive:
                        yield item
            except GeneratorExit:  # the consumer stopped early: cancel what is left
                tg.cancel_scope.cancel()

    async def _one_of_many(
        self,
        request: RankRequest,
        number: int,
        on_event: EventHook | None,
        send: Any,
        active: anyio.CapacityLimiter,
    ) -> None:
        async with send, active:
            rid = request.id if request.id is not None else number
            try:
                result = await self.arank(
                    request.query, request.items, on_event=on_event, request_id=rid
                )
            except Exception as exc:
                try:  # declared on PermscError; set on any other exception that takes it
                    exc.request = request  # type: ignore[attr-defined]
                except AttributeError:
                    add_note(exc, f"while ranking request {rid!r}")
                await send.send((number, exc))
            else:
                await send.send((number, replace(result, request=request)))

    def rank_many(
        self,
        requests: Iterable[RankRequest | tuple[str, Sequence[Any]]],
        *,
        on_event: EventHook | None = None,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """Sync :meth:`arank_many`; results in request order (see there for failures)."""
        todo = [_as_request(r) for r in requests]
        return run_sync(self._collect, todo, on_event, return_exceptions)

    async def _collect(
        self, todo: list[RankRequest], on_event: EventHook | None, return_exceptions: bool
    ) -> list[Any]:
        out: list[Any] = [None] * len(todo)
        async with contextlib.aclosing(self._stream(todo, on_event)) as stream:
            async for number, outcome in stream:
                out[number] = outcome
        errors = [o for o in out if isinstance(o, BaseException)]
        if errors and not return_exceptions:
            raise _first_failure(errors)
        return out

    def reset_breaker(self) -> None:
        """Let calls go out again after a fatal error (a bad key, say) has been fixed; a
        cause that recovers by itself (a quota) is probed after ``breaker_cooldown``."""
        self._breaker.reset()

    def derive(self, **changes: Any) -> PSCRanker:
        """A ranker with ``changes`` to the options that shares this one's backend, call
        limiter, breaker and ranker cap (spent together): cheap enough to build per request
        (``permsc mcp``'s budgets), nothing of its own to close.

        >>> from permsc_integrations.testing import ScriptedBackend, oracle_responder
        >>> ranker = PSCRanker(ScriptedBackend(oracle_responder(len)), num_permutations=4)
        >>> cheaper = ranker.derive(num_permutations=2)
        >>> cheaper.rank("q", ["a", "bb"]).usage.calls, cheaper.backend is ranker.backend
        (2, True)
        """
        options = self.options.replace(**{"backend_options": {}, **changes})
        other = PSCRanker(self.backend, options=options, on_event=self.on_event)
        engine = Engine.build(options, self.backend, limiter=self._limiter, breaker=self._breaker)
        other._limiter, other._breaker, other._meter = self._limiter, self._breaker, self._meter
        other._engine = engine
        return other

    async def aclose(self) -> None:
        """Close the backend if this ranker created it from a spec string."""
        if self._owns_backend:
            await self.backend.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose`."""
        run_sync(self.aclose)

    async def __aenter__(self) -> PSCRanker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> PSCRanker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SETTABLE = frozenset({"on_event"})
"""What a built ranker reads on every request, so that setting it is honoured: its event hook.
Its parts (``_engine``, ``_limiter``, ``_breaker``, ``_meter``: the spending meter of
``ranker_cap``, which an adapter hands a rebuilt ranker) are private."""


def _refusal(ranker: PSCRanker, name: str) -> str:
    """Why ``ranker.name = ...`` is refused, and what to do instead."""
    if name in RankingOptions.names():
        return (
            f"a PSCRanker's options are fixed when it is built (its engine, limiter and breaker "
            f"are made from them), so setting {name!r} would be ignored; build a new ranker: "
            f"PSCRanker(backend, options=ranker.options.replace({name}=...))"
        )
    if hasattr(type(ranker), name) or name in vars(ranker):
        return (
            f"PSCRanker.{name} is fixed when the ranker is built, so setting it would be "
            "ignored; build a new ranker"
        )
    public = [a for a in vars(ranker) if not a.startswith("_")]
    close = difflib.get_close_matches(name, [*RankingOptions.names(), *public], n=2)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return (
        f"PSCRanker has no attribute {name!r}{hint}; its options are given when it is built "
        f"(PSCRanker(backend, num_permutations=...)) and fixed after"
    )


def _as_request(request: RankRequest | tuple[str, Sequence[Any]]) -> RankRequest:
    if isinstance(request, RankRequest):
        return request
    try:
        query, items = request
    except (TypeError, ValueError):
        raise ConfigurationError(
            "each request must be a RankRequest or a (query, items) pair, "
            f"got {type(request).__name__}"
        ) from None
    return RankRequest(query, items)


def _first_failure(failures: list[BaseException]) -> BaseException:
    for line in grouped(failures[1:]):  # identical failures once, counted
        add_note(failures[0], f"other requests also failed: {line}")
    return failures[0]
