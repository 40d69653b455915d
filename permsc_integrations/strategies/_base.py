"""The strategy protocol: what a strategy is, and what it may ask of the ranker.

A strategy is a callable ``await strategy(ctx) -> order`` over a :class:`RankContext` (the
request in flight, :class:`~permsc_integrations._run.request.RequestRun`), with a ``plan``
method that says what a request costs before it runs (:mod:`._plan`). The context offers PSC
over a window, and the parts of a round a strategy composes itself: :meth:`RankContext.draw`
(any prompts over chosen items, every one a call, all at once: a :class:`Draw` of every
sample), :meth:`RankContext.settle` (their consensus, or the strategy's own order of them)
and :meth:`RankContext.lead` (their head at once, the consensus of the rest computed
meanwhile: a :class:`Lead`). A strategy that decides its rounds as answers come (the frontier
policy, :mod:`._frontier.rounds`) also reads what the request has spent
(:attr:`RankContext.spent`, against ``max_calls``), runs its model off the event loop
(:meth:`RankContext.offload`), reports each round's end (:meth:`RankContext.wave_end`) and
what stands behind its ranking (:meth:`RankContext.conclude`: an :class:`Outcome`). The
strategies themselves are in :mod:`._sliding` and :mod:`._blocks`; the registry is
:mod:`permsc_integrations.strategies`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from permsc_integrations._events import WaveReason
from permsc_integrations.aggregators import Aggregator
from permsc_integrations.results import Sample, StopReason
from permsc_integrations.strategies._plan import Plan, PlanOptions
from permsc_integrations.strategies._window_plan import Window

__all__ = ["RankContext", "Strategy", "Draw", "Lead", "Outcome"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Draw:
    """A round's samples before their consensus (:meth:`RankContext.draw`).

    ``inside`` are the round's items (the caller's indices); position ``j`` of a sample's
    ``permutation`` and ``ranking`` is item ``inside[j]`` (:meth:`items` maps them).
    ``per_unit`` is the prompts of one shuffle, ``saved`` the prompts adaptive m did not send;
    ``number``, ``start`` and ``where`` place the round in the request (its events)."""

    number: int
    inside: tuple[int, ...]
    samples: tuple[Sample, ...]
    per_unit: int = 1
    saved: int = 0
    start: int = 0
    where: Mapping[str, Any] = field(default_factory=dict)

    def items(self, positions: Sequence[int]) -> tuple[int, ...]:
        """Positions in the round to the caller's item indices."""
        return tuple(self.inside[j] for j in positions)


@dataclass(frozen=True, slots=True)
class Lead:
    """A round's ``head`` (picked at once) and ``rest``: the round's whole consensus, computed
    meanwhile (await it once the head is ranked)."""

    head: tuple[int, ...]
    rest: Awaitable[Sequence[int]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What stands behind a strategy's ranking besides its order (:meth:`RankContext.conclude`;
    the fields of :class:`~permsc_integrations.results.RankingResult` of the same names):
    ``head`` items ranked (the rest in input order), why it ``stopped``, the ``ties`` it
    settled, each item's ``top_probability``, and the calls ``saved`` below its cap."""

    head: int | None = None
    stopped: StopReason = "complete"
    ties: tuple[tuple[int, int], ...] = ()
    top_probability: tuple[float | None, ...] = ()
    saved: int = 0


class RankContext(PlanOptions, Protocol):
    """What a strategy can ask of the ranker for one request: its ``n`` items, the options a
    plan reads (:class:`~._plan.PlanOptions`: the windows' shape, m, adaptive m, ``max_calls``),
    what it has spent, and PSC over a window or a round it composes (module docstring)."""

    @property
    def n(self) -> int: ...

    @property
    def aggregator(self) -> Aggregator:
        """The ranker's aggregator (a strategy that orders answers itself uses it too)."""
        ...

    @property
    def spent(self) -> int:
        """Calls the request has sent so far, re-asks and retries included (its meter, which
        never lets them pass ``max_calls``)."""
        ...

    def seed(self, inside: Sequence[int], where: Any) -> int:
        """The request's seed for permutations of the items ``inside`` at ``where``."""
        ...

    async def window(
        self, number: int, window: Window, inside: tuple[int, ...], *, shuffles: int | None = None
    ) -> Sequence[int]:
        """PSC over the items ``inside`` (in that input order): the same items, best first;
        ``shuffles`` distinct prompts (default m; never more than the items have orders)."""
        ...

    async def draw(
        self,
        number: int,
        inside: tuple[int, ...],
        shown: Sequence[Sequence[tuple[int, ...]]],
        *,
        top: int | None = None,
        waves: bool = True,
    ) -> Draw:
        """Round ``number`` over the items ``inside``: ``shown`` holds its shuffles, each a
        list of prompts, each prompt the positions (in ``inside``) it shows in prompt order;
        every prompt is one call, all at once. Under adaptive m (and ``waves``) the shuffles
        are drawn in waves until the consensus (its top ``top`` when given) is established."""
        ...

    async def settle(self, draw: Draw, order: Sequence[int] | None = None) -> Sequence[int]:
        """The consensus order of a round's items, or the strategy's own ``order`` of them
        (the caller's indices), kept in the result with the round's samples and its
        ``window_end``."""
        ...

    async def offload(self, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread (CPU work: the event loop stays free for calls)."""
        ...

    async def wave_end(self, number: int, *, calls: int, cap: int, why: WaveReason) -> None:
        """Round ``number``'s ``wave_end`` event: ``calls`` spent so far of ``cap``; ``why``
        it goes on (``"unsettled"``) or stops (``"certified"``, ``"budget"``, ``"cap"``,
        ``"exhausted"``)."""
        ...

    def conclude(self, outcome: Outcome) -> None:
        """What stands behind the ranking the strategy returns (kept in its result)."""
        ...

    async def lead(self, draw: Draw, keep: int, by: str | Aggregator | None) -> Lead:
        """A round's top ``keep`` items as ``by`` picks them (an aggregator; ``None``: the
        ranker's aggregator's quick stand-in, see
        :meth:`~permsc_integrations._run.engine.Engine.head_by`), and its consensus, computed
        meanwhile unless ``by`` is the ranker's aggregator itself (then the head waits)."""
        ...


class Strategy(Protocol):
    """``await strategy(ctx)`` ranks a request; ``plan(n, options)`` says, before it runs,
    which rounds (PSC windows or blocks rounds) it takes and their calls (:mod:`._plan`): the
    progress total, ``permsc estimate`` and the docs read it, and a test holds it to the calls
    the ranker makes."""

    async def __call__(self, ctx: RankContext) -> Sequence[int]: ...

    def plan(self, n: int, options: PlanOptions) -> Plan: ...
