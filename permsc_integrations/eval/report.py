"""The result of one evaluation: single-pass runs vs aggregated methods, per list.

Example:
    >>> r = EvalReport("demo", "tau", singles=((0.5, 0.1), (0.3, 0.3)),
    ...                methods={"kemeny": (0.6, 0.4)})
    >>> round(r.single_median, 2), round(r.single_max, 2), round(r.mean("kemeny"), 2)
    (0.3, 0.3, 0.5)
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["EvalReport", "paired_wilcoxon", "bootstrap_ci"]


def paired_wilcoxon(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value for paired scores (1.0 when all pairs are equal).

    >>> paired_wilcoxon([0.1, 0.2], [0.1, 0.2])
    1.0
    """
    differences = [y - x for x, y in zip(a, b, strict=True)]
    if len(differences) < 2 or all(abs(d) < 1e-12 for d in differences):
        return 1.0
    # lazy: optional dependency (scipy, the eval extra)
    from scipy.stats import wilcoxon

    return float(wilcoxon(differences, zero_method="wilcox").pvalue)


def bootstrap_ci(
    scores: Sequence[float], *, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``scores`` (seeded: reproducible).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    if not scores:
        return math.nan, math.nan
    rng = random.Random(seed)
    n = len(scores)
    means = sorted(statistics.fmean(rng.choices(scores, k=n)) for _ in range(resamples))
    cut = (1.0 - level) / 2
    return means[int(cut * (resamples - 1))], means[int((1.0 - cut) * (resamples - 1))]


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Scores of ``m`` single-pass runs and of each method, per list (query).

    ``singles[k][q]`` is run ``k``'s score on list ``q``; ``methods[name][q]`` a method's
    score; ``sweep[m][name]`` the mean score of a method using only the first ``m`` samples.
    """

    task: str
    metric: str
    singles: tuple[tuple[float, ...], ...]
    methods: Mapping[str, tuple[float, ...]]
    sweep: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    config: Mapping[str, object] = field(default_factory=dict)
    stats: Mapping[str, object] = field(default_factory=dict)

    @property
    def n_lists(self) -> int:
        return len(self.singles[0]) if self.singles else len(next(iter(self.methods.values()), ()))

    @property
    def single_means(self) -> tuple[float, ...]:
        """Each single run's mean score over the lists."""
        return tuple(statistics.fmean(run) for run in self.singles)

    @property
    def single_median(self) -> float:
        return statistics.median(self.single_means) if self.singles else math.nan

    @property
    def single_max(self) -> float:
        return max(self.single_means) if self.singles else math.nan

    @property
    def single_per_list(self) -> tuple[float, ...]:
        """Per list, the mean score of the single runs (the expected single-pass score)."""
        return tuple(statistics.fmean(scores) for scores in zip(*self.singles, strict=True))

    def mean(self, method: str) -> float:
        return statistics.fmean(self.methods[method])

    def p_value(self, method: str) -> float:
        """Wilcoxon signed-rank p-value, per list: mean single run vs ``method``."""
        return (
            paired_wilcoxon(self.single_per_list, self.methods[method])
            if self.singles
            else math.nan
        )

    @property
    def best_single(self) -> tuple[float, ...]:
        """Per list, the scores of the single run with the best mean (the best single run)."""
        best = max(range(len(self.singles)), key=lambda k: self.single_means[k])
        return self.singles[best]

    def p_value_vs_best(self, method: str) -> float:
        """Wilcoxon signed-rank p-value, per list: the best single run vs ``method``."""
        return paired_wilcoxon(self.best_single, self.methods[method]) if self.singles else math.nan

    def ci(self, method: str, *, level: float = 0.95, resamples: int = 2000) -> tuple[float, float]:
        """A percentile bootstrap confidence interval of ``method``'s mean over the lists."""
        return bootstrap_ci(self.methods[method], level=level, resamples=resamples)

    def to_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "metric": self.metric,
            "n_lists": self.n_lists,
            "config": dict(self.config),
            "stats": dict(self.stats),
            "single": {
                "runs": list(self.single_means),
                "median": self.single_median,
                "max": self.single_max,
                "per_list_mean": list(self.single_per_list),
            },
            "methods": {
                name: {
                    "mean": self.mean(name),
                    "ci95": list(self.ci(name)),
                    "p_value_vs_single": self.p_value(name),
                    "p_value_vs_best_single": self.p_value_vs_best(name),
                    "per_list": list(scores),
                }
                for name, scores in self.methods.items()
            },
            "sweep": {str(m): dict(row) for m, row in self.sweep.items()},
        }

    def to_markdown(self, *, scale: float = 1.0, digits: int = 3) -> str:
        """A table: single median/max, then each method with its gain and p-value."""
        fmt = f"{{:.{digits}f}}"
        lines = [
            f"**{self.task}**: {self.metric}, {self.n_lists} lists, "
            f"{len(self.singles)} single runs",
            "",
            "| method | score | 95% CI | vs single median | p vs mean single | p vs best single |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        if self.singles:
            lines.append(
                f"| single (median of runs) | {fmt.format(self.single_median * scale)} | | | | |"
            )
            lines.append(
                f"| single (max of runs) | {fmt.format(self.single_max * scale)} | | | | |"
            )
        for name in self.methods:
            score = self.mean(name)
            gain = (score - self.single_median) * scale if self.singles else math.nan
            low, high = self.ci(name)
            cells = [
                fmt.format(score * scale),
                f"{fmt.format(low * scale)}..{fmt.format(high * scale)}",
                f"{gain:+.{digits}f}",
                f"{self.p_value(name):.3g}",
                f"{self.p_value_vs_best(name):.3g}",
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if self.sweep:
            names = list(next(iter(self.sweep.values())))
            lines += ["", "| m | " + " | ".join(names) + " |", "| ---: |" + " ---: |" * len(names)]
            for m, row in self.sweep.items():
                lines.append(
                    f"| {m} | " + " | ".join(fmt.format(row[n] * scale) for n in names) + " |"
                )
        return "\n".join(lines) + "\n"
