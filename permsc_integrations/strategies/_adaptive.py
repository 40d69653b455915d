"""Adaptive m: sample a window in waves and stop once the samples support the consensus.

PSC's cost is m calls per window. When the model agrees with itself the consensus is settled
after a few samples; when it does not, more samples help. :class:`Adaptive` draws a first wave,
then further waves, up to ``num_permutations`` (the cap), and stops as soon as the samples so
far establish the consensus *at a stated confidence*: every adjacent pair of the consensus in
the part that matters (its top ``top_k`` and the pair at the cut, or the whole order) is won by
a margin that a one-sided sign test calls real, the pairs taken together at the family level
``1 - confidence`` (Holm). A pair counts only in the samples that list both of its items, as
the aggregators count it, so a pair seen together in fewer samples is less evidence; a pair
that never met, or a tie, keeps sampling going. What the test establishes is that the model's
own majority (what m = infinity would say) orders each of those pairs as the consensus does:
it is about self-consistency, not about the truth. The level holds at each look; a window
looked at after each of several waves may stop early somewhat more often in the worst case.

The waves take the same seeded permutation sequence as a fixed-m run, in order, so a stopped
run is a prefix of the full one. The default, ``confidence=0.9``, was chosen on the scripted
noise models and the saved answers of a 1.5B model (docs/benchmarks.md "adaptive"): it is the
highest level at which a model that never disagrees with itself stops after 8 samples of a
20-item window (unanimous samples needed: 5 for 3 items, 7 for 10, 8 for 20; 0.95 needs 9
for 20 items, so 12 in waves of 4).

Where the sign test alone would wait for the cap, a second rule may stop sooner: a pair the
model splits about evenly is never established, and a real model leaves such pairs in nearly
every 20-word list. With ``zone`` (the default :data:`ZONE`) and the orders shown, the window
also stops when the list model (:func:`~permsc_integrations.strategies._frontier.fit_list`)
settles every pair that matters up to an indifference zone of ``zone`` times the utilities'
spread (:func:`~permsc_integrations.strategies._frontier.unsettled`, the frontier's stop rule)
*and* the consensus holds steady over the last wave (its part that matters has the same
members and a Kendall tau of at least :data:`STEADY` to the consensus before that wave). The
order returned is the aggregator's consensus either way. On the embedded 1.5B model's saved
answers the sign test saved no calls; the two rules together saved about a third at no loss
of Kendall tau (docs/benchmarks.md "adaptive"). ``zone=None`` keeps the sign test alone.

The rule reads p-values, one per adjacent pair (:meth:`Adaptive.pairs`), so another source
of evidence can replace the sign test: for answers that carry per-item probabilities, the
one-sided p-value of the difference of two items' mean probabilities (its standard error from
the samples) goes to :meth:`Adaptive.confident` in the same way.

Example:
    >>> policy = Adaptive(confidence=0.9)
    >>> policy.stable([[0, 1, 2]] * 4, n_items=3, aggregator="borda")  # 4-0 twice: p = 1/16
    False
    >>> policy.stable([[0, 1, 2]] * 6, n_items=3, aggregator="borda")  # 6-0 twice: p = 1/64
    True
    >>> policy.stable([[0, 1, 2]] * 4 + [[1, 0, 2]] * 2, n_items=3, aggregator="borda")
    False
    >>> policy.reason([[0, 1, 2]] * 6, n_items=3, aggregator="borda")  # which rule stopped it
    'stable'
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import InitVar, dataclass
from typing import TypeVar, cast

from permsc_integrations._checks import positive_int
from permsc_integrations._events import StableReason
from permsc_integrations.aggregators import Aggregator, aggregate
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.strategies._levels import CONFIDENCE, STEADY, ZONE

__all__ = ["Adaptive", "waves", "sign_test"]

Ranking = Sequence[int]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Adaptive:
    """When to stop sampling a window (see the module docstring).

    ``first_wave`` samples come first, then ``wave`` more at a time, never more than the
    ranker's ``num_permutations``; ``top_k`` (None: the whole order) is the part of the
    consensus that must be established; ``confidence`` is the chance, under the sign test's
    assumptions, that every adjacent pair of that part is ordered as the model's majority
    orders it when sampling stops; ``zone`` (None: off) lets the list model's indifference
    zone stop it too, once the consensus holds steady (see the module docstring).
    """

    first_wave: int = 4
    wave: int = 4
    top_k: int | None = None
    confidence: float = CONFIDENCE
    tolerance: InitVar[float | None] = None  # replaced by confidence: refused with a hint
    zone: float | None = ZONE

    def __post_init__(self, tolerance: float | None) -> None:
        if tolerance is not None:
            raise ConfigurationError(
                "Adaptive.tolerance is gone: sampling now stops on evidence at a confidence "
                'level; use Adaptive(confidence=0.9) (docs/benchmarks.md "adaptive")'
            )
        for name in ("first_wave", "wave"):
            positive_int(f"Adaptive.{name}", getattr(self, name))
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
            raise ConfigurationError(
                f"Adaptive.confidence must be a number strictly between 0 and 1 "
                f"(e.g. 0.9), got {c!r}"
            )
        z = self.zone
        if z is not None and (isinstance(z, bool) or not isinstance(z, (int, float)) or z <= 0):
            raise ConfigurationError(
                f"Adaptive.zone must be a number above 0 (e.g. {ZONE}) or None, got {z!r}"
            )
        if self.top_k is not None and (
            isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1
        ):
            raise ConfigurationError(
                f"Adaptive.top_k must be an int >= 1 or None, got {self.top_k!r}"
            )

    @classmethod
    def parse(cls, text: str) -> Adaptive:
        """From the command line: ``on`` (the defaults) or
        ``FIRST,WAVE[,TOP_K[,CONFIDENCE[,ZONE]]]`` (an empty or ``all`` TOP_K: the whole order;
        an empty ZONE: :data:`ZONE`; ``off``: None, the sign test alone).

        >>> Adaptive.parse("4,2,5")
        Adaptive(first_wave=4, wave=2, top_k=5, confidence=0.9, zone=0.5)
        >>> Adaptive.parse("4,4,all,0.95").confidence
        0.95
        >>> Adaptive.parse("4,4,all,0.9,off").zone is None
        True
        """
        if not text.strip():  # an empty flag or field is no answer, not "on"
            raise ConfigurationError(
                "adaptive is empty: give 'on' (the default waves) or FIRST,WAVE[,TOP_K"
                "[,CONFIDENCE[,ZONE]]] (e.g. 4,4 or 4,4,10 or 4,4,all,0.95 or 4,4,all,0.9,off); "
                "leave it out (None or False) for a fixed m"
            )
        if text.strip().lower() in ("on", "yes", "true"):
            return cls()
        parts = [part.strip() for part in text.split(",")]
        try:
            if not 2 <= len(parts) <= 5:
                raise ValueError
            first, wave = int(parts[0]), int(parts[1])
            top, level, zone = (parts[2:] + ["", "", ""])[:3]
            top_k = None if top.lower() in ("", "all") else int(top)
            confidence = float(level) if level else CONFIDENCE
            width = None if zone.lower() in ("off", "none") else float(zone) if zone else ZONE
        except ValueError:
            raise ConfigurationError(
                "adaptive must be 'on' or FIRST,WAVE[,TOP_K[,CONFIDENCE[,ZONE]]] "
                f"(e.g. 4,4 or 4,4,10 or 4,4,all,0.95 or 4,4,all,0.9,off), got {text!r}"
            ) from None
        return cls(first, wave, top_k, confidence, zone=width)

    def pairs(self, order: Sequence[int]) -> list[tuple[int, int]]:
        """The adjacent pairs of ``order`` that must be established: those inside its top
        ``top_k`` and the one across the cut (all of them when ``top_k`` is None).

        >>> Adaptive(top_k=2).pairs([3, 1, 0, 2])
        [(3, 1), (1, 0)]
        """
        end = len(order) - 1 if self.top_k is None else min(self.top_k, len(order) - 1)
        return [(order[i], order[i + 1]) for i in range(end)]

    def confident(self, p_values: Sequence[float]) -> bool:
        """Whether every pair's one-sided p-value rejects "no real preference" at the family
        level ``1 - confidence`` (Holm's step-down: the j-th smallest of h p-values must be at
        most ``(1 - confidence) / (h - j + 1)``). No pairs: nothing to establish.

        >>> Adaptive(confidence=0.9).confident([0.01, 0.04])  # 0.01 <= 0.05, 0.04 <= 0.1
        True
        >>> Adaptive(confidence=0.9).confident([0.06, 0.06])
        False
        """
        alpha, h = 1.0 - self.confidence + 1e-12, len(p_values)  # 1 - 0.9 < 0.1 in floats
        return all(p <= alpha / (h - j) for j, p in enumerate(sorted(p_values)))

    def stable(
        self,
        rankings: Sequence[Ranking] | Sequence[Sequence[Ranking]],
        *,
        n_items: int,
        aggregator: str | Aggregator,
        grouped: bool = False,
        probabilities: Sequence[object] | None = None,
        shown: Sequence[Ranking] | Sequence[Sequence[Ranking]] | None = None,
    ) -> bool:
        """True when the samples establish the consensus (see the module docstring and
        :meth:`reason`, which says by which rule)."""
        return (
            self.reason(
                rankings,
                n_items=n_items,
                aggregator=aggregator,
                grouped=grouped,
                probabilities=probabilities,
                shown=shown,
            )
            is not None
        )

    def reason(
        self,
        rankings: Sequence[Ranking] | Sequence[Sequence[Ranking]],
        *,
        n_items: int,
        aggregator: str | Aggregator,
        grouped: bool = False,
        probabilities: Sequence[object] | None = None,
        shown: Sequence[Ranking] | Sequence[Sequence[Ranking]] | None = None,
    ) -> StableReason | None:
        """Which rule establishes the consensus: ``"stable"`` (the sign test, or a blocks
        round's stable head), ``"zone"`` (the list model's zone, the consensus steady over
        the last wave), or None (go on).

        ``grouped``: ``rankings`` is a list of groups, the blocks of one shuffle. Where a
        shuffle holds several blocks (a blocks round), the pairs of its head seldom share a
        block, so the sign test would wait for the cap: the round stops instead once its head
        is stable, when leaving out any one shuffle changes the head's members by none and its
        order by at most a tenth of its pairs (the rule before issue 25). ``probabilities``:
        shaped as ``rankings``, for an aggregator that reads first-token probabilities (the
        sign test itself reads the samples' orders). ``shown``: shaped as ``rankings``, the
        order each sample was shown (the zone rule needs it; without it, the sign test only)."""
        groups: list[list[Ranking]] = _as_groups(rankings, grouped)
        probs = None if probabilities is None else _as_groups(probabilities, grouped)
        flat = [r for g in groups for r in g]
        if not flat:
            return None
        order = _consensus(groups, probs, range(len(groups)), n_items, aggregator)
        if any(len(g) > 1 for g in groups):
            head = self._head_stable(groups, probs, order, n_items, aggregator)
            return "stable" if head else None
        if self.confident(sign_test(flat, self.pairs(order), n_items)):
            return "stable"
        if shown is None or self.zone is None:
            return None
        shown_groups: list[list[Ranking]] = _as_groups(shown, grouped)
        seen = [p for g in shown_groups for p in g]
        steady = self._steady(groups, probs, order, n_items, aggregator)
        return "zone" if steady and self._in_zone(flat, seen, n_items, self.zone) else None

    def _steady(
        self,
        groups: list[list[Ranking]],
        probs: list[list[object]] | None,
        order: list[int],
        n_items: int,
        aggregator: str | Aggregator,
    ) -> bool:
        """Whether the part of ``order`` that matters was already the consensus before the
        last wave: the same members, and a Kendall tau of at least :data:`STEADY` (at most
        a share ``(1 - STEADY) / 2`` of its pairs swapped)."""
        earlier = range(len(groups) - self.wave)
        head = order[: self.top_k]
        return _holds(groups, probs, earlier, head, n_items, aggregator, (1 - STEADY) / 2)

    def _in_zone(
        self, rankings: list[Ranking], shown: list[Ranking], n_items: int, zone: float
    ) -> bool:
        """Whether the list model fitted to the answers settles every pair that matters up
        to the indifference zone (:func:`~permsc_integrations.strategies._frontier.unsettled`)."""
        # lazy: numpy, adaptive m's zone rule only
        from permsc_integrations.strategies._frontier.model import Answer, fit_list
        from permsc_integrations.strategies._frontier.stopping import unsettled

        answers = [Answer(tuple(p), tuple(r)) for p, r in zip(shown, rankings, strict=True) if r]
        fit = fit_list(n_items, answers)
        return not unsettled(fit, top_k=self.top_k, zone=zone, confidence=self.confidence)

    def _head_stable(
        self,
        groups: list[list[Ranking]],
        probs: list[list[object]] | None,
        order: list[int],
        n_items: int,
        aggregator: str | Aggregator,
    ) -> bool:
        head = order[: self.top_k]
        every = range(len(groups))
        return len(groups) > 1 and all(
            _holds(groups, probs, [j for j in every if j != k], head, n_items, aggregator, 0.1)
            for k in every
        )


def _holds(
    groups: list[list[Ranking]],
    probs: list[list[object]] | None,
    keep: Iterable[int],
    head: list[int],
    n_items: int,
    aggregator: str | Aggregator,
    share: float,
) -> bool:
    """Whether the consensus of the groups in ``keep`` has ``head``'s members at its top and
    swaps at most ``share`` of their pairs (False when those groups hold no sample)."""
    # lazy: start-up time (numpy); only adaptive m needs it
    from permsc_integrations.metrics import kendall_distance

    keep = list(keep)
    if not any(groups[j] for j in keep):
        return False
    other = _consensus(groups, probs, keep, n_items, aggregator)[: len(head)]
    pairs = len(head) * (len(head) - 1) // 2
    return set(other) == set(head) and kendall_distance(other, head) <= share * pairs


def _as_groups(values: Sequence[_T] | Sequence[Sequence[_T]], grouped: bool) -> list[list[_T]]:
    """``values`` as groups: as given (``grouped``: a list of groups) or one value a group."""
    if grouped:
        return [list(g) for g in cast("Sequence[Sequence[_T]]", values)]
    return [[v] for v in cast("Sequence[_T]", values)]


def _consensus(
    groups: list[list[Ranking]],
    probs: list[list[object]] | None,
    keep: Iterable[int],
    n_items: int,
    aggregator: str | Aggregator,
) -> list[int]:
    """The aggregator's consensus of the groups in ``keep`` (with their probabilities)."""
    keep = list(keep)
    flat = [r for j in keep for r in groups[j]]
    extra = {} if probs is None else {"probabilities": [p for j in keep for p in probs[j]]}
    return list(aggregate(flat, method=aggregator, n_items=n_items, **extra))


def sign_test(
    rankings: Sequence[Sequence[int]], pairs: Sequence[tuple[int, int]], n_items: int
) -> list[float]:
    """For each pair ``(a, b)``, the one-sided sign test's p-value that the rankings put ``a``
    before ``b`` more often than chance would: ``P(X >= wins)`` for ``X ~ Binomial(met, 1/2)``,
    counting only the rankings that list both (a pair that never met: 1.0).

    >>> sign_test([[0, 1, 2]] * 5 + [[1, 0]], [(0, 1), (1, 2)], 3)  # 5 of 6, 5 of 5
    [0.109375, 0.03125]
    """
    # lazy: start-up time (numpy); only adaptive m needs it
    from permsc_integrations.aggregators import pairwise_counts

    wins = pairwise_counts(rankings, n_items)
    out = []
    for a, b in pairs:
        won, met = int(wins[a, b]), int(wins[a, b] + wins[b, a])
        out.append(sum(math.comb(met, k) for k in range(won, met + 1)) / 2**met)
    return out


def waves(policy: Adaptive | None, cap: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` sample ranges, first wave first, up to ``cap`` (one range if fixed).

    >>> list(waves(Adaptive(first_wave=4, wave=3), 10))
    [(0, 4), (4, 7), (7, 10)]
    >>> list(waves(None, 10))
    [(0, 10)]
    """
    if policy is None:
        yield 0, cap
        return
    start, end = 0, min(policy.first_wave, cap)
    while start < cap:
        yield start, end
        start, end = end, min(end + policy.wave, cap)
