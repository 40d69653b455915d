"""Stopping local answers that have fallen into a loop.

A small model sorting words at temperature 0 sometimes starts repeating itself
("nonvitreous\\nnonvitreous\\n..." or the same five lines over and over) until the token cap.
In a batch every row then decodes to the cap, so one looping answer makes the whole window
wait. A row is stopped once its last 32 tokens or more are one period repeated (see
:func:`repeats_itself`): what follows almost always repeats what the answer already said.
Replayed on the 1,300 saved WordSort answers of the 1.5B model (``benchmarks/loop_stop.py``,
docs/benchmarks.md "loop-stop"): 142 answers are cut, no parsed ranking changes, and the
batches decode 41 % fewer steps. A shorter span (24 tokens) cut two answers that recovered
after repeating a word six times, so it is not used.

Example:
    >>> repeats_itself([5, 9] + [7] * 32)
    True
    >>> repeats_itself([1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6])  # once over: not yet a loop
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # optional dependency (the local extra), imported where used
    from torch import Tensor

__all__ = ["LoopStop", "repeats_itself"]

MAX_PERIOD = 48
MIN_SPAN = 32


def repeats_itself(
    ids: Sequence[int], *, max_period: int = MAX_PERIOD, min_span: int = MIN_SPAN
) -> bool:
    """Whether ``ids`` end in a loop: a period of at most ``max_period`` tokens that fills the
    last ``max(2 * period, min_span)`` tokens (a one-token period must repeat ``min_span``
    times; a period of 16 tokens or more, twice)."""
    n = len(ids)
    for period in range(1, max_period + 1):
        span = max(2 * period, min_span)
        if span > n:
            return False
        start = n - span
        if all(ids[i] == ids[i + period] for i in range(start, n - period)):
            return True
    return False


class LoopStop:
    """A per-row stopping criterion for ``transformers`` ``generate`` (greedy decoding).

    ``width`` is the prompt's padded length and ``eos`` the end-of-answer ids (a row that has
    ended is left alone). ``cut`` maps each row stopped here to the number of tokens it had
    generated then.
    """

    def __init__(self, torch: ModuleType, width: int, eos: Sequence[int]) -> None:
        self._torch = torch
        self.width = width
        self.eos = frozenset(eos)
        self.cut: dict[int, int] = {}

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: object) -> Tensor:
        rows = input_ids[:, self.width :].tolist()
        for index, row in enumerate(rows):
            if index not in self.cut and self.eos.isdisjoint(row) and repeats_itself(row):
                self.cut[index] = len(row)
        done = [index in self.cut for index in range(len(rows))]
        return self._torch.tensor(done, dtype=self._torch.bool, device=input_ids.device)
