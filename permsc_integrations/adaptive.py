"""Adaptive m: sample a window in waves and stop once its consensus is settled.

PSC's cost is m calls per window. When the model agrees with itself the consensus is settled
after a few samples; when it does not, more samples help. :class:`Adaptive` draws a first wave,
then further waves, up to ``num_permutations`` (the cap), and stops as soon as the consensus is
*stable*: leaving out any one sample (leave-one-out) changes it by at most ``tolerance`` (the
share of item pairs put in the other order), on the whole order or on its top ``top_k``. The
waves take the same seeded permutation sequence as a fixed-m run, in order, so a stopped run is
a prefix of the full one. The default tolerance, 0.1, was chosen on a 1.5B model's WordSort
samples: about 8 calls instead of 20 at the same Kendall tau; an exact match (0) keeps
drawing samples for a model that is noisy at all (docs/reproduction.md).

Example:
    >>> policy = Adaptive(first_wave=3, wave=2, tolerance=0.0)
    >>> policy.stable([[0, 1, 2]] * 3, n_items=3, aggregator="borda")
    True
    >>> policy.stable([[0, 1, 2], [1, 0, 2], [1, 0, 2]], n_items=3, aggregator="borda")
    False
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .aggregators import aggregate
from .checks import positive_int
from .errors import ConfigurationError

__all__ = ["Adaptive", "waves"]


@dataclass(frozen=True, slots=True)
class Adaptive:
    """When to stop sampling a window (see the module docstring).

    ``first_wave`` samples come first, then ``wave`` more at a time; ``top_k`` (None: the
    whole order) is what must not change when any one sample is left out; at least
    ``first_wave`` samples are always drawn, and never more than the ranker's
    ``num_permutations``.
    """

    first_wave: int = 4
    wave: int = 4
    top_k: int | None = None
    tolerance: float = 0.1

    def __post_init__(self) -> None:
        for name in ("first_wave", "wave"):
            positive_int(f"Adaptive.{name}", getattr(self, name))
        if not isinstance(self.tolerance, (int, float)) or not 0 <= self.tolerance < 1:
            raise ConfigurationError(
                f"Adaptive.tolerance must be in [0, 1), got {self.tolerance!r}"
            )
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ConfigurationError(
                f"Adaptive.top_k must be an int >= 1 or None, got {self.top_k!r}"
            )

    @classmethod
    def parse(cls, text: str) -> Adaptive:
        """From the command line: ``on`` (the defaults) or ``FIRST,WAVE[,TOP_K]``.

        >>> Adaptive.parse("4,2,5")
        Adaptive(first_wave=4, wave=2, top_k=5, tolerance=0.1)
        """
        if text.strip().lower() in ("on", "yes", "true", ""):
            return cls()
        try:
            numbers = [int(part) for part in text.split(",")]
        except ValueError:
            raise ConfigurationError(
                f"adaptive must be 'on' or FIRST,WAVE[,TOP_K] (e.g. 4,4 or 4,4,10), got {text!r}"
            ) from None
        return cls(*numbers)

    def _target(self, order: Sequence[int]) -> tuple[int, ...]:
        return tuple(order if self.top_k is None else order[: self.top_k])

    def stable(
        self,
        rankings: Sequence[Any],
        *,
        n_items: int,
        aggregator: Any,
        grouped: bool = False,
        probabilities: Sequence[Any] | None = None,
    ) -> bool:
        """True when every leave-one-out consensus is within ``tolerance`` of the consensus.

        ``grouped``: ``rankings`` is a list of groups (the blocks of one shuffle), left out a
        group at a time. ``probabilities``: shaped as ``rankings``, for an aggregator that
        reads first-token probabilities."""

        groups = list(rankings) if grouped else [[r] for r in rankings]
        if len(groups) < 2:
            return False
        probs = None
        if probabilities is not None:
            probs = list(probabilities) if grouped else [[p] for p in probabilities]

        def consensus(keep: list[int]) -> tuple[int, ...]:
            flat = [r for j in keep for r in groups[j]]
            extra = {} if probs is None else {"probabilities": [p for j in keep for p in probs[j]]}
            return self._target(aggregate(flat, method=aggregator, n_items=n_items, **extra))

        target = consensus(list(range(len(groups))))
        for k in range(len(groups)):
            rest = [j for j in range(len(groups)) if j != k]
            if not any(groups[j] for j in rest):
                return False
            other = consensus(rest)
            if self._distance(other, target) > self.tolerance:
                return False
        return True

    def _distance(self, a: tuple[int, ...], b: tuple[int, ...]) -> float:
        """The share of pairs ordered differently (a top-k that differs in its members: 1)."""
        # lazy: start-up time (numpy); only adaptive m needs it
        from .metrics import kendall_distance

        if set(a) != set(b):
            return 1.0
        pairs = len(a) * (len(a) - 1) // 2
        return kendall_distance(a, b) / pairs if pairs else 0.0


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
