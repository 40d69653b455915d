"""What a request costs before it runs: the strategy's rounds and the calls of each.

Every strategy answers ``plan(n, options) -> Plan``: the rounds it runs over a list of ``n``
items, in the order they start, each with the sizes of its prompts and its calls. The ranker's
progress total, ``permsc estimate``, ``permsc rank``'s progress bar and the docs read it
(``RankingOptions.plan(n)`` asks the options' strategy).

Calls are the prompts sent when every answer is read the first time and no call fails: re-asks
and retries come on top, cache hits are not calls (``Usage.cached_calls``), and a
``BatchBackend`` sends each wave of a window's prompts as one call. With adaptive m a round
stops, at the earliest, after the first wave that can prove its consensus stable (two
shuffles at least, ``min_successful`` of them when set), at the latest after all of them:
its calls are a range, ``low..high``; with a fixed m they are exact (``low == high``).
A round never draws the same shuffle twice: a window of ``n`` items with ``n! < m`` is drawn
``n!`` times (:func:`~permsc_integrations.permutations.distinct_permutations`).

Under ``max_calls`` the plan is the strategy's plan within the budget and an upper bound: the
request never sends more (its meter refuses the call past it, re-asks and retries included,
which may leave the last rounds' prompts unsent); a plan over a list that fits in the budget is
the plan without it. The frontier policy's rounds (blocks under a budget below its plan, or
adaptive m with a ``top_k``) are planned at their most calls; under adaptive m its later rounds
may not run (``low`` counts the first).

Example:
    >>> from permsc_integrations._options.options import RankingOptions
    >>> plan = RankingOptions().plan(100)  # blocks: 5 blocks x m, then one window x m
    >>> str(plan.calls), [str(r.calls) for r in plan.rounds], plan.rounds[0].prompts
    ('120', ['100', '20'], (20, 20, 20, 20, 20))
    >>> str(RankingOptions(adaptive=True).plan(100).calls)
    '24..120'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from permsc_integrations.backends.base import Message
from permsc_integrations.permutations import distinct_count
from permsc_integrations.strategies._adaptive import Adaptive, waves

__all__ = [
    "Plan",
    "Round",
    "CallRange",
    "PlanOptions",
    "WindowShape",
    "approx_tokens",
    "planned_tokens",
]

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4  # role and separators in chat formats
ANSWER_TOKENS_PER_ITEM = 6  # "[12] > "


class WindowShape(Protocol):
    """The options that shape a list's windows, read alike by a strategy's run (its
    :class:`~._base.RankContext`) and by its plan (:class:`PlanOptions`)."""

    @property
    def window_size(self) -> int: ...

    @property
    def step(self) -> int: ...

    @property
    def top_k(self) -> int | None: ...


class PlanOptions(WindowShape, Protocol):
    """The options a plan reads (:class:`~permsc_integrations.RankingOptions` has them)."""

    @property
    def num_permutations(self) -> int: ...

    @property
    def adaptive(self) -> Adaptive | None: ...

    @property
    def min_successful(self) -> int | None: ...

    @property
    def max_calls(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class CallRange:
    """A number of calls, ``low..high`` (equal unless adaptive m may stop early)."""

    low: int = 0
    high: int = 0

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def __add__(self, other: CallRange) -> CallRange:
        return CallRange(self.low + other.low, self.high + other.high)

    def __str__(self) -> str:
        return str(self.high) if self.exact else f"{self.low}..{self.high}"


@dataclass(frozen=True, slots=True)
class Round:
    """One PSC window or blocks round: positions ``[start, end)`` of the list as it stands
    when the round starts, ``prompts`` (the items shown in each prompt of one shuffle),
    ``shuffles`` drawn at most, and ``calls``."""

    start: int
    end: int
    prompts: tuple[int, ...]
    shuffles: int
    calls: CallRange

    @classmethod
    def of(
        cls, start: int, end: int, prompts: tuple[int, ...], shuffles: int, options: PlanOptions
    ) -> Round:
        """A round of ``shuffles`` shuffles (fewer, adaptive m willing; at most the ``n!``
        distinct orders of its ``n`` items) of ``prompts`` each."""
        shuffles = distinct_count(end - start, shuffles)
        low, high = _drawn(shuffles, options)
        calls = CallRange(low * len(prompts), high * len(prompts))
        return cls(start, end, prompts, shuffles, calls)

    @property
    def items(self) -> int:
        return self.end - self.start


def _drawn(shuffles: int, options: PlanOptions) -> tuple[int, int]:
    """How many of ``shuffles`` a round draws, ``(low, high)``: all of them, or under adaptive m
    from the end of the first wave that can stop it (see the module docstring) up to all."""
    if options.adaptive is None:
        return shuffles, shuffles
    floor = max(2, options.min_successful or 1)  # a stability check needs two shuffles
    low = next((end for _, end in waves(options.adaptive, shuffles) if end >= floor), shuffles)
    return low, shuffles


@dataclass(frozen=True, slots=True)
class Plan:
    """A request's rounds, in the order they start, and what they cost together (``calls``,
    summed once, when the plan is made). ``detail``: what the strategy decided when it
    planned, for it to read back when it runs (the frontier's settings), so that nothing
    plans twice."""

    n: int
    rounds: tuple[Round, ...]
    calls: CallRange = field(init=False, compare=False)
    detail: object = field(default=None, compare=False)

    def __post_init__(self) -> None:
        low = high = 0
        for r in self.rounds:
            low, high = low + r.calls.low, high + r.calls.high
        object.__setattr__(self, "calls", CallRange(low, high))


def approx_tokens(messages: Sequence[Message]) -> int:
    """Approximate prompt tokens: characters / 4, plus a few per message (no tokenizer).

    >>> approx_tokens([{"role": "user", "content": "x" * 400}])
    104
    """
    chars = sum(len(m["content"]) for m in messages)
    return chars // CHARS_PER_TOKEN + TOKENS_PER_MESSAGE * len(messages)


def planned_tokens(
    plan: Plan, render: Callable[[list[str]], Sequence[Message]], texts: Sequence[str]
) -> tuple[int, int]:
    """Approximate ``(prompt, completion)`` tokens of ``plan`` at its most calls: each round's
    prompts ``render``-ed on the items at its positions when the ranking starts (a later
    round's head is not known yet: the first items stand in), answers at 6 tokens an item.
    ``permsc estimate`` and a ranker's cap (:mod:`permsc_integrations._calls.admission`) read it."""
    prompt = completion = 0
    for r in plan.rounds:
        at = r.start
        for size in r.prompts:
            if at + size > r.end:  # a round whose prompts show its items again (the frontier's)
                at = r.start
            prompt += approx_tokens(render(list(texts[at : at + size]))) * r.shuffles
            completion += ANSWER_TOKENS_PER_ITEM * size * r.shuffles
            at += size
    return prompt, completion
