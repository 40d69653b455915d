"""One request while it runs: its texts, its events, and the PSC windows a strategy asks for.

:class:`RequestRun` is the :class:`~permsc_integrations.strategies.RankContext` the ranker hands
its strategy: ``window`` runs PSC over a window of the list, ``blocks`` PSC over blocks of it,
each with its ``window_start``/``window_end`` events, its own derived seed, and its result kept
for the request's usage and confidence.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from .engine import BlocksDraw, WindowEngine, derive_seed
from .errors import PermscError
from .events import Event, EventHook, EventKind, emit
from .limiter import CallLimiter
from .options import RankingOptions
from .results import Usage, WindowResult
from .sampling import first_failure
from .windows import Window

__all__ = ["RequestRun", "Later"]


@dataclass(frozen=True, slots=True)
class Later:
    """What follows a blocks round: ``rank(ctx, head)`` orders its top ``keep`` items,
    guessed by the quick consensus ``lead_by`` (``None``: the aggregator's; see
    :meth:`~.engine.WindowEngine.lead`) so that it starts while the round's own
    consensus is computed. ``agree``: the head must be the consensus's own top ``keep``; when
    the guess held other items, ``rank`` starts again on the consensus's head as soon as it
    is known (the guess's calls are counted in the usage, its windows dropped). Otherwise
    the guessed head stands."""

    keep: int
    lead_by: Any
    rank: Callable[[Any, tuple[int, ...]], Awaitable[Sequence[int]]]
    agree: bool = True


@dataclass
class RequestRun:
    """One request in flight (see the module docstring)."""

    engine: WindowEngine
    options: RankingOptions
    query: str
    texts: list[str]
    hooks: tuple[EventHook | None, ...]
    request_id: Any
    total: int
    limiter: CallLimiter | None
    done: dict[int, WindowResult] = field(default_factory=dict)
    wasted: Usage = field(default_factory=Usage)

    @property
    def windows(self) -> list[WindowResult]:
        """The windows done so far, in plan order (blocks rounds can finish out of order)."""
        return [self.done[k] for k in sorted(self.done)]

    @property
    def n(self) -> int:
        return len(self.texts)

    @property
    def window_size(self) -> int:
        return self.options.window_size

    @property
    def step(self) -> int:
        return self.options.step

    @property
    def top_k(self) -> int | None:
        return self.options.top_k

    def usage(self) -> Usage:
        """What the windows done so far cost."""
        return self.spent() + Usage(saved_calls=sum(w.saved_calls for w in self.windows))

    def spent(self) -> Usage:
        """What the calls made so far cost, dropped windows included."""
        return sum((s.usage for w in self.windows for s in w.samples), self.wasted)

    async def emit(self, kind: EventKind, window: int | None = None, **detail: Any) -> None:
        await emit(self.hooks, Event(kind, self.request_id, window, None, self.total, detail))

    def _seed(self, inside: Sequence[int], where: Any) -> int:
        return derive_seed(self.options.seed, self.query, [self.texts[i] for i in inside], where)

    async def window(self, number: int, window: Window, inside: tuple[int, ...]) -> Sequence[int]:
        """PSC over one window (``inside``: its items in input order), with its events."""
        where = {"start": window.start, "end": window.end, "pass": window.pass_index}
        await self.emit("window_start", number, **where)
        result = await self.engine.rank_window(
            self.query,
            self.texts,
            inside,
            self._seed(inside, (window.pass_index, window.start)),
            start=window.start,
            hooks=self.hooks,
            request_id=self.request_id,
            window=number,
            request_limiter=self.limiter,
        )
        return await self._done(number, result, where)

    async def blocks(
        self,
        number: int,
        inside: tuple[int, ...],
        *,
        shuffles: int | None = None,
        then: Later | None = None,
    ) -> Sequence[int]:
        """PSC over blocks of ``inside`` (a round of the blocks strategy), with its events.

        ``shuffles``: how many shuffles of ``inside`` (default m). ``then``: the later rounds
        (:class:`Later`): they start on a guessed head, on a context of their own, while this
        round's consensus is computed; the answer is their order followed by the consensus of
        the rest."""
        where = {"start": 0, "end": len(inside), "pass": number, "blocks": True}
        await self.emit("window_start", number, **where)
        draw = await self.engine.draw_blocks(
            self.query,
            self.texts,
            inside,
            self._seed(inside, "blocks"),
            block_size=self.window_size,
            shuffles=shuffles,
            hooks=self.hooks,
            request_id=self.request_id,
            window=number,
            request_limiter=self.limiter,
        )
        if then is None:
            return await self._settle(number, draw, where)
        return await self._then(number, draw, where, then)

    async def _then(
        self, number: int, draw: BlocksDraw, where: dict[str, Any], then: Later
    ) -> Sequence[int]:
        """The later rounds on a guessed head beside this round's consensus (:class:`Later`)."""
        head = await self.engine.lead(draw, then.keep, then.lead_by)
        guess = replace(self, done={}, wasted=Usage())  # the guess's windows, apart
        outcome: list[Sequence[int] | PermscError] = []
        ranked: Sequence[int] | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_attempt, then.rank(guess, head), outcome)
                order = await self._settle(number, draw, where)
                if then.agree and set(order[: then.keep]) != set(head):
                    head = tuple(order[: then.keep])  # a wrong guess: rank the right head now
                    ranked = await then.rank(self, head)
        except BaseExceptionGroup as errors:  # surface the failure itself
            self.wasted = self.wasted + _cost(guess, outcome)  # a failed request: all it spent
            raise first_failure(errors) from None
        chosen = set(head)
        return [*self._adopt(guess, outcome[0], ranked), *(i for i in order if i not in chosen)]

    async def _settle(self, number: int, draw: BlocksDraw, where: dict[str, Any]) -> Sequence[int]:
        return await self._done(number, await self.engine.settle(draw), where)

    def _adopt(
        self, guess: RequestRun, outcome: Sequence[int] | PermscError, ranked: Sequence[int] | None
    ) -> Sequence[int]:
        """The guess's order and windows, or (when ``ranked`` replaced it) only its cost."""
        if ranked is not None:
            self.wasted = self.wasted + _cost(guess, [outcome])
            return ranked
        if isinstance(outcome, PermscError):
            raise outcome
        self.done.update(guess.done)
        self.wasted = self.wasted + guess.wasted
        return outcome

    async def _done(
        self, number: int, result: WindowResult, where: dict[str, Any]
    ) -> Sequence[int]:
        self.done[number] = result
        await self.emit(
            "window_end",
            number,
            **where,
            confidence=result.confidence,
            failed=len(result.failed),
            samples=len(result.samples),
        )
        return result.order


def _cost(guess: RequestRun, outcome: Sequence[Sequence[int] | PermscError]) -> Usage:
    """What a guess's calls cost, its failed window's included."""
    failed = [o.usage for o in outcome if isinstance(o, PermscError) and o.usage]
    return sum(failed, guess.spent())


async def _attempt(
    work: Awaitable[Sequence[int]], outcome: list[Sequence[int] | PermscError]
) -> None:
    """``work``'s result or its library error, kept in ``outcome`` (a guess that fails need
    not fail the request: its head may turn out not to be needed)."""
    try:
        outcome.append(await work)
    except PermscError as error:
        outcome.append(error)
