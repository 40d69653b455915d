"""Frozen values describing a ranking and how it was reached.

Example:
    >>> r = RankingResult(order=(2, 0, 1), scores=(2 / 3, 1 / 3, 1.0))
    >>> r.order[0], r.top(2)
    (2, (2, 0))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Literal

__all__ = [
    "StopReason",
    "Usage",
    "ParseStatus",
    "ParsedAnswer",
    "Sample",
    "WindowResult",
    "RankingResult",
    "scores_from_order",
    "Defect",
    "answer_defect",
]


StopReason = Literal["complete", "budget", "certified", "cap", "exhausted"]
"""Why a ranking's sampling ended (:attr:`RankingResult.stopped`)."""

Defect = Literal["echo", "reversed", "sparse"]
"""What makes an answer degenerate (:func:`answer_defect`)."""


def answer_defect(shown: Sequence[int], ranking: Sequence[int]) -> Defect | None:
    """``"echo"``: a ranking of 4 or more items that names them in the order shown (by
    chance one time in 24 or fewer, in a shuffled prompt); ``"reversed"``: one that names them
    in the reverse of the order shown (as unlikely, and as empty: the copy read backwards;
    the embedded 1.5B model answers some DL19 windows so); else ``"sparse"``: a window of 4 or
    more answered with fewer than half its items (an answer that repeats one item, stops early or
    names others); None: none of these. The one rule the frontier, the result and the
    benchmarks read (:attr:`RankingResult.degenerate`).

    >>> answer_defect((2, 0, 1, 3), (2, 0, 1, 3)), answer_defect((2, 0, 1, 3), (0, 2, 1, 3))
    ('echo', None)
    >>> answer_defect((2, 0, 1, 3), (3, 1, 0, 2))
    'reversed'
    >>> answer_defect((5, 6, 7, 8, 9), (7, 5))
    'sparse'
    """
    if len(ranking) >= 4:
        named = set(ranking)
        copy = [i for i in shown if i in named]
        if list(ranking) == copy:
            return "echo"
        if list(ranking) == copy[::-1]:
            return "reversed"
    return "sparse" if len(shown) >= 4 and 2 * len(ranking) < len(shown) else None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token and call accounting; ``+`` adds two usages."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    retries: int = 0
    cached_calls: int = 0
    latency_s: float = 0.0
    saved_calls: int = 0  # samples adaptive m did not need to draw
    cost: float | None = None  # with prices set (spending.Prices); None: not known
    batches: int = 0  # backend calls that carried the calls: fewer where prompts were batched

    COUNTS: ClassVar[tuple[str, ...]] = (
        "calls",
        "prompt_tokens",
        "completion_tokens",
        "retries",
        "cached_calls",
    )
    """The counts reported wherever a usage is written out (records, metadata, Ray rows)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int | float]:
        """The counts as plain data, ``cost`` when known, and ``batches`` where a backend
        answered prompts in batches (a call is one prompt answered, batched or not: then the
        batches are fewer than the calls).

        >>> Usage(prompt_tokens=5, calls=1, batches=1).as_dict()
        {'calls': 1, 'prompt_tokens': 5, 'completion_tokens': 0, 'retries': 0, 'cached_calls': 0}
        >>> Usage(calls=6, batches=1).as_dict()["batches"]
        1
        """
        out: dict[str, int | float] = {name: getattr(self, name) for name in self.COUNTS}
        if self.cost is not None:
            out["cost"] = self.cost
        if 0 < self.batches < self.calls:
            out["batches"] = self.batches
        return out

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            self.retries + other.retries,
            self.cached_calls + other.cached_calls,
            self.latency_s + other.latency_s,
            self.saved_calls + other.saved_calls,
            None if self.cost is None and other.cost is None else _cost(self) + _cost(other),
            self.batches + other.batches,
        )


def _cost(usage: Usage) -> float:
    return usage.cost or 0.0


class ParseStatus(str, Enum):
    """How one model answer parsed."""

    OK = "ok"  # every item exactly once
    PARTIAL = "partial"  # a usable ranking with missing, duplicate or out-of-range ids
    INVALID = "invalid"  # nothing usable; the sample failed
    ERROR = "error"  # the call itself failed (backend error after retries)
    SKIPPED = "skipped"  # not asked (or its re-ask or retry not sent): max_calls was spent


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """A parsed answer, in *prompt* positions (0-based, best first).

    ``missing`` stay missing: they are never filled in input order.
    """

    ranking: tuple[int, ...]
    missing: tuple[int, ...] = ()
    duplicates: tuple[int, ...] = ()
    out_of_range: tuple[str, ...] = ()

    @property
    def status(self) -> ParseStatus:
        if self.missing or self.duplicates or self.out_of_range:
            return ParseStatus.PARTIAL
        return ParseStatus.OK


@dataclass(frozen=True, slots=True)
class Sample:
    """One permuted call: what was shown, what came back, what it meant.

    ``permutation[p]`` is the original index of the item shown at prompt position ``p``;
    ``ranking`` is the answer mapped back to original indices (best first, maybe partial);
    a failed sample keeps its ``exception`` (the ParseError or BackendError).
    In first-token scoring (``scoring="first_token"``) ``probabilities[p]`` is the probability
    of the item shown at position ``p`` (item ``permutation[p]``), renormalised over the
    window's labels, and ``label_mass`` the share of the first token the labels held;
    ``ranking`` orders the items by probability (ties: the earlier prompt position first).
    """

    permutation: tuple[int, ...]
    ranking: tuple[int, ...]
    raw_text: str
    status: ParseStatus
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    probabilities: tuple[float, ...] = ()
    label_mass: float | None = None

    @property
    def ok(self) -> bool:
        return self.status in (ParseStatus.OK, ParseStatus.PARTIAL)

    @property
    def defect(self) -> Defect | None:
        """What makes this answer degenerate (:func:`answer_defect`); None for a sound
        answer, a failed one (see ``ok``) or a first-token reading (it cannot echo)."""
        if not self.ok or self.probabilities:
            return None
        return answer_defect(self.permutation, self.ranking)

    def item_probabilities(self) -> dict[int, float]:
        """``{item: probability}`` of a first-token sample (empty for a generated one)."""
        return dict(zip(self.permutation, self.probabilities, strict=False))


@dataclass(frozen=True, slots=True)
class WindowResult:
    """PSC over one window: ``indices`` are original item indices in the window's input order.

    ``scores[j]`` is item ``indices[j]``'s score from a first-token probability aggregator
    (its mean probability, in [0, 1]); empty for the rank aggregators."""

    start: int
    indices: tuple[int, ...]
    order: tuple[int, ...]
    samples: tuple[Sample, ...]
    confidence: float
    saved_calls: int = 0  # samples of the cap that adaptive m did not draw
    scores: tuple[float, ...] = ()  # a probability aggregator's score per item of indices

    @property
    def failed(self) -> tuple[Sample, ...]:
        """The samples that failed (a skipped one, never asked for want of budget, did not)."""
        return tuple(s for s in self.samples if not s.ok and s.status is not ParseStatus.SKIPPED)


@dataclass(frozen=True, slots=True)
class RankingResult:
    """The outcome of ranking one list.

    ``order`` holds indices into the caller's items, best first; ``scores[i]`` is item
    ``i``'s score, strictly decreasing along ``order`` (usable as a relevance score). With
    first-token scoring and a probability aggregator over one window, ``scores[i]`` is item
    ``i``'s mean probability (in [0, 1], non-increasing along ``order``; docs/first_token.md).

    ``top_probability[i]``: item ``i``'s probability of belonging in the top k under the
    list model of every answer (docs/scores.md: k is ``top_k``, or 10 under ``max_calls``),
    non-increasing along ``order``; ``None`` for an item no answer looked at (never shown to
    the model, or shown only in prompts that failed); empty when there is no k, or no model
    was fitted (docs/strategies.md says when).
    ``head``: the ranking ranked the first ``head`` items of the input; the rest follow in
    their input order (a ``max_calls`` below one pass; None: not known, a result built by
    hand). ``stopped``: why sampling ended (``"complete"``: the plan ran; ``"budget"``:
    ``max_calls`` decided, by the calls it planned or by a call, retry or re-ask it refused;
    ``"certified"``: the top k was certified; ``"cap"``: adaptive m reached its cap;
    ``"exhausted"``: every distinct prompt was asked, fewer than m). ``ties``: pairs of
    neighbours in the top k whose order the answers do not establish (settled as ties).
    ``strategy``: the strategy the request ran, as the chooser picked it (``"blocks"``,
    ``"sliding"``, ``"frontier"``: blocks hands a ``max_calls`` below its plan, or adaptive m
    with a ``top_k``, to the frontier; docs/strategies.md); None: a result built by hand.
    """

    order: tuple[int, ...]
    scores: tuple[float, ...]
    windows: tuple[WindowResult, ...] = ()
    confidence: float = 1.0
    usage: Usage = field(default_factory=Usage)
    request: object = None
    top_probability: tuple[float | None, ...] = ()
    head: int | None = None
    stopped: StopReason = "complete"
    ties: tuple[tuple[int, int], ...] = ()
    strategy: str | None = None

    @property
    def samples(self) -> tuple[Sample, ...]:
        return tuple(s for w in self.windows for s in w.samples)

    @property
    def failures(self) -> tuple[Sample, ...]:
        """The samples that failed (not those skipped for want of budget)."""
        return tuple(s for w in self.windows for s in w.failed)

    @property
    def degenerate(self) -> tuple[Sample, ...]:
        """The answers that read as degenerate (:attr:`Sample.defect`): copies of the order
        shown (echoes and reversals), and windows answered with fewer than half their items.
        Many of them say the model cannot answer windows this long (try a smaller
        ``window_size``): see :attr:`degenerate_note`."""
        return tuple(s for s in self.samples if s.defect is not None)

    @property
    def degenerate_note(self) -> str | None:
        """What the ranking stands on, when a third of its answers or more (3 at least) are
        :attr:`degenerate`: the ranker logs it as a warning, ``permsc serve`` adds it to
        ``meta.warnings``; None otherwise."""
        answered = sum(1 for s in self.samples if s.ok)
        bad = [s.defect for s in self.degenerate]
        if answered < 3 or 3 * len(bad) < answered:
            return None
        window = max(len(s.permutation) for s in self.samples)
        return (
            f"{len(bad)} of {answered} answers were degenerate ({bad.count('echo')} echoed the "
            f"order shown, {bad.count('reversed')} reversed it, {bad.count('sparse')} named "
            "fewer than half of their window): the "
            f"model may not answer windows of {window} items; a smaller window_size, or a "
            "stronger model, may serve better (result.degenerate has them)"
        )

    def top(self, k: int) -> tuple[int, ...]:
        return self.order[:k]


def scores_from_order(order: Sequence[int]) -> tuple[float, ...]:
    """Scores ``(n - rank) / n`` per item: 1.0 for the best, strictly decreasing.

    >>> scores_from_order([1, 2, 0])
    (0.3333333333333333, 1.0, 0.6666666666666666)
    """
    n = len(order)
    scores = [0.0] * n
    for rank, item in enumerate(order):
        scores[item] = (n - rank) / n
    return tuple(scores)
