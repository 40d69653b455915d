"""The strategy protocol: what a strategy is, and what it may ask of the ranker.

A strategy is a callable ``await strategy(ctx) -> Outcome`` over a :class:`RankContext` (the
request in flight), with a ``plan(n, options)`` method that says what a request costs before
it runs (:mod:`._plan`). The context holds the request's one :class:`Plan` (chosen once, by
:func:`permsc_integrations.strategies.choose`), its options, and eight members in all: PSC
over a window (:meth:`RankContext.window`), and the parts of a round a strategy composes
itself: :meth:`RankContext.draw` (any prompts over chosen items, every one a call, all at
once: a :class:`Draw` of every sample, with what the request had spent),
:meth:`RankContext.settle` (their consensus, or the strategy's own order of them, after a
:class:`WaveEnd` when the strategy decides its rounds as answers come) and
:meth:`RankContext.lead` (their head at once, the consensus of the rest computed meanwhile: a
:class:`Lead`); CPU work goes off the event loop with :meth:`RankContext.offload`. A
strategy returns its :class:`Outcome`: the order, and what stands behind it. Every type named
here is public (:mod:`permsc_integrations.strategies`): a third-party strategy needs nothing
else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from permsc_integrations._events import WaveReason
from permsc_integrations.aggregators import Aggregator
from permsc_integrations.results import Sample, StopReason
from permsc_integrations.strategies._plan import Plan, PlanOptions
from permsc_integrations.strategies._window_plan import Window

__all__ = ["RankContext", "Strategy", "StrategyOptions", "Draw", "Lead", "Outcome", "WaveEnd"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Draw:
    """A round's samples before their consensus (:meth:`RankContext.draw`).

    ``inside`` are the round's items (the caller's indices); position ``j`` of a sample's
    ``permutation`` and ``ranking`` is item ``inside[j]`` (:meth:`items` maps them).
    ``per_unit`` is the prompts of one shuffle, ``saved`` the prompts adaptive m did not send;
    ``number``, ``start`` and ``where`` place the round in the request (its events);
    ``spent``: the calls the request had sent when the round's answers were in, re-asks and
    retries included (its meter, which never lets them pass ``max_calls``); ``affordable``:
    under a token or cost budget, the calls it pays for in all at what a call has cost so far
    (the request's ``max_calls`` from then on), else None."""

    number: int
    inside: tuple[int, ...]
    samples: tuple[Sample, ...]
    per_unit: int = 1
    saved: int = 0
    start: int = 0
    where: Mapping[str, int] = field(default_factory=dict)
    spent: int = 0
    affordable: int | None = None

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
    """What a strategy returns: its ``order`` (the item indices, best first) and what stands
    behind it (the fields of :class:`~permsc_integrations.results.RankingResult` of the same
    names): ``head`` items ranked (the rest in input order), why it ``stopped``, the ``ties``
    it settled, each item's ``top_probability`` (empty: the ranker fits it for a ranking with
    a k), and the calls ``saved`` below its cap."""

    order: tuple[int, ...] = ()
    head: int | None = None
    stopped: StopReason = "complete"
    ties: tuple[tuple[int, int], ...] = ()
    top_probability: tuple[float | None, ...] = ()
    saved: int = 0


@dataclass(frozen=True, slots=True)
class WaveEnd:
    """A round's ``wave_end`` event (:meth:`RankContext.settle`): ``cap`` calls at most, and
    ``why`` the request goes on (``"unsettled"``) or stops (``"certified"``, ``"budget"``,
    ``"cap"``, ``"exhausted"``)."""

    cap: int
    why: WaveReason


class StrategyOptions(PlanOptions, Protocol):
    """The options a strategy reads while it runs: a plan's (:class:`PlanOptions`) and the
    ranker's ``aggregator`` (a name or callable:
    :func:`permsc_integrations.aggregators.resolve`)."""

    @property
    def aggregator(self) -> str | Aggregator: ...


class RankContext(Protocol):
    """What a strategy can ask of the ranker for one request (module docstring): its
    ``plan`` (``plan.n`` items), its ``options``, the request's ``seed`` and five ways to
    ask the model."""

    @property
    def plan(self) -> Plan:
        """The request's plan: the one the chooser made for this strategy (``plan.n``: the
        items; ``plan.detail``: what the strategy's ``plan`` decided, read back here)."""
        ...

    @property
    def options(self) -> StrategyOptions: ...

    def seed(self, inside: Sequence[int], where: object) -> int:
        """The request's seed for permutations of the items ``inside`` at ``where``."""
        ...

    async def window(
        self,
        number: int,
        window: Window,
        inside: tuple[int, ...],
        *,
        shuffles: int | None = None,
        left: int | None = None,
    ) -> Sequence[int]:
        """PSC over the items ``inside`` (in that input order): the same items, best first;
        ``shuffles`` distinct prompts (default m; never more than the items have orders);
        ``left``: under ``max_calls``, the windows still to run (this one included) that
        share the calls the budget has left (re-asks and retries may have spent more)."""
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

    async def settle(
        self, draw: Draw, order: Sequence[int] | None = None, *, wave: WaveEnd | None = None
    ) -> Sequence[int]:
        """The consensus order of a round's items, or the strategy's own ``order`` of them
        (the caller's indices), kept in the result with the round's samples and its
        ``window_end`` (after the round's ``wave_end`` when ``wave`` is given)."""
        ...

    async def lead(self, draw: Draw, keep: int, by: str | Aggregator | None) -> Lead:
        """A round's top ``keep`` items as ``by`` picks them (an aggregator; ``None``: the
        ranker's aggregator's quick stand-in, its local search for Kemeny), and its
        consensus, computed meanwhile unless ``by`` is the ranker's aggregator itself (then
        the head waits)."""
        ...

    async def offload(self, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread (CPU work: the event loop stays free for calls)."""
        ...


class Strategy(Protocol):
    """``await strategy(ctx)`` ranks a request (an :class:`Outcome`; a bare order is read as
    ``Outcome(order)``); ``plan(n, options)`` says, before it runs, which rounds (PSC windows
    or blocks rounds) it takes and their calls (:mod:`._plan`): the progress total,
    ``permsc estimate`` and the docs read it, and a test holds it to the calls the ranker
    makes."""

    async def __call__(self, ctx: RankContext) -> Outcome | Sequence[int]: ...

    def plan(self, n: int, options: PlanOptions) -> Plan: ...
