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
import functools
import sys
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from permsc_integrations._calls.breaker import Breaker
from permsc_integrations._calls.bridge import run_sync
from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations._calls.spending import Meter, admitted
from permsc_integrations._events import EventHook
from permsc_integrations._items import normalize_items
from permsc_integrations._options.keywords import RankingKeywords
from permsc_integrations._options.options import DEFAULT_MAX_CONCURRENCY, RankingOptions
from permsc_integrations._options.spend import within_spend
from permsc_integrations._ranker._parts import (
    _SETTABLE,
    RankRequest,
    _as_request,
    _first_failure,
    _refusal,
    collect_requests,
    stream_requests,
    warn_degenerate,
)
from permsc_integrations._registry import publish
from permsc_integrations._run.engine import Engine
from permsc_integrations._run.request import RequestRun
from permsc_integrations._run.state import RequestState
from permsc_integrations.backends import check_backend_options, resolve_backend
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import ConfigurationError, PermscError, SpendingCapError
from permsc_integrations.results import RankingResult, Usage, WindowResult, scores_from_order
from permsc_integrations.strategies import (
    Choice,
    Outcome,
    choose,
    planned_tokens,
    served_k,
    top_probability,
)
from permsc_integrations.tracing import RankingSpan

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # Python 3.10
    from typing_extensions import Unpack

__all__ = ["PSCRanker", "RankRequest", "RankingKeywords", "DEFAULT_MAX_CONCURRENCY"]


class PSCRanker:
    """Rank lists with an LLM, robust to position bias (see ``docs/architecture.md``).

    ``backend`` is a backend object or a spec string (``"openai:gpt-4o-mini"``; built with
    ``backend_options`` and closed by :meth:`aclose`; a backend object stays the caller's to
    close). The options are those of :class:`~permsc_integrations.RankingOptions`,
    given as keywords or as ``options=`` (keywords override it); an unknown one is refused.
    Every call this ranker makes (all windows, all requests, from any thread or event loop)
    shares one :class:`~._calls.limiter.CallLimiter` of ``max_concurrency`` slots;
    ``request_concurrency`` caps each request further. One ranker may be used from sync code,
    async code and threads at once. Lists
    longer than ``window_size`` are ranked by ``strategy`` (:mod:`.strategies`): by default
    rounds of blocks, all of a round's calls at once, the last round one PSC window over the
    head; ``"sliding"``: RankGPT's windows, one after another. Each window or round needs
    ``min_successful`` good samples (default ``max(1, m // 2)``) or raises
    :class:`~.errors.InsufficientSamplesError`. ``meter`` is a ``ranker_cap`` meter to share
    with other rankers (what they send is spent together: :meth:`derive` passes its own, an
    adapter its rebuilt ranker's predecessor's, ``OneRanker.meter``); by default a new one
    for ``ranker_cap``, None without one.
    """

    def __init__(
        self,
        backend: str | Backend,
        *,
        options: RankingOptions | None = None,
        on_event: EventHook | None = None,
        meter: Meter | None = None,
        **overrides: Unpack[RankingKeywords],
    ) -> None:
        if options is not None and not isinstance(options, RankingOptions):
            raise ConfigurationError(
                f"options must be a RankingOptions, got {type(options).__name__}"
            )
        if meter is not None and not isinstance(meter, Meter):
            raise ConfigurationError(f"meter must be a Meter or None, got {type(meter).__name__}")
        opts = (options or RankingOptions()).replace(**overrides) if overrides else options
        self.options: RankingOptions = opts or RankingOptions()
        o = self.options
        self._owns_backend = isinstance(backend, str)
        check_backend_options(backend, o.backend_options)
        self.backend = resolve_backend(backend, **o.backend_options)
        self.on_event = on_event
        self._limiter = CallLimiter(o.max_concurrency)
        self._breaker = Breaker(o.breaker_cooldown)
        own = Meter(o.ranker_cap, "ranker", o.prices) if o.ranker_cap and meter is None else None
        self._meter = meter if meter is not None else own
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
        items: Sequence[object],
        *,
        on_event: EventHook | None = None,
        request_id: object = None,
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
        self, query: str, items: Sequence[object], on_event: EventHook | None, request_id: object
    ) -> RankingResult:
        if not isinstance(query, str):
            raise ConfigurationError(f"query must be a str, got {type(query).__name__}")
        texts, _ = normalize_items(items)
        hooks = (self.on_event, on_event)
        render = functools.partial(self._engine.prompt.render, query)
        options = within_spend(self.options, render, texts)  # a token budget's max_calls
        choice = choose(options.strategy, len(texts), options)  # once per request
        plan = choice.plan
        need = functools.partial(planned_tokens, plan, render, texts)
        try:  # a ranker's cap first holds what the plan needs (_admission.py), or refuses
            async with admitted(self._meter, (plan.calls.low, plan.calls.high), need) as hold:
                state = self._engine.open(
                    query,
                    texts,
                    hooks=hooks,
                    request_id=request_id,
                    ranker_meter=hold,
                    plan=plan,
                    options=options,
                )
                return await _run(self._engine, state, choice)
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
        self, query: str, items: Sequence[object], *, on_event: EventHook | None = None
    ) -> RankingResult:
        """Sync :meth:`arank`, through the one bridge (works inside a running event loop)."""
        return run_sync(self.arank, query, items, on_event=on_event)

    async def arank_many(
        self,
        requests: Iterable[RankRequest | tuple[str, Sequence[object]]],
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
        todo = [_as_request(r) for r in requests]
        stream = stream_requests(self.arank, todo, on_event, self.options.max_concurrency)
        async with contextlib.aclosing(stream):
            async for _, outcome in stream:
                if isinstance(outcome, BaseException) and not return_exceptions:
                    failures.append(outcome)
                else:
                    yield outcome
        if failures:
            raise _first_failure(failures)

    def rank_many(
        self,
        requests: Iterable[RankRequest | tuple[str, Sequence[object]]],
        *,
        on_event: EventHook | None = None,
        return_exceptions: bool = False,
    ) -> list[RankingResult | BaseException]:
        """Sync :meth:`arank_many`; results in request order (see there for failures)."""
        todo = [_as_request(r) for r in requests]
        limit = self.options.max_concurrency
        return run_sync(collect_requests, self.arank, todo, on_event, limit, return_exceptions)

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
        other = PSCRanker(self.backend, options=options, on_event=self.on_event, meter=self._meter)
        engine = Engine.build(options, self.backend, limiter=self._limiter, breaker=self._breaker)
        other._limiter, other._breaker = self._limiter, self._breaker
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


async def _run(engine: Engine, state: RequestState, choice: Choice) -> RankingResult:
    """One request from its ``request_start`` to its ``request_end`` event, by the strategy
    the chooser picked, over its plan; an error out of it carries what it spent (a read of
    its meter)."""
    n = len(state.texts)
    await state.emit("request_start", n_items=n)
    try:
        async with RequestRun(engine, state, choice.plan) as req:
            outcome = req.outcome(await choice.strategy(req))
    except Exception as exc:
        spent = state.usage()  # every call the request made, cancelled ones included
        if isinstance(exc, PermscError):
            exc.usage = spent
        await state.emit("request_end", n_items=n, status="error", error=repr(exc), usage=spent)
        raise
    return await _finished(req, await _with_top_probability(req, outcome), choice.name)


async def _with_top_probability(req: RequestRun, outcome: Outcome) -> Outcome:
    """``outcome`` with each item's chance of the top k (:func:`~.strategies.top_probability`
    on the finished samples): the strategy's own, or for a ranking with a k (``top_k``,
    adaptive m's, 10 under ``max_calls``) the list model's, fitted in a worker thread."""
    k, n, given = served_k(req.options), req.plan.n, outcome.top_probability
    if not given and (k is None or n < 2):
        return outcome
    p = await req.offload(lambda: top_probability(outcome.order, req.samples, k or 1, given))
    return replace(outcome, top_probability=p)


async def _finished(req: RequestRun, outcome: Outcome, strategy: str) -> RankingResult:
    """The request's result, once its ``request_end`` event is out."""
    order = outcome.order
    windows, n, usage = req.windows, req.plan.n, req.state.usage()
    confidence = sum(w.confidence for w in windows) / len(windows) if windows else 1.0
    await req.state.emit(
        "request_end",
        n_items=n,
        status="ok",
        confidence=confidence,
        usage=usage,
        stopped=outcome.stopped,
    )
    scores = _scores(order, windows, n)
    result = RankingResult(
        order,
        scores,
        tuple(windows),
        confidence,
        usage,
        top_probability=outcome.top_probability,
        head=outcome.head,
        stopped=outcome.stopped,
        ties=outcome.ties,
        strategy=strategy,
    )
    warn_degenerate(result)
    return result


def _scores(order: Sequence[int], windows: Sequence[WindowResult], n: int) -> tuple[float, ...]:
    """A probability aggregator's scores when one window ranked every item (first-token
    scoring: each item's mean probability), else :func:`scores_from_order`."""
    if len(windows) == 1 and windows[0].scores and len(windows[0].indices) == n:
        scores = [0.0] * n
        for item, score in zip(windows[0].indices, windows[0].scores, strict=True):
            scores[item] = score
        return tuple(scores)
    return scores_from_order(order)


publish("permsc_integrations", PSCRanker, RankRequest)
