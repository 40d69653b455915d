"""Rounds of windows within a call budget, spent where the top k is still uncertain.

:class:`Frontier` is a pure state machine that a strategy drives: ``next_round()`` gives the
windows of the next parallel round (each a tuple of items in prompt order), the strategy asks
the model for every window of the round at once and hands every answer to ``observe()``, until
``next_round()`` returns None; ``result()`` is the ranking. The first round shows every item
of the head it can afford in shuffled blocks; each later round shows the items whose top-k
membership or order is still uncertain under the model of every answer so far
(:func:`~permsc_integrations.frontier.model.fit_list`), in windows whose positions balance each
item's exposure to the position effect.

Example:
    >>> plan = Frontier(100, budget=12)
    >>> [len(w) for w in plan.next_round()]
    [20, 20, 20, 20, 20]
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..permutations import cut_blocks
from .model import Answer, ListFit, fit_list

__all__ = ["Frontier", "Settings", "FrontierResult"]


@dataclass(frozen=True, slots=True)
class Settings:
    """The policy's knobs (measured in benchmarks/frontier_sim.py)."""

    k: int = 10
    window: int = 20
    budget: int | None = None  # None: adaptive, up to ``cap`` calls
    cap: int = 120
    max_rounds: int = 4
    floor: float = 0.02  # an item below this chance of the top k is left out of a round
    confidence: float = 0.9
    zone: float = 0.35  # the indifference zone, as a share of the utilities' spread
    zone_floor: float = 0.0  # ... and at least this (the model's own scale, logits)
    adaptive_round: int = 4  # calls per later round under adaptive stopping
    later_share: float = 1 / 3  # at least this share of the budget goes to later rounds
    seed: int = 0


@dataclass(frozen=True, slots=True)
class FrontierResult:
    order: tuple[int, ...]
    top_probability: tuple[float, ...]
    head: int  # items covered; the rest keep their input order
    ties: tuple[tuple[int, int], ...]  # adjacent pairs of the top k settled as ties
    stopped: str  # "budget" | "certified" | "cap"


@dataclass
class Frontier:
    n: int
    settings: Settings = field(default_factory=Settings)
    answers: list[Answer] = field(default_factory=list)
    calls: int = 0
    rounds: int = 0
    stopped: str = ""

    def __init__(self, n: int, settings: Settings | None = None, **changes: object) -> None:
        base = settings or Settings()
        self.n = n
        self.settings = Settings(**{**_fields(base), **changes})  # type: ignore[arg-type]
        self.answers, self.calls, self.rounds, self.stopped = [], 0, 0, ""
        self._rng = random.Random(self.settings.seed)
        self._fit: ListFit | None = None
        self._shown: set[tuple[int, ...]] = set()
        self.head = self._head()

    # planning --------------------------------------------------------------------------
    @property
    def limit(self) -> int:
        s = self.settings
        return s.budget if s.budget is not None else s.cap

    def _head(self) -> int:
        """Items the first round covers: all, or (below one pass and a last window) what
        the budget affords."""
        s, per = self.settings, self.settings.window
        if s.budget is None:
            return self.n
        later = max(1, round(s.budget * s.later_share)) if s.budget > 1 else 0
        first = max(1, min(s.budget - later, math.ceil(self.n / per)))
        return min(self.n, first * per)

    def _round_calls(self) -> int:
        s, left = self.settings, self.limit - self.calls
        if s.budget is None:
            return min(left, s.adaptive_round)
        rounds_left = max(1, s.max_rounds - self.rounds)
        return max(1, -(-left // rounds_left))

    def next_round(self) -> list[tuple[int, ...]] | None:
        """The next round's windows (items in prompt order), or None: done."""
        if self.n < 2 or self.calls >= self.limit or self.stopped:
            self.stopped = self.stopped or ("budget" if self.settings.budget else "cap")
            return None
        if self.rounds == 0:
            items = list(range(self.head))
            self._rng.shuffle(items)
            windows = [tuple(b) for b in cut_blocks(items, self.settings.window)]
            windows = windows[: self.limit]
        else:
            fit = self._model()
            if self.settings.budget is None and self._certified(fit):
                self.stopped = "certified"
                return None
            windows = self._windows(fit, self._round_calls())
        self.rounds += 1
        self.calls += len(windows)
        self._shown.update(windows)
        return windows

    def observe(self, answers: Sequence[Answer]) -> None:
        self.answers.extend(answers)
        self._fit = None

    # the model ---------------------------------------------------------------------------
    def _model(self) -> ListFit:
        if self._fit is None:
            self._fit = fit_list(self.head, [a for a in self.answers if max(a.shown) < self.head])
        return self._fit

    def _windows(self, fit: ListFit, calls: int) -> list[tuple[int, ...]]:
        s = self.settings
        p = fit.top_probabilities(s.k, seed=s.seed + self.rounds)
        ranked = sorted(range(self.head), key=lambda i: (-p[i], -fit.mean[i]))
        plausible = [i for i in ranked if p[i] >= s.floor]
        size = min(self.head, max(len(plausible), s.k + s.window // 2))
        size = min(size, calls * s.window)
        pool = ranked[:size]
        windows: list[tuple[int, ...]] = []
        while len(windows) < calls:
            items = list(pool)
            self._rng.shuffle(items)
            for block in cut_blocks(items, s.window):
                if len(windows) < calls and len(block) >= 2:
                    windows.append(self._arrange(block, fit))
        return windows

    def _arrange(self, items: Sequence[int], fit: ListFit) -> tuple[int, ...]:
        """``items`` in prompt positions that balance their past exposure to the fitted
        position effect; never a prompt already shown if another order is left."""
        w = len(items)
        effect = _effects(fit, w)
        past = _exposure(self.answers, fit)
        best_first = sorted(range(w), key=lambda q: -effect[q])
        by_need = sorted(items, key=lambda i: (past.get(i, 0.0), self._rng.random()))
        slots = [0] * w
        for q, item in zip(best_first, by_need, strict=True):
            slots[q] = item
        window = tuple(slots)
        for _ in range(20):
            if window not in self._shown:
                break
            shuffled = list(items)
            self._rng.shuffle(shuffled)
            window = tuple(shuffled)
        return window

    # stopping ----------------------------------------------------------------------------
    def _certified(self, fit: ListFit) -> bool:
        return not self._unsettled(fit)

    def _unsettled(self, fit: ListFit) -> list[tuple[int, int]]:
        """Adjacent pairs of the top k (and the one across the cut) that the posterior does
        not order beyond the indifference zone at the confidence level."""
        s = self.settings
        order = fit.order()
        zone = max(s.zone * fit.tau, s.zone_floor)
        draws = fit.draws(400, s.seed + 7919 * self.rounds)
        bad = []
        for r in range(min(s.k, self.head - 1)):
            a, b = order[r], order[r + 1]
            if np.mean(draws[:, a] - draws[:, b] > -zone) < s.confidence:
                bad.append((a, b))
        return bad

    def ties(self, fit: ListFit) -> tuple[tuple[int, int], ...]:
        s = self.settings
        order, zone = fit.order(), max(s.zone * fit.tau, s.zone_floor)
        draws = fit.draws(400, s.seed + 1)
        out = []
        for r in range(min(s.k, self.head) - 1):
            a, b = order[r], order[r + 1]
            if np.mean(draws[:, a] - draws[:, b] > 0) < s.confidence:
                out.append((a, b))
        return tuple(out)

    def result(self) -> FrontierResult:
        fit = self._model() if self.answers else None
        if fit is None:
            return FrontierResult(tuple(range(self.n)), (0.0,) * self.n, self.head, (), "budget")
        head = fit.order()
        p = fit.top_probabilities(self.settings.k, seed=self.settings.seed)
        order = (*head, *range(self.head, self.n))
        probs = (*(float(x) for x in p), *(0.0,) * (self.n - self.head))
        return FrontierResult(order, probs, self.head, self.ties(fit), self.stopped or "budget")


def _fields(settings: Settings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in Settings.__slots__}


def _effects(fit: ListFit, w: int) -> list[float]:
    from .model import _basis  # noqa: PLC0415 - one helper, shared

    return [float(_basis(q, w) @ fit.position) for q in range(w)]


def _exposure(answers: Sequence[Answer], fit: ListFit) -> dict[int, float]:
    from .model import _basis  # noqa: PLC0415

    out: dict[int, float] = {}
    for a in answers:
        w = len(a.shown)
        for q, item in enumerate(a.shown):
            out[item] = out.get(item, 0.0) + float(_basis(q, w) @ fit.position)
    return out
