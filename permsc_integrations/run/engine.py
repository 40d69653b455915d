"""PSC over one window: m shuffled prompts, concurrent calls, parse, aggregate.

For each of the m input orders (drawn from a seed derived from the ranker's seed, the
query, the window's items and its place in the plan) the engine renders a prompt, calls
the backend under the shared :class:`~.limiter.CallLimiter` (and an optional per-request
one), retries retryable failures (:mod:`..retry`), re-asks unparseable answers up to
``reasks`` times, maps each answer back to the original items and aggregates the samples
that succeeded. A :class:`BatchBackend` gets each round of a window's prompts as one batch.
``Sample.attempts`` counts asks (1 + re-asks); its ``usage.calls`` counts every backend
attempt, retries included.

Example:
    >>> import anyio
    >>> from permsc_integrations.backends.base import Completion
    >>> class Reverse:  # answers "[n] > ... > [1]": the last item shown is best
    ...     name = "reverse"
    ...     async def acomplete(self, messages, settings):
    ...         n = sum(m["content"].startswith("[") for m in messages if m["role"] == "user")
    ...         return Completion(text=" > ".join(f"[{i}]" for i in range(n, 0, -1)))
    ...     async def aclose(self):
    ...         pass
    >>> engine = WindowEngine.create(Reverse(), num_permutations=1, include_identity=True)
    >>> result = anyio.run(engine.rank_window, "q", ["a", "b", "c"], (0, 1, 2), 0)
    >>> result.order, result.samples[0].status.value
    ((2, 1, 0), 'ok')
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from ..adaptive import Adaptive, waves
from ..aggregators import Aggregator, aggregate, fuse_first_stage, resolve
from ..backends.base import Backend, GenerationSettings
from ..checks import at_least, positive_int, successes_needed
from ..errors import InsufficientSamplesError, PermscError, add_note
from ..events import Event, EventHook, emit
from ..metrics import consensus_confidence
from ..permutations import cut_blocks, sample_permutations
from ..prompts import get_prompt
from ..prompts.base import Prompt
from ..results import Sample, Usage, WindowResult
from ..retry import RetryPolicy
from .breaker import Breaker
from .cache import ResponseCache
from .calibration import PriorCache
from .limiter import Limiter
from .sampling import SamplingSetup, WindowRun

__all__ = ["WindowEngine", "BlocksDraw", "derive_seed"]


def derive_seed(seed: int, query: str, texts: Sequence[str], window: Any = 0) -> int:
    """A 63-bit seed from the ranker's seed, the request and the window (stable across runs).

    >>> derive_seed(0, "q", ["a", "b"]) == derive_seed(0, "q", ["a", "b"])
    True
    """
    blob = json.dumps([seed, query, list(texts), repr(window)], ensure_ascii=False)
    return int.from_bytes(hashlib.blake2b(blob.encode("utf-8"), digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True, slots=True)
class BlocksDraw:
    """A blocks round's samples before their consensus (:meth:`WindowEngine.draw_blocks`)."""

    indices: tuple[int, ...]
    samples: list[Sample]
    spent: Usage
    saved: int
    per_unit: int


@dataclass(frozen=True)
class WindowEngine:
    """Everything needed to run PSC on one window; built once per ranker."""

    backend: Backend
    prompt: Prompt
    aggregator: Aggregator
    num_permutations: int = 20
    include_identity: bool = False
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    reasks: int = 1
    min_successful: int | None = None
    min_coverage: float = 0.0
    adaptive: Adaptive | None = None
    cache: ResponseCache | None = None
    limiter: Limiter | None = None
    breaker: Breaker = field(default_factory=Breaker)
    scoring: str = "generate"  # or "first_token" (first_token.py)
    calibration: PriorCache | None = None  # first_token: divide by the position prior
    first_stage_weight: float = 0.0  # the input order's weight in the window's consensus

    @classmethod
    def create(
        cls,
        backend: Backend,
        *,
        prompt: str | Prompt = "rankgpt",
        aggregator: str | Aggregator = "kemeny",
        **options: Any,
    ) -> WindowEngine:
        """An engine from a backend object and names or objects for the rest."""
        return cls(backend, get_prompt(prompt), resolve(aggregator), **options)

    def __post_init__(self) -> None:
        positive_int("num_permutations", self.num_permutations)
        at_least(0)("reasks", self.reasks)
        successes_needed(self.min_successful, self.num_permutations)

    def good_needed(self, drawn: int, per_unit: int = 1) -> int:
        """Good samples a window needs among the ``drawn`` ones (a blocks round: ``per_unit``
        answers per shuffle): ``min_successful`` per shuffle when set, else half of them, at
        least one; a fixed-m window (no adaptive m, not blocks) counts all m as drawn."""
        if self.min_successful is not None:
            return self.min_successful * per_unit
        if not self.adaptive and per_unit == 1:
            drawn = self.num_permutations
        return max(1, drawn // 2)

    def sampling_setup(self) -> SamplingSetup:
        """What a window's calls need of this engine (:class:`~.sampling.WindowRun`)."""
        return SamplingSetup(
            self.backend,
            self.prompt,
            self.settings,
            self.retry,
            self.cache,
            self.limiter,
            self.breaker,
            self.reasks,
            self.min_coverage,
            self.scoring,
            self.calibration,
        )

    async def rank_window(
        self,
        query: str,
        texts: Sequence[str],
        indices: Sequence[int],
        seed: int,
        *,
        start: int = 0,
        hooks: Sequence[EventHook | None] = (),
        request_id: Any = None,
        window: int = 0,
        request_limiter: Limiter | None = None,
    ) -> WindowResult:
        """PSC over ``indices`` (item indices into ``texts``, in the window's input order)."""
        self.breaker.check()
        local = [texts[i] for i in indices]
        perms = sample_permutations(
            len(local), self.num_permutations, seed=seed, include_identity=self.include_identity
        )
        samples, spent, units = await self._draw(
            query, local, [[p] for p in perms], hooks, request_id, window, request_limiter
        )
        return await self._result(indices, start, samples, spent, len(perms) - units)

    async def draw_blocks(
        self,
        query: str,
        texts: Sequence[str],
        indices: Sequence[int],
        seed: int,
        *,
        block_size: int,
        shuffles: int | None = None,
        hooks: Sequence[EventHook | None] = (),
        request_id: Any = None,
        window: int = 0,
        request_limiter: Limiter | None = None,
        include_identity: bool = False,
        skip: int = 0,
    ) -> BlocksDraw:
        """The samples of a blocks round: each of ``shuffles`` (at most m, default m) shuffles of
        ``indices`` is cut into balanced blocks of at most ``block_size`` items and every block
        of every shuffle is one call, all at once (``include_identity``: the first shuffle is
        the input order; ``skip``: leave out the first ``skip`` shuffles, drawn before).
        :meth:`settle` aggregates them, :meth:`lead`
        picks their head quickly (see strategies.py)."""
        self.breaker.check()
        local = [texts[i] for i in indices]
        count = min(shuffles or self.num_permutations, self.num_permutations)
        perms = sample_permutations(len(local), count, seed=seed, include_identity=include_identity)
        perms = perms[skip:]
        units = [cut_blocks(p, block_size) for p in perms]
        head = self.adaptive and replace(self.adaptive, top_k=self.adaptive.top_k or block_size)
        samples, spent, drawn = await self._draw(
            query, local, units, hooks, request_id, window, request_limiter, head or None
        )
        saved = sum(len(u) for u in units[drawn:])
        return BlocksDraw(tuple(indices), samples, spent, saved, len(units[0]))

    async def settle(self, draw: BlocksDraw) -> WindowResult:
        """The consensus of a blocks round's samples (the ranker's aggregator)."""
        return await self._result(
            draw.indices, 0, draw.samples, draw.spent, draw.saved, draw.per_unit
        )

    def head_by(self, method: str | Aggregator | None) -> Aggregator:
        """The consensus that picks a blocks round's head: ``method``, or by default the
        aggregator's ``quick`` stand-in (Kemeny's: its local search), else the aggregator."""
        if method is None:
            return getattr(self.aggregator, "quick", self.aggregator)  # type: ignore[no-any-return]
        return resolve(method)

    async def pick_head(self, draw: BlocksDraw, k: int, method: Aggregator) -> tuple[int, ...]:
        """The top ``k`` of a blocks round's items by ``method`` (see :meth:`head_by`), so
        that the next round can start while :meth:`settle` runs; raises as :meth:`settle`
        would when too few samples succeeded."""
        good = self._good_rankings(draw.indices, 0, draw.samples, draw.per_unit)
        n = len(draw.indices)
        extra = _probabilities(method, draw.samples)
        order = await anyio.to_thread.run_sync(
            lambda: aggregate(good, method=method, n_items=n, **extra)
        )
        return _to_items(order[:k], draw.indices)

    async def _draw(
        self,
        query: str,
        local: list[str],
        units: list[list[tuple[int, ...]]],
        hooks: Sequence[EventHook | None],
        request_id: Any,
        window: int,
        request_limiter: Limiter | None,
        policy: Adaptive | None = None,
    ) -> tuple[list[Sample], Usage, int]:
        """The samples of ``units`` (a shuffle: one shown list, or its blocks), in waves when
        adaptive (``policy``, else the engine's); returns the samples, what they cost and how
        many units were drawn. The blocks round waits for a stable head (its top
        ``block_size``), the part the second round refines."""
        policy = policy or self.adaptive
        shown = [s for u in units for s in u]
        per_unit = len(units[0])
        samples: list[Sample] = []
        spent = Usage()
        for wave, (first, end) in enumerate(waves(policy, len(units))):
            run = WindowRun(
                self.sampling_setup(),
                query,
                local,
                shown[first * per_unit : end * per_unit],
                hooks,
                request_id,
                window,
                request_limiter,
                offset=first * per_unit,
                total=len(shown),
            )
            try:
                samples += await run.run()
            except PermscError as error:
                error.usage = spent + (error.usage or Usage())
                raise
            spent += run.spent
            if end < len(units) and await self._settled(samples, len(local), per_unit, policy):
                await _emit_wave(hooks, request_id, window, wave, end, len(units), "stable")
                return samples, spent, end
            if policy is not None:
                why = "cap" if end == len(units) else "unsettled"
                await _emit_wave(hooks, request_id, window, wave, end, len(units), why)
        return samples, spent, len(units)

    async def _result(
        self,
        indices: Sequence[int],
        start: int,
        samples: list[Sample],
        spent: Usage,
        saved: int,
        per_unit: int = 1,
    ) -> WindowResult:
        # exact Kemeny can take a while: keep the event loop free for other requests' calls
        try:
            result = await anyio.to_thread.run_sync(
                self._aggregate, indices, start, samples, per_unit
            )
        except PermscError as error:
            error.usage = spent
            raise
        return replace(result, saved_calls=saved)

    async def _settled(
        self, samples: list[Sample], n: int, per_unit: int, policy: Adaptive | None
    ) -> bool:
        """Whether adaptive m may stop: enough good samples and a consensus the samples
        establish (:meth:`Adaptive.stable`: a sign test per pair, or for blocks rounds a
        head that no one shuffle's samples change)."""
        if policy is None or self._good(samples) < self.good_needed(len(samples), per_unit):
            return False
        units = [samples[u : u + per_unit] for u in range(0, len(samples), per_unit)]
        groups = [[s.ranking for s in unit if s.ok] for unit in units]
        scored = _probabilities(self.aggregator, samples)
        probs = [_probabilities(self.aggregator, unit).get("probabilities") for unit in units]
        return await anyio.to_thread.run_sync(
            lambda: policy.stable(
                groups,
                n_items=n,
                aggregator=self.aggregator,
                grouped=True,
                probabilities=probs if scored else None,
            )
        )

    @staticmethod
    def _good(samples: Sequence[Sample]) -> int:
        return sum(s.ok for s in samples)

    def _good_rankings(
        self, indices: Sequence[int], start: int, samples: list[Sample], per_unit: int
    ) -> list[tuple[int, ...]]:
        """The good samples' rankings; :class:`InsufficientSamplesError` when too few."""
        good = [s.ranking for s in samples if s.ok]
        required = self.good_needed(len(samples), per_unit)
        if len(good) < required:
            failures = [
                s.exception or PermscError(s.error or "failed") for s in samples if not s.ok
            ]
            error = InsufficientSamplesError(len(good), required, failures)
            add_note(error, f"in the window at positions {start}..{start + len(indices) - 1}")
            raise error
        return good

    def _aggregate(
        self, indices: Sequence[int], start: int, samples: list[Sample], per_unit: int = 1
    ) -> WindowResult:
        good = self._good_rankings(indices, start, samples, per_unit)
        extra = _probabilities(self.aggregator, samples)
        consensus = aggregate(good, method=self.aggregator, n_items=len(indices), **extra)
        confidence = _confidence(good, consensus)
        scores = getattr(self.aggregator, "item_scores", None)
        if self.first_stage_weight > 0:  # caller's item indices are the first-stage order
            stage = sorted(range(len(indices)), key=lambda j: indices[j])
            consensus = fuse_first_stage(consensus, self.first_stage_weight, stage)
            scores = None
        return WindowResult(
            start=start,
            indices=tuple(indices),
            order=_to_items(consensus, indices),
            samples=tuple(
                replace(
                    s,
                    permutation=_to_items(s.permutation, indices),
                    ranking=_to_items(s.ranking, indices),
                )
                for s in samples
            ),
            confidence=confidence,
            scores=tuple(scores(extra["probabilities"], n_items=len(indices)))
            if extra and scores
            else (),
        )


def _probabilities(method: Any, samples: Sequence[Sample]) -> dict[str, Any]:
    """``{"probabilities": [{item: p}, ...]}`` of the good samples (window positions) for an
    aggregator that reads first-token probabilities, else ``{}``."""
    if not getattr(resolve(method), "uses_probabilities", False):
        return {}
    return {"probabilities": [s.item_probabilities() for s in samples if s.ok]}


async def _emit_wave(
    hooks: Sequence[EventHook | None],
    request_id: Any,
    window: int,
    wave: int,
    drawn: int,
    cap: int,
    why: str,
) -> None:
    """``wave_end``: samples drawn so far and why sampling stops (stable, cap) or goes on."""
    detail = {"wave": wave, "samples": drawn, "cap": cap, "stopped": why != "unsettled"}
    await emit(hooks, Event("wave_end", request_id, window, None, cap, {**detail, "why": why}))


def _to_items(local: Sequence[int], indices: Sequence[int]) -> tuple[int, ...]:
    """Window positions to the caller's item indices (``indices[j]`` is position ``j``)."""
    return tuple(indices[j] for j in local)


def _confidence(rankings: Sequence[Sequence[int]], consensus: Sequence[int]) -> float:
    return float(consensus_confidence(rankings, consensus))
