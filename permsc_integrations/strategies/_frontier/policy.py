"""Rounds of windows within a call budget, spent where the top k is still uncertain.

:class:`Frontier` is a pure state machine that a strategy drives: :meth:`~Frontier.next_round`
gives the windows of the next parallel round (each a tuple of items in prompt order), the
strategy asks the model for every window of the round at once and hands every answer to
:meth:`~Frontier.observe`, until ``next_round()`` returns None; :meth:`~Frontier.result` is
the ranking. The first round shows every item of the head it can afford in shuffled blocks
(the whole list, unless the budget is below one pass and a third of it for later rounds:
then the first-stage head, the tail keeping its input order, or shown in the second round
where the answers say the input order tells nothing: :data:`COVER_Z`), in one pass
(``first_passes`` allows more where the budget pays for them beside its later rounds: tried,
not adopted). Each later round shows the items that may still belong in the top k under the
model of every answer so far (:func:`~.model.fit_list`), under a budget only the likeliest
``contenders`` x k of them (the calls go where the top k is decided, as a tournament's final
windows do), in windows whose positions balance each item's exposure to the fitted position
effect, and never a prompt already shown. With a budget, its calls are split over at most
``max_rounds`` rounds; without one (adaptive),
rounds of ``adaptive_round`` calls go on until the top k is certified
(:mod:`~permsc_integrations.strategies._frontier.stopping`) or ``cap`` calls are spent.
A round whose windows came back degenerate (:data:`DEGENERATE_SHARE` of its answers or more:
answered with fewer than half their items, or not read at all) shrinks the later rounds'
windows by a third (not below :data:`MIN_WINDOW`): the model does not answer windows that long.

Example:
    >>> plan = Frontier(100, Settings(budget=12))
    >>> [len(w) for w in plan.next_round()], plan.head
    ([20, 20, 20, 20, 20], 100)
    >>> Frontier(100, Settings(budget=4)).head  # 3 blocks, then one window over the best
    60
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from permsc_integrations.permutations import cut_blocks
from permsc_integrations.results import StopReason, answer_defect
from permsc_integrations.strategies._frontier.model import (
    Answer,
    ListFit,
    fit_list,
    position_effects,
)
from permsc_integrations.strategies._frontier.stopping import ties, unsettled
from permsc_integrations.strategies._levels import CONFIDENCE, ZONE

__all__ = ["Frontier", "Settings", "FrontierResult", "DEGENERATE_SHARE", "MIN_WINDOW", "COVER_Z"]

DEGENERATE_SHARE = 1 / 3
"""A round with this share of its windows answered with fewer than half their items, or not
read at all, shrinks the later windows (untuned: the embedded 1.5B model's WordSort answers
did so at 0 % of its 10-item windows, 38 % at 15 and 50 % at 20: docs/benchmarks.md "window
sizes")."""

MIN_WINDOW = 4
"""The smallest window a shrink leaves (an echo of fewer items could be chance)."""

COVER_Z = 1.0
"""A budget that leaves a tail unseen after its first round shows that tail in one window
(the head grows to the whole list) when the fitted weight of the first-stage order is within
``COVER_Z`` posterior sds of 0: the input order tells nothing there, so an unseen item is as
likely a top-k item as a seen one (a shuffled list, as in the real-answer benchmark). Only a
tail of one window, with a call left after it: on the judge's tuned regimes (100 items,
window 20, budget 6: a tail of 20) the rule showed the tail in 84 of 192 lists and changed
nDCG@10 by +0.000 on average (-0.046 to +0.035 a regime); a tail of three windows at window
10 lost 0.029 (benchmarks/frontier_sim.py's lists; docs/strategies.md "What real answers
changed")."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The policy's knobs. The policy as a whole, with these values, is measured in
    docs/benchmarks.md "frontier" (benchmarks/frontier_sim.py); a knob marked "untuned" was
    not varied there."""

    k: int = 10  # the top k that matters (the request's; 10 by default: docs/scores.md)
    window: int = 20  # the request's window_size
    budget: int | None = None  # the most calls; None: adaptive, up to ``cap``
    cap: int = 120  # without a budget: the fixed plan's calls (the request's)
    max_rounds: int = 4  # with a budget (untuned)
    later_share: float = 1 / 3  # at least this share of a budget goes to later rounds (untuned)
    first_passes: int = 1  # the first round's passes at most (2: benchmarks/frontier_windows.py)
    floor: float = 0.02  # an item with less chance of the top k is left out of a round (untuned)
    contenders: int | None = 2  # a budget's later rounds: the likeliest contenders x k at most
    zone: float = ZONE  # of the contenders' spread (zone_width): benchmarks/fine_grades.py
    confidence: float = CONFIDENCE  # adaptive m's level: docs/benchmarks.md "adaptive"
    adaptive_round: int = 6  # calls per later round without a budget (untuned)
    reading: str = "plackett-luce"  # how an answer is read: docs/benchmarks.md "frontier-replay"
    seed: int = 0


@dataclass(frozen=True, slots=True)
class FrontierResult:
    """The ranking and what stands behind it."""

    order: tuple[int, ...]
    top_probability: tuple[float | None, ...]  # per item: its chance of the top k (None: unseen)
    head: int  # the first ``head`` items were ranked; the rest keep their input order
    ties: tuple[tuple[int, int], ...]  # neighbours in the top k settled as ties
    stopped: StopReason  # "budget", "certified", "cap" or "exhausted" (every order shown)
    calls: int
    rounds: int


@dataclass
class Frontier:
    """The policy's state for one list of ``n`` items (module docstring)."""

    n: int
    settings: Settings = field(default_factory=Settings)
    answers: list[Answer] = field(default_factory=list)
    calls: int = 0
    rounds: int = 0
    stopped: StopReason | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(self.settings.seed)
        self._fit: ListFit | None = None
        self._shown: set[tuple[int, ...]] = set()
        self.window = self.settings.window  # the later rounds' (it shrinks: module docstring)
        self.head = self._head()

    @property
    def reach(self) -> int:
        """The items the later rounds are over: the head, or the whole list where its tail
        fits one window and a budget leaves later calls to show it (:meth:`_cover`)."""
        s, tail = self.settings, self.n - self.head
        may = s.budget is not None and 0 < tail <= s.window and self.limit - self._first() >= 2
        return self.n if may else self.head

    @property
    def limit(self) -> int:
        s = self.settings
        return s.budget if s.budget is not None else s.cap

    def _head(self) -> int:
        s = self.settings
        if s.budget is None:
            return self.n
        first = max(1, min(s.budget - self._later(), math.ceil(self.n / s.window)))
        return min(self.n, first * s.window)

    def passes(self) -> int:
        """The first round's passes over the head: as many as the budget pays for beside its
        later rounds' share, at most ``first_passes``."""
        s = self.settings
        if s.budget is None:
            return 1
        return max(1, min(s.first_passes, (s.budget - self._later()) // self._blocks()))

    def _blocks(self) -> int:
        """The blocks of one pass over the head."""
        return -(-self.head // self.settings.window)

    def _first(self) -> int:
        """The first round's calls: its passes' blocks, within the budget."""
        return min(self.limit, self.passes() * self._blocks())

    def _later(self) -> int:
        """The calls a budget keeps for its later rounds at the least (``later_share``)."""
        budget = self.settings.budget or 0
        return max(1, round(budget * self.settings.later_share)) if budget > 1 else 0

    def _first_round(self) -> list[tuple[int, ...]]:
        """Shuffled blocks of the head, one pass or more (:meth:`passes`)."""
        windows: list[tuple[int, ...]] = []
        for _ in range(self.passes()):
            items = list(range(self.head))
            self._rng.shuffle(items)
            blocks = (tuple(b) for b in cut_blocks(items, self.settings.window))
            windows += [b for b in blocks if b not in windows]  # a few items: maybe once more
        return windows[: self.limit]

    def _round_calls(self) -> int:
        s, left = self.settings, self.limit - self.calls
        if s.budget is None:
            return min(left, s.adaptive_round)
        return -(-left // max(1, s.max_rounds - self.rounds))

    def next_round(self) -> list[tuple[int, ...]] | None:
        """The next round's windows (items in prompt order), or None: done."""
        if self.stopped:
            return None
        if self.n < 2 or self.calls >= self.limit:
            self.stopped = "budget" if self.settings.budget is not None else "cap"
            return None
        if self.rounds == 0:
            windows = self._first_round()
        else:
            fit = self.model()
            if self.settings.budget is None and not self._unsettled(fit):
                self.stopped = "certified"
                return None
            windows = self._cover(fit) or self._windows(fit, self._round_calls())
            if not windows:  # every order of these items was shown: nothing new to ask
                self.stopped = "exhausted"
                return None
        self.rounds += 1
        self.calls += len(windows)
        self._shown.update(windows)
        return windows

    def observe(
        self,
        answers: Sequence[Answer],
        *,
        spent: int | None = None,
        unread: int = 0,
        refused: bool = False,
        affordable: int | None = None,
    ) -> None:
        """Every answer of the round (failed windows may be left out); ``spent``: the calls
        really spent so far, re-asks and retries included (cache hits not), when the caller
        counts them: the budget left is the budget less these; ``unread``: the round's
        windows whose answers could not be read at all (not a backend's errors);
        ``refused``: the request's budget refused some of its calls (a token or cost budget
        spent before the calls were): no round follows; ``affordable``: the calls a token or
        cost budget pays for in all at what a call has cost so far: the budget from now on
        (the head stays)."""
        self.answers.extend(answers)
        if spent is not None:
            self.calls = spent
        if refused:
            self.stopped = "budget"
        if affordable is not None and self.settings.budget is not None:
            self.settings = replace(self.settings, budget=affordable)
        self._fit = None
        self._fit_window(answers, unread)

    def _fit_window(self, answers: Sequence[Answer], unread: int) -> None:
        """Shrink the later windows where the round's came back degenerate or unread."""
        bad = unread + sum(1 for a in answers if answer_defect(a.shown, a.ranking) == "sparse")
        if bad and bad >= DEGENERATE_SHARE * (len(answers) + unread):
            shrunk = max(MIN_WINDOW, min(self.window - 1, math.ceil(self.window * 2 / 3)))
            self.window = min(self.window, shrunk)

    def planned(self) -> tuple[int, ...]:
        """The calls of each round at the most, before any answer (a plan): a budget's
        rounds are fixed up front, adaptive rounds may stop after the first."""
        dry, out = Frontier(self.n, self.settings), list[int]()
        while self.n >= 2 and dry.calls < dry.limit:
            calls = dry._round_calls() if out else dry._first()
            out.append(calls)
            dry.calls, dry.rounds = dry.calls + calls, dry.rounds + 1
        return tuple(out)

    def model(self) -> ListFit:
        """The list model of the head, fitted to every answer so far."""
        if self._fit is None:
            self._fit = fit_list(self.head, self.answers, reading=self.settings.reading)
        return self._fit

    def _cover(self, fit: ListFit) -> list[tuple[int, ...]]:
        """The unseen tail's window (filled up with the likeliest head items), once, where the
        plan lets the later rounds reach it (:attr:`reach`), the first-stage order tells nothing
        (:data:`COVER_Z`), and the tail still fits the (maybe shrunk) window with a call left
        after it; the head is then the whole list. Else none."""
        tail, left = list(range(self.head, self.n)), self.limit - self.calls
        if self.reach == self.head or len(tail) > self.window or left < 2:  # as planned, now
            return []
        if fit.slope > COVER_Z * fit.slope_sd:
            return []
        p = fit.top_probabilities(self.settings.k, seed=self.settings.seed + self.rounds)
        likeliest = sorted(range(self.head), key=lambda i: (-p[i], -fit.mean[i]))
        window = [*tail, *likeliest[: self.window - len(tail)]]
        self._rng.shuffle(window)
        self.head, self._fit = self.n, None
        return [tuple(window)]

    def _unsettled(self, fit: ListFit) -> list[tuple[int, int]]:
        s = self.settings
        return unsettled(
            fit, top_k=s.k, zone=s.zone, confidence=s.confidence, seed=s.seed + self.rounds
        )

    def _windows(self, fit: ListFit, calls: int) -> list[tuple[int, ...]]:
        """``calls`` windows over the items that may still be in the top k (at least
        ``k + window / 2`` of them, under a budget at most ``contenders * k``: the likeliest
        first), in shuffled balanced blocks. The cap: docs/strategies.md "real answers" and
        docs/benchmarks.md "frontier windows: contenders"."""
        s = self.settings
        p = fit.top_probabilities(s.k, seed=s.seed + self.rounds)
        ranked = sorted(range(self.head), key=lambda i: (-p[i], -fit.mean[i]))
        plausible = sum(1 for i in ranked if p[i] >= s.floor)
        if s.budget is not None and s.contenders is not None:
            plausible = min(plausible, s.contenders * s.k)
        size = min(self.head, max(plausible, s.k + self.window // 2), calls * self.window)
        windows: list[tuple[int, ...]] = []
        exposure = _exposure(self.answers, fit)
        for _ in range(calls):  # a pass of blocks per turn; a block adds at most one window
            pool = ranked[:size]
            self._rng.shuffle(pool)
            for block in cut_blocks(pool, self.window):
                window = self._arrange(block, fit, exposure) if len(block) >= 2 else None
                if len(windows) < calls and window is not None:
                    windows.append(window)
                    self._shown.add(window)
            if len(windows) >= calls:
                break
        return windows

    def _arrange(
        self, items: Sequence[int], fit: ListFit, exposure: dict[int, float]
    ) -> tuple[int, ...] | None:
        """``items`` in the prompt positions that even out their past exposure to the
        position effect (the least favoured so far gets the most favoured place); another
        order where that prompt was already shown; None when every order was."""
        effect = position_effects(fit, len(items))
        places = sorted(range(len(items)), key=lambda q: -effect[q])
        needy = sorted(items, key=lambda i: (exposure.get(i, 0.0), self._rng.random()))
        slots = [0] * len(items)
        for q, item in zip(places, needy, strict=True):
            slots[q] = item
        window = tuple(slots)
        if window not in self._shown:
            return window
        if len(items) <= 5:  # at most 120 orders: pick one not shown yet, if any is left
            left = [w for w in itertools.permutations(items) if w not in self._shown]
            return self._rng.choice(left) if left else None
        while window in self._shown:  # more orders than any budget: a shuffle is new
            shuffled = list(items)
            self._rng.shuffle(shuffled)
            window = tuple(shuffled)
        return window

    def result(self) -> FrontierResult:
        """The ranking: the head by posterior mean, then the tail in input order."""
        s = self.settings
        if not self.answers:
            unseen = (None,) * self.n
            return FrontierResult(tuple(range(self.n)), unseen, self.head, (), "budget", 0, 0)
        fit = self.model()
        p = fit.top_probabilities(s.k, seed=s.seed)
        tail = self.n - self.head
        return FrontierResult(
            order=(*fit.order(), *range(self.head, self.n)),
            top_probability=(*(float(x) for x in p), *(None,) * tail),
            head=self.head,
            ties=tuple(ties(fit, top_k=s.k, confidence=s.confidence, seed=s.seed)),
            stopped=self.stopped or "budget",
            calls=self.calls,
            rounds=self.rounds,
        )


def _exposure(answers: Sequence[Answer], fit: ListFit) -> dict[int, float]:
    """Each item's summed position effect over the prompts that showed it."""
    out: dict[int, float] = {}
    for a in answers:
        for item, effect in zip(a.shown, position_effects(fit, len(a.shown)), strict=True):
            out[item] = out.get(item, 0.0) + effect
    return out
