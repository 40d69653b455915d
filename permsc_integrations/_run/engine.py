"""PSC's parts for one ranker: the :class:`Engine`, built once from the options.

The engine holds the ranker's :class:`~permsc_integrations.RankingOptions` and the live
parts built from them once (the backend, the prompt object, the aggregator, the
:class:`~.sampling.Sampler` that asks each sample, the strategy, the shared limiter and
breaker); every other
option is read from the options themselves. It opens each request's
:class:`~.state.RequestState` (:meth:`Engine.open`: its meter, its limiter, its calls), says
when adaptive m may stop drawing a round (:meth:`Engine.settled`), and turns a round's samples
into their consensus (:meth:`Engine.consensus`) or their head, quickly
(:meth:`Engine.pick_head`). The rounds themselves are drawn by the request (:mod:`.request`).

Example:
    >>> import anyio
    >>> from permsc_integrations.results import ParseStatus, Sample
    >>> from permsc_integrations.testing import ScriptedBackend
    >>> engine = Engine.build(RankingOptions(num_permutations=4), ScriptedBackend())
    >>> state = engine.open("q", ["a", "b", "c"])
    >>> state.total, state.usage().calls, engine.good_needed(drawn=4)
    (1, 0, 2)
    >>> answer = Sample((0, 1, 2), (2, 1, 0), "[3] > [2] > [1]", ParseStatus.OK)
    >>> anyio.run(engine.consensus, Draw(0, (5, 7, 9), (answer, answer))).order
    (9, 7, 5)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import anyio

from permsc_integrations._calls.breaker import Breaker
from permsc_integrations._calls.calls import Calls
from permsc_integrations._calls.limiter import CallLimiter
from permsc_integrations._calls.spending import Charged, Meter
from permsc_integrations._events import EventHook, StableReason
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._run.first_token import FirstToken
from permsc_integrations._run.sampling import Generate, Sampler
from permsc_integrations._run.state import RequestState
from permsc_integrations.aggregators import (
    Aggregator,
    aggregate,
    fuse_first_stage,
    quick_of,
    reads_probabilities,
    resolve,
    scores_of,
)
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import InsufficientSamplesError, PermscError, add_note
from permsc_integrations.metrics import consensus_confidence
from permsc_integrations.prompts import Prompt
from permsc_integrations.results import ParseStatus, Sample, WindowResult
from permsc_integrations.strategies import Adaptive, Draw, Plan, Strategy
from permsc_integrations.strategies import get as get_strategy

__all__ = ["Engine", "SAMPLERS"]

SAMPLERS: dict[str, Callable[[RankingOptions, Backend, Prompt], Sampler]] = {
    "generate": Generate,
    "first_token": FirstToken,
}
"""The sampler of each ``scoring`` (:data:`~permsc_integrations._options.options.SCORINGS`)."""


@dataclass(frozen=True)
class Engine:
    """The ranker's options and the live parts built from them (module docstring)."""

    options: RankingOptions
    backend: Backend
    prompt: Prompt
    aggregator: Aggregator
    sampler: Sampler
    strategy: Strategy
    limiter: CallLimiter | None
    breaker: Breaker

    @classmethod
    def build(
        cls,
        options: RankingOptions,
        backend: Backend,
        *,
        limiter: CallLimiter | None = None,
        breaker: Breaker | None = None,
    ) -> Engine:
        """The engine of ``options`` over ``backend`` (a first-token scoring needs a backend
        that reads first-token probabilities: refused here otherwise)."""
        prompt = options.build_prompt()
        sampler = SAMPLERS[options.scoring](options, backend, prompt)
        aggregator, strategy = resolve(options.aggregator), get_strategy(options.strategy)
        breaker = breaker or Breaker(options.breaker_cooldown)
        return cls(options, backend, prompt, aggregator, sampler, strategy, limiter, breaker)

    def open(
        self,
        query: str,
        texts: Sequence[str],
        *,
        hooks: tuple[EventHook | None, ...] = (),
        request_id: object = None,
        ranker_meter: Charged | None = None,
        plan: Plan | None = None,
        options: RankingOptions | None = None,
    ) -> RequestState:
        """A request's state: its meter (``request_cap``, ``max_calls``, ``max_total_tokens``,
        ``max_cost``), its limiter (``request_concurrency``) before the ranker's, its events'
        total (the rounds of ``plan``, the request's: the chooser's; by default the configured
        strategy's). ``options``: the request's (a token budget's ``max_calls``,
        :func:`~permsc_integrations._options.spend.within_spend`), else the engine's."""
        o = options or self.options
        cap = o.request_concurrency
        limiters = [lim for lim in (CallLimiter(cap) if cap else None, self.limiter) if lim]
        mine = Meter(o.request_cap, "request", o.prices, budget=o.max_calls, spend=o.spend)
        calls = Calls(
            self.backend.name, o.retry, o.timeout, self.breaker, limiters, mine, ranker_meter
        )
        total = len((plan or self.strategy.plan(len(texts), o)).rounds)
        return RequestState(query, texts, hooks, request_id, o.seed, total, calls, o)

    def good_needed(self, drawn: int, per_unit: int = 1) -> int:
        """Good samples a round needs among the ``drawn`` ones (blocks: ``per_unit`` answers
        per shuffle): ``min_successful`` per shuffle when set, else half of them, at least
        one."""
        o = self.options
        if o.min_successful is not None:
            return int(o.min_successful) * per_unit
        return max(1, drawn // 2)

    async def consensus(self, draw: Draw, order: Sequence[int] | None = None) -> WindowResult:
        """The consensus of a round's samples (the ranker's aggregator, in a worker thread:
        exact Kemeny can take a while, and the loop stays free for other calls); ``order``
        (the caller's indices of the round's items): the strategy's own order of them
        instead, kept with the samples."""
        if order is None:
            result = await anyio.to_thread.run_sync(self._aggregate, draw)
        else:
            at = {item: j for j, item in enumerate(draw.inside)}
            result = self._result(draw, self._good_rankings(draw), [at[i] for i in order])
        return replace(result, saved_calls=draw.saved)

    def head_by(self, method: str | Aggregator | None) -> Aggregator:
        """The consensus that picks a round's head: ``method``, or by default the
        aggregator's ``quick`` stand-in (Kemeny's: its local search), else the aggregator."""
        if method is None:
            return quick_of(self.aggregator)
        return resolve(method)

    async def pick_head(self, draw: Draw, k: int, method: Aggregator) -> tuple[int, ...]:
        """The top ``k`` of a round's items by ``method`` (see :meth:`head_by`), so that the
        next round can start while :meth:`consensus` runs; raises as :meth:`consensus` would
        when too few samples succeeded."""
        good = self._good_rankings(draw)
        n = len(draw.inside)
        extra = _probabilities(method, draw.samples)
        order = await anyio.to_thread.run_sync(
            lambda: aggregate(good, method=method, n_items=n, **extra)
        )
        return draw.items(order[:k])

    async def settled(
        self, samples: Sequence[Sample], n: int, per_unit: int, policy: Adaptive | None
    ) -> StableReason | None:
        """Whether adaptive m may stop drawing a round of ``n`` items, and by which rule:
        enough good samples and a consensus the samples establish (:meth:`Adaptive.reason`:
        a sign test per pair or the list model's zone, or for blocks rounds a head that no
        one shuffle's samples change); None: draw on."""
        if policy is None or sum(s.ok for s in samples) < self.good_needed(len(samples), per_unit):
            return None
        units = [samples[u : u + per_unit] for u in range(0, len(samples), per_unit)]
        groups = [[s.ranking for s in unit if s.ok] for unit in units]
        shown = [[s.permutation for s in unit if s.ok] for unit in units]
        scored = _probabilities(self.aggregator, samples)
        probs = [_probabilities(self.aggregator, unit).get("probabilities") for unit in units]
        return await anyio.to_thread.run_sync(
            lambda: policy.reason(
                groups,
                n_items=n,
                aggregator=self.aggregator,
                grouped=True,
                probabilities=probs if scored else None,
                shown=shown,
            )
        )

    def _good_rankings(self, draw: Draw) -> list[tuple[int, ...]]:
        """The good samples' rankings; :class:`InsufficientSamplesError` when too few of
        those asked (a sample the budget skipped was not; a round it left without a call
        needs none: its items keep their order)."""
        good = [s.ranking for s in draw.samples if s.ok]
        asked = sum(s.status is not ParseStatus.SKIPPED for s in draw.samples)
        required = min(self.good_needed(asked, draw.per_unit), asked)
        if len(good) < required:
            failures = [
                s.exception or PermscError(s.error or "failed")
                for s in draw.samples
                if not s.ok and s.status is not ParseStatus.SKIPPED
            ]
            error = InsufficientSamplesError(len(good), required, failures)
            end = draw.start + len(draw.inside) - 1
            add_note(error, f"in the window at positions {draw.start}..{end}")
            raise error
        return good

    def _aggregate(self, draw: Draw) -> WindowResult:
        good = self._good_rankings(draw)
        n = len(draw.inside)
        extra = _probabilities(self.aggregator, draw.samples)
        consensus = aggregate(good, method=self.aggregator, n_items=n, **extra)
        scores = scores_of(self.aggregator)
        weight = self.options.first_stage_weight
        if weight > 0:  # the caller's item indices are the first-stage order
            stage = sorted(range(n), key=lambda j: draw.inside[j])
            fused = fuse_first_stage(consensus, weight, stage)
            return self._result(draw, good, fused, consensus)
        item_scores = (
            tuple(scores.item_scores(extra["probabilities"], n_items=n)) if extra and scores else ()
        )
        return self._result(draw, good, consensus, consensus, item_scores)

    def _result(
        self,
        draw: Draw,
        good: Sequence[Sequence[int]],
        order: Sequence[int],
        agreed: Sequence[int] | None = None,
        scores: tuple[float, ...] = (),
    ) -> WindowResult:
        """The round's result: ``order`` (positions in the round), the samples in the
        caller's indices, their agreement with ``agreed`` (the consensus; default ``order``)."""
        confidence = float(consensus_confidence(good, order if agreed is None else agreed))
        return WindowResult(
            start=draw.start,
            indices=draw.inside,
            order=draw.items(order),
            samples=tuple(
                replace(s, permutation=draw.items(s.permutation), ranking=draw.items(s.ranking))
                for s in draw.samples
            ),
            confidence=confidence,
            scores=scores,
        )


def _probabilities(
    method: str | Aggregator, samples: Sequence[Sample]
) -> dict[str, list[dict[int, float]]]:
    """``{"probabilities": [{item: p}, ...]}`` of the good samples (window positions) for an
    aggregator that reads first-token probabilities, else ``{}``."""
    if not reads_probabilities(resolve(method)):
        return {}
    return {"probabilities": [s.item_probabilities() for s in samples if s.ok]}
