"""Position-bias analysis: how often the output reverses the items at input positions i < j.

Each observation is one model answer to a shuffled prompt: the permutation shown
(``permutation[p]`` is the item at prompt position ``p``) and the answer mapped back to
original items, best first. For every pair of prompt positions ``i < j`` whose items both
appear in the answer, the pair is *reversed* when the item shown later is ranked first.

Normalisation: each cell is the reversal count divided by the number of answers in which
both items of that cell appear, a rate in [0, 1]. Because the inputs are shuffled
uniformly, the true order of a cell's two items is a coin flip, so a position-blind model
scores 0.5 in every cell (only noise around it); a model that echoes its input scores 0,
and a model that pushes one prompt position up or down lights up that position's row or
column. With ``reference="truth"`` a cell is instead the rate of answers that put that
pair against the true order (an error rate; pairs tied in the truth are skipped), which
for a position-blind model is flat across cells.

Example:
    >>> echo = [((2, 0, 1), (2, 0, 1)), ((1, 2, 0), (1, 2, 0))]
    >>> bias_map(echo, 3).rate[0][1]
    0.0
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from permsc_integrations.errors import ConfigurationError, MissingDependencyError
from permsc_integrations.eval._datasets import _Ordered
from permsc_integrations.permutations import invert

__all__ = ["BiasMap", "bias_map", "Observation"]

Observation = (
    tuple[Sequence[int], Sequence[int]] | tuple[Sequence[int], Sequence[int], Sequence[_Ordered]]
)
"""``(permutation, ranking)`` or ``(permutation, ranking, truth_keys)`` (keys: smaller first)."""


@dataclass(frozen=True, slots=True)
class BiasMap:
    """Reversal counts per pair of prompt positions; ``rate[i][j]`` is NaN for ``i >= j``."""

    reversed: tuple[tuple[int, ...], ...]
    observed: tuple[tuple[int, ...], ...]
    reference: str = "input"

    @property
    def size(self) -> int:
        return len(self.observed)

    @property
    def rate(self) -> tuple[tuple[float, ...], ...]:
        return tuple(
            tuple(
                r / o if o and i < j else math.nan
                for j, (r, o) in enumerate(zip(rr, oo, strict=True))
            )
            for i, (rr, oo) in enumerate(zip(self.reversed, self.observed, strict=True))
        )

    def mean_rate(self) -> float:
        """Reversals over observations, pooled over every cell."""
        total = sum(map(sum, self.observed))
        return sum(map(sum, self.reversed)) / total if total else math.nan

    def position_rate(self, position: int) -> float:
        """Pooled rate over the cells that involve ``position`` (its row and its column)."""
        cells = [(min(position, k), max(position, k)) for k in range(self.size) if k != position]
        observed = sum(self.observed[i][j] for i, j in cells)
        return sum(self.reversed[i][j] for i, j in cells) / observed if observed else math.nan

    def to_csv(self, path: str | Path) -> None:
        """Write ``i,j,reversed,observed,rate`` rows for every pair ``i < j``."""
        with Path(path).open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["i", "j", "reversed", "observed", "rate"])
            for i in range(self.size):
                for j in range(i + 1, self.size):
                    rate = self.rate[i][j]
                    writer.writerow(
                        [
                            i + 1,
                            j + 1,
                            self.reversed[i][j],
                            self.observed[i][j],
                            "" if math.isnan(rate) else f"{rate:.4f}",
                        ]
                    )

    def to_png(self, path: str | Path, *, title: str = "") -> None:
        """Save the rates as a heatmap (matplotlib, Agg backend; 1-based positions)."""
        try:
            # lazy: optional dependency (matplotlib, the eval extra)
            import matplotlib

            matplotlib.use("Agg")
            # lazy: optional dependency (matplotlib, the eval extra)
            import matplotlib.pyplot as plt
        except ImportError:
            raise MissingDependencyError("matplotlib", "eval", purpose="bias heatmaps") from None
        fig, ax = plt.subplots(figsize=(5.2, 4.4))
        try:
            ticks = list(range(self.size))
            image = ax.imshow(self.rate, cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_xticks(ticks, [str(t + 1) for t in ticks])
            ax.set_yticks(ticks, [str(t + 1) for t in ticks])
            ax.set_xlabel("later prompt position j")
            ax.set_ylabel("earlier prompt position i")
            label = (
                "rate the pair is put against the truth"
                if self.reference == "truth"
                else "reversal rate"
            )
            fig.colorbar(image, ax=ax, label=label)
            ax.set_title(title or f"position bias ({self.reference}), mean {self.mean_rate():.2f}")
            fig.tight_layout()
            fig.savefig(path, dpi=110)
        finally:
            plt.close(fig)


def _truth_sign(keys: Sequence[_Ordered] | None, a: int, b: int) -> int:
    """+1 when item ``a`` truly goes before ``b``, -1 after, 0 tied (or no truth)."""
    if keys is None:
        return 1
    ka, kb = keys[a], keys[b]
    return (ka < kb) - (ka > kb)


def bias_map(
    observations: Iterable[Observation], n_positions: int, *, reference: str = "input"
) -> BiasMap:
    """Count reversals per pair of prompt positions over every observation.

    ``reference="input"`` counts the item shown later being ranked first; ``"truth"``
    counts the pair ranked against the true order (observations then need truth keys).
    Answers of another length than ``n_positions`` are an error; partial answers count
    only the pairs they rank.
    """
    if reference not in ("input", "truth"):
        raise ConfigurationError(f"reference must be 'input' or 'truth', got {reference!r}")
    reversed_ = [[0] * n_positions for _ in range(n_positions)]
    observed = [[0] * n_positions for _ in range(n_positions)]
    for observation in observations:
        permutation, ranking = observation[0], observation[1]
        keys = observation[2] if len(observation) == 3 else None
        if reference == "truth" and keys is None:
            raise ConfigurationError(
                "reference='truth' needs (permutation, ranking, keys) observations"
            )
        if len(permutation) != n_positions:
            raise ConfigurationError(
                f"an observation shows {len(permutation)} items; the map has "
                f"{n_positions} positions"
            )
        _count(
            tuple(permutation), ranking, keys if reference == "truth" else None, reversed_, observed
        )
    return BiasMap(tuple(map(tuple, reversed_)), tuple(map(tuple, observed)), reference)


def _count(
    permutation: tuple[int, ...],
    ranking: Sequence[int],
    keys: Sequence[_Ordered] | None,
    reversed_: list[list[int]],
    observed: list[list[int]],
) -> None:
    place = {item: rank for rank, item in enumerate(ranking)}
    position_of = invert(permutation)
    ranked = [item for item in permutation if item in place]
    for x, a in enumerate(ranked):
        for b in ranked[x + 1 :]:
            sign = _truth_sign(keys, a, b)
            if sign == 0:
                continue
            i, j = position_of[a], position_of[b]  # i < j: a was shown first
            observed[i][j] += 1
            a_first = place[a] < place[b]
            reversed_[i][j] += int(a_first != (sign > 0))
