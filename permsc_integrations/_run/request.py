"""One request while it runs: the rounds a strategy asks for, with their events and results.

:class:`RequestRun` is the :class:`~permsc_integrations.strategies.RankContext` the ranker
hands its strategy (``async with RequestRun(engine, state, plan) as ctx: await
strategy(ctx)``). It pairs the ranker's :class:`~.engine.Engine` with the request's
:class:`~.state.RequestState` and its one plan (the chooser's), and keeps each finished
round's result (the request's windows, in plan order). ``window``
runs PSC over a window of the list; ``draw``, ``settle`` and ``lead`` are the parts of a round
a strategy composes: ``draw`` sends any prompts over chosen items (in waves under adaptive m)
and returns every sample, ``lead`` picks a round's head at once and computes its consensus
meanwhile, in the request's task group, while the strategy starts its next round. Each round
gets its ``window_start``/``window_end`` events and a seed derived from the request; its
shuffles are distinct (:func:`~permsc_integrations.permutations.distinct_permutations`). A
strategy that plans its own rounds reads what each round had spent (``Draw.spent``), runs its
model with ``offload`` and reports each round's ``wave_end`` with its ``settle``; the
:class:`~permsc_integrations.strategies.Outcome` it returns is completed by
:meth:`RequestRun.outcome`.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import replace
from itertools import accumulate
from types import TracebackType
from typing import TypeVar

import anyio
from anyio.abc import TaskGroup

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from permsc_integrations._events import WaveReason
from permsc_integrations._run.engine import Engine
from permsc_integrations._run.sampling import WindowRun
from permsc_integrations._run.state import RequestState
from permsc_integrations.aggregators import Aggregator
from permsc_integrations.errors import InvalidRankingError, first_failure
from permsc_integrations.permutations import distinct_permutations
from permsc_integrations.results import Sample, StopReason, WindowResult
from permsc_integrations.strategies import (
    Adaptive,
    Draw,
    Lead,
    Outcome,
    Plan,
    WaveEnd,
    Window,
    waves,
)

__all__ = ["RequestRun"]

T = TypeVar("T")


class RequestRun:
    """One request in flight (see the module docstring)."""

    def __init__(self, engine: Engine, state: RequestState, plan: Plan | None = None) -> None:
        n = len(state.texts)
        self.options = state.options  # the request's: a token budget's max_calls
        self.plan = plan or engine.strategy.plan(n, self.options)  # the chooser's, given
        self.engine, self.state = engine, state
        self.seed = state.seed_for
        self.done: dict[int, WindowResult] = {}
        self.cut: set[StopReason] = set()  # what asked for fewer shuffles than m
        self._group: TaskGroup | None = None

    @property
    def spent(self) -> int:
        """Calls the request has sent so far (a read of its meter)."""
        return self.state.calls.meter.spent.calls

    @property
    def windows(self) -> list[WindowResult]:
        """The rounds done so far, in plan order (blocks rounds can finish out of order)."""
        return [self.done[k] for k in sorted(self.done)]

    async def __aenter__(self) -> RequestRun:
        """Open the request's task group: the consensus a strategy leaves to be computed
        meanwhile (:meth:`lead`) runs in it, and a failure there fails the request."""
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        assert group is not None
        try:
            return await group.__aexit__(kind, exc, tb)
        except BaseExceptionGroup as errors:  # surface the failure itself
            raise first_failure(errors) from None

    async def window(
        self,
        number: int,
        window: Window,
        inside: tuple[int, ...],
        *,
        shuffles: int | None = None,
        left: int | None = None,
    ) -> Sequence[int]:
        """PSC over one window (``inside``: its items in input order), with its events."""
        where = {"start": window.start, "end": window.end, "pass": window.pass_index}
        m, budget = self.options.num_permutations, self.options.max_calls
        wanted = m if shuffles is None else shuffles
        if left is not None and budget is not None:  # a share of what the budget has left
            wanted = min(wanted, max(1, (budget - self.spent) // left))
        perms = distinct_permutations(
            len(inside),
            wanted,
            seed=self.seed(inside, (window.pass_index, window.start)),
            include_identity=self.options.include_identity,
        )
        if wanted < m:  # only a budget asks a window for fewer than m
            self.cut.add("budget")
        if len(perms) < wanted:
            self.cut.add("exhausted")
        draw = await self._draw(number, inside, [[p] for p in perms], where, None, window.start)
        return await self.settle(draw)

    async def draw(
        self,
        number: int,
        inside: tuple[int, ...],
        shown: Sequence[Sequence[tuple[int, ...]]],
        *,
        top: int | None = None,
        waves: bool = True,
    ) -> Draw:
        where = {"start": 0, "end": len(inside), "pass": number, "blocks": True}
        return await self._draw(number, inside, shown, where, top, waves=waves)

    async def _draw(
        self,
        number: int,
        inside: tuple[int, ...],
        shown: Sequence[Sequence[tuple[int, ...]]],
        where: Mapping[str, int],
        top: int | None,
        start: int = 0,
        *,
        waves: bool = True,
    ) -> Draw:
        """Round ``number`` over ``inside`` (``shown``: its shuffles' prompts), with its
        ``window_start``; under adaptive m (and ``waves``) its head (top ``top``) decides
        when to stop."""
        await self.state.emit("window_start", number, **where, items=tuple(inside))
        self.engine.breaker.check()
        policy = self.options.adaptive if waves else None
        if policy is not None and top is not None and policy.top_k is None:
            policy = replace(policy, top_k=top)
        local = [self.state.texts[i] for i in inside]
        samples, drawn = await self._waves(number, local, shown, policy)
        saved = sum(len(shuffle) for shuffle in shown[drawn:])
        self.state.calls.saved(saved)
        per_unit = len(shown[0]) if shown else 1
        afford = self.state.calls.meter.affordable(self.engine.options.max_calls)
        return Draw(
            number, inside, tuple(samples), per_unit, saved, start, where, self.spent, afford
        )

    async def _waves(
        self,
        number: int,
        local: list[str],
        shown: Sequence[Sequence[tuple[int, ...]]],
        policy: Adaptive | None,
    ) -> tuple[list[Sample], int]:
        """The samples of ``shown``'s shuffles, every prompt one call, all at once, and how
        many shuffles were drawn; under adaptive m in waves of whole shuffles, each with its
        ``wave_end``, until the samples establish the consensus."""
        prompts = [prompt for shuffle in shown for prompt in shuffle]
        ends = list(accumulate((len(shuffle) for shuffle in shown), initial=0))
        per_unit, cap = (len(shown[0]) if shown else 1), len(shown)
        samples: list[Sample] = []
        for wave, (first, end) in enumerate(waves(policy, cap)):
            part, offset = prompts[ends[first] : ends[end]], ends[first]
            sampler = self.engine.sampler
            run = WindowRun(self.state, sampler, local, part, number, offset, len(prompts))
            samples += await run.run()
            if policy is None:
                continue
            stable = None
            if end < cap:
                stable = await self.engine.settled(samples, len(local), per_unit, policy)
            why: WaveReason = stable or ("cap" if end == cap else "unsettled")
            detail = {"wave": wave, "samples": end, "cap": cap, "stopped": why != "unsettled"}
            await self.state.emit("wave_end", number, total=cap, **detail, why=why)
            if stable:
                return samples, end
        return samples, cap

    async def settle(
        self, draw: Draw, order: Sequence[int] | None = None, *, wave: WaveEnd | None = None
    ) -> Sequence[int]:
        if wave is not None:
            await self._wave_end(draw, wave)
        result = await self.engine.consensus(draw, order)
        self.done[draw.number] = result
        await self.state.emit(
            "window_end",
            draw.number,
            **draw.where,
            confidence=result.confidence,
            failed=len(result.failed),
            samples=len(result.samples),
        )
        return result.order

    async def _wave_end(self, draw: Draw, wave: WaveEnd) -> None:
        """A round's ``wave_end`` for a strategy that decides its rounds: ``samples`` is the
        calls spent when the round's answers were in."""
        cap, stopped = wave.cap, wave.why != "unsettled"
        await self.state.emit(
            "wave_end",
            draw.number,
            total=cap,
            wave=0,
            samples=draw.spent,
            cap=cap,
            stopped=stopped,
            why=wave.why,
        )

    async def offload(self, work: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(work)

    def outcome(self, given: Outcome | Sequence[int]) -> Outcome:
        """The strategy's :class:`Outcome` (a bare order read as one; an order that is not a
        reordering of the items raises :class:`InvalidRankingError`) completed: ``head``
        (all items unless it said fewer) and ``stopped`` (:meth:`_stopped`); the calls it
        ``saved`` below its cap are counted."""
        out = given if isinstance(given, Outcome) else Outcome(tuple(given))
        if sorted(out.order) != list(range(self.plan.n)):  # a strategy's slip, never a result
            raise InvalidRankingError(
                f"the strategy returned an order of {len(out.order)} items that is not a "
                f"reordering of the request's {self.plan.n} items"
            )
        self.state.calls.saved(out.saved)
        head = self.plan.n if out.head is None else out.head
        return replace(out, order=tuple(out.order), head=head, stopped=self._stopped(out.stopped))

    @property
    def samples(self) -> list[Sample]:
        """Every sample of the rounds done so far."""
        return [s for w in self.done.values() for s in w.samples]

    def _stopped(self, said: StopReason) -> StopReason:
        """``"budget"`` when the budget refused a call (a retry or a re-ask included) or made
        a window ask fewer than m; ``"exhausted"`` when a window had fewer orders than m."""
        if self.state.calls.meter.refused or "budget" in self.cut:
            return "budget"
        if said == "complete" and "exhausted" in self.cut:
            return "exhausted"
        return said

    async def lead(self, draw: Draw, keep: int, by: str | Aggregator | None) -> Lead:
        pick = self.engine.head_by(by)
        if pick is self.engine.aggregator:  # no quicker way to the head: wait for it
            order = await self.settle(draw)
            return Lead(tuple(order[:keep]), _Soon(order))
        head = await self.engine.pick_head(draw, keep, pick)
        return Lead(head, self._soon(lambda: self.settle(draw)))

    def _soon(self, work: Callable[[], Awaitable[Sequence[int]]]) -> _Soon:
        """``work()`` started now in the request's task group; await the answer for its result."""
        soon = _Soon()
        assert self._group is not None, "a round's consensus runs inside `async with` the request"
        self._group.start_soon(soon.run, work)
        return soon


class _Soon:
    """The result of work running in the background (or of ``value``, already there),
    awaitable once it is there."""

    def __init__(self, value: Sequence[int] | None = None) -> None:
        self._done = anyio.Event()
        self._value: Sequence[int] = value or ()
        if value is not None:
            self._done.set()

    async def run(self, work: Callable[[], Awaitable[Sequence[int]]]) -> None:
        self._value = await work()
        self._done.set()

    def __await__(self) -> Generator[object, None, Sequence[int]]:
        return self._wait().__await__()

    async def _wait(self) -> Sequence[int]:
        await self._done.wait()
        return self._value
