"""One request while it runs: its texts, its events, and the PSC windows a strategy asks for.

:class:`RequestRun` is the :class:`~permsc_integrations.strategies.RankContext` the ranker hands
its strategy: ``window`` runs PSC over a window of the list, ``blocks`` PSC over blocks of it,
each with its ``window_start``/``window_end`` events, its own derived seed, and its result kept
for the request's usage and confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .engine import WindowEngine, derive_seed
from .events import Event, EventHook, EventKind, emit
from .limiter import CallLimiter
from .options import RankingOptions
from .results import Usage, WindowResult
from .windows import Window

__all__ = ["RequestRun"]


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
    windows: list[WindowResult] = field(default_factory=list)

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
        spent = sum((s.usage for w in self.windows for s in w.samples), Usage())
        return spent + Usage(saved_calls=sum(w.saved_calls for w in self.windows))

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

    async def blocks(self, number: int, inside: tuple[int, ...]) -> Sequence[int]:
        """PSC over blocks of ``inside`` (a round of the blocks strategy), with its events."""
        where = {"start": 0, "end": len(inside), "pass": number, "blocks": True}
        await self.emit("window_start", number, **where)
        result = await self.engine.rank_blocks(
            self.query,
            self.texts,
            inside,
            self._seed(inside, "blocks"),
            block_size=self.window_size,
            hooks=self.hooks,
            request_id=self.request_id,
            window=number,
            request_limiter=self.limiter,
        )
        return await self._done(number, result, where)

    async def _done(
        self, number: int, result: WindowResult, where: dict[str, Any]
    ) -> Sequence[int]:
        self.windows.append(result)
        await self.emit(
            "window_end",
            number,
            **where,
            confidence=result.confidence,
            failed=len(result.failed),
            samples=len(result.samples),
        )
        return result.order
