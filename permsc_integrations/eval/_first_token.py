"""Scoring first-token samples files: single pass, calibration, PSC and first-stage fusion.

A first-token samples file (``permsc eval ... --scoring first_token --samples F``) holds, per
list, its orders one after another: each order is the list (passages: the first order is the
first-stage order, then seeded shuffles) cut into blocks of at most ``window`` items, one
saved sample a block with its label probabilities; and the position prior of each block size
from content-free items (:mod:`permsc_integrations._run.calibration`). Everything below is computed
from the file, without the model:

- ``first stage``: the retriever's order (passages), and ``random order``: the mean over
  seeded random orders of the list (passages: the chance level, no model);
- ``single pass``: the first order's probabilities (passages: shown in first-stage order;
  sorting lists: the mean over the orders of each order alone), and ``calibrated``: divided by
  the prior of its block size;
- ``PSC m=M <aggregator>``: the first M shuffles aggregated (``mean_probability``,
  ``mean_log_probability`` or a rank aggregator on the samples' orders), and the calibrated
  mean probability;
- ``... + first stage (LOO w)``: fused with the first-stage order
  (:func:`~permsc_integrations.aggregators.fuse_first_stage`), its weight chosen for each query
  on the other queries (leave-one-out over a grid), so the weight never sees the query scored.

Each row gives the mean metric, Wilcoxon p against the first stage and against the single pass,
and the cost per list (prompts, prompt and output tokens, model seconds) where recorded.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from permsc_integrations._run.calibration import PositionPrior
from permsc_integrations.aggregators import (
    aggregate,
    fuse_first_stage,
    reads_probabilities,
    resolve,
)
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.eval._report import paired_wilcoxon
from permsc_integrations.eval._samples import ListSamples
from permsc_integrations.permutations import cut_blocks

__all__ = ["FirstTokenTable", "score_first_token", "WEIGHTS"]

WEIGHTS = tuple(round(0.1 * k, 1) for k in range(11))
"""The first-stage weights the leave-one-out choice tries."""

RANDOM_ORDERS = 200
"""Seeded random orders a list's chance level is the mean of."""

Metric = Callable[[Sequence[int], ListSamples], float]
Order = list[tuple[tuple[int, ...], tuple[float, ...]]]  # one order: (block, probabilities)...


@dataclass(frozen=True)
class FirstTokenTable:
    """Per-list scores of every row, with the two baselines' names and the costs."""

    metric: str
    rows: dict[str, tuple[float, ...]]
    costs: dict[str, dict[str, float]]
    first_stage: str | None
    single: str
    config: dict[str, object]

    def to_markdown(self, scale: float = 1.0, digits: int = 2) -> str:
        base = [b for b in (self.first_stage, self.single) if b]
        head = " | ".join(f"p vs {b}" for b in base)
        lines = [
            f"**{self.config.get('dataset', '')}** first-token, {self.metric}, "
            f"{len(next(iter(self.rows.values())))} lists, "
            f"{self.config.get('orders')} shuffled orders each at most",
            "",
            f"| method | {self.metric} | {head} | prompts | prompt tokens | output tokens | "
            "model s |",
            "| --- | ---: |" + " ---: |" * len(base) + " ---: | ---: | ---: | ---: |",
        ]
        for name, scores in self.rows.items():
            ps = " | ".join(
                "" if name == b else f"{paired_wilcoxon(self.rows[b], scores):.3g}" for b in base
            )
            cost = self.costs.get(name, {})
            spent = " | ".join(
                f"{cost[k]:.{d}f}" if k in cost else ""
                for k, d in (("prompts", 0), ("prompt_tokens", 0), ("output_tokens", 0), ("s", 1))
            )
            mean = statistics.fmean(scores) * scale
            lines.append(f"| {name} | {mean:.{digits}f} | {ps} | {spent} |")
        top = self.config.get("top_label")
        if isinstance(top, tuple) and top:
            label, share, window = top
            lines += [
                "",
                f"Most probable label of the shuffled samples: {label} in {100 * share:.1f} % of "
                f"them (an answer that follows the items, not the positions: about "
                f"{100 / window:.0f} %).",
            ]
        weights = self.config.get("first_stage_weights") or {}
        if isinstance(weights, dict) and weights:
            best = ", ".join(f"{k}: {w:g}" for k, w in weights.items())
            lines += [
                "",
                f"First-stage weight best on all lists (LOO rows choose per list): {best}",
            ]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "config": self.config,
            "rows": {k: list(v) for k, v in self.rows.items()},
            "means": {k: statistics.fmean(v) for k, v in self.rows.items()},
            "costs": self.costs,
        }


def _orders(lists: ListSamples, window: int) -> list[Order]:
    """The list's orders, each a list of (block, probabilities) in caller's indices."""
    if not lists.probabilities:
        raise ConfigurationError(f"list {lists.example.id} has no first-token probabilities")
    per = len(cut_blocks(range(len(lists.example.items)), window))
    pairs = list(zip(lists.permutations, lists.probabilities, strict=True))
    return [pairs[k : k + per] for k in range(0, len(pairs) - per + 1, per)]


def _by_probability(order: Order, n: int, priors: Mapping[int, PositionPrior] | None) -> list[int]:
    """One order's ranking: every item by its (calibrated) probability; ties: earlier item."""
    score = dict.fromkeys(range(n), -1.0)
    for block, probs in order:
        if not probs:  # a failed sample
            continue
        if priors is not None:
            probs = priors[len(block)].correct(probs)
        score.update(zip(block, probs, strict=True))
    return sorted(range(n), key=lambda i: (-score[i], i))


def _chance(n: int, lists: ListSamples, metric: Metric) -> float:
    """The list's mean metric over :data:`RANDOM_ORDERS` random orders (seeded by its id)."""
    rng = random.Random(f"chance:{lists.example.id}")
    return statistics.fmean(metric(rng.sample(range(n), n), lists) for _ in range(RANDOM_ORDERS))


def _ranked(block: Sequence[int], probs: Sequence[float]) -> list[int]:
    """A block's items by probability; ties: the earlier prompt position."""
    return [block[j] for j in sorted(range(len(block)), key=lambda j: -probs[j])]


def _psc(
    orders: Sequence[Order],
    n: int,
    method: str,
    priors: Mapping[int, PositionPrior] | None = None,
) -> list[int]:
    blocks = [(b, priors[len(b)].correct(p) if priors else p) for o in orders for b, p in o if p]
    rankings = [_ranked(b, p) for b, p in blocks]
    extra: dict[str, object] = {}
    if reads_probabilities(resolve(method)):
        extra["probabilities"] = [dict(zip(b, p, strict=True)) for b, p in blocks]
    return aggregate(rankings, method=method, n_items=n, **extra)


def _loo_fused(
    orders: Sequence[Sequence[int]], lists: Sequence[ListSamples], metric: Metric
) -> tuple[tuple[float, ...], float]:
    """Each list's score fused with the first stage at the weight that is best on the other
    lists; and the weight that is best on all of them."""
    table = [
        [metric(fuse_first_stage(o, w), s) for w in WEIGHTS]
        for o, s in zip(orders, lists, strict=True)
    ]
    totals = [sum(row[k] for row in table) for k in range(len(WEIGHTS))]
    scores = []
    for row in table:
        held = [totals[k] - row[k] for k in range(len(WEIGHTS))]
        scores.append(row[max(range(len(WEIGHTS)), key=lambda k: (held[k], -k))])
    return tuple(scores), WEIGHTS[max(range(len(WEIGHTS)), key=lambda k: (totals[k], -k))]


def _cost(lists: Sequence[ListSamples], window: int, orders: int) -> dict[str, float]:
    """Mean cost per list of ``orders`` orders, from the samples that recorded their usage."""
    used = [u for s in lists for u in s.usages if u]
    if not used:
        return {}
    n = len(lists[0].example.items)
    prompts = orders * len(cut_blocks(range(n), window))
    mean = {k: statistics.fmean(float(u.get(k, 0)) for u in used) for k in used[0]}
    return {
        "prompts": prompts,
        "prompt_tokens": prompts * mean.get("prompt_tokens", 0.0),
        "output_tokens": prompts * max(1.0, mean.get("completion_tokens", 1.0)),
        "s": prompts * mean.get("latency_s", 0.0),
    }


def score_first_token(
    lists: Sequence[ListSamples],
    metric: Metric,
    *,
    metric_name: str,
    priors: Mapping[int, Sequence[float]],
    window: int,
    passages: bool,
    m_values: Sequence[int] = (1, 5, 10),
    aggregators: Sequence[str] = ("kemeny", "borda", "mean_probability", "mean_log_probability"),
    config: Mapping[str, object] | None = None,
) -> FirstTokenTable:
    """The rows described in the module docstring, over ``lists`` (see :class:`FirstTokenTable`)."""
    if not lists:
        raise ConfigurationError("no lists to score")
    calib = {size: PositionPrior(tuple(p)) for size, p in priors.items()}
    every = [_orders(s, window) for s in lists]
    first = 1 if passages else 0  # passages: the first order is the first-stage order
    t = _Rows(lists, metric, window, every, [len(s.example.items) for s in lists], calib, first)
    available = min(len(o) for o in every) - first
    single = t.passage_singles() if passages else t.sorting_single()
    ms = [m for m in m_values if 1 <= m <= available]
    for m in ms:
        t.psc(m, aggregators)
    weights = t.fused(max(ms, default=0)) if passages else {}
    facts = dict(config or {}, orders=available, window=window, first_stage_weights=weights)
    facts["top_label"] = _top_label(lists, first, window)
    return FirstTokenTable(
        metric_name, t.rows, t.costs, "first stage" if passages else None, single, facts
    )


@dataclass
class _Rows:
    """One table's rows and costs while :func:`score_first_token` builds them: the lists, the
    metric, each list's orders and items, the priors, the first shuffled order."""

    lists: Sequence[ListSamples]
    metric: Metric
    window: int
    every: list[list[Order]]
    n_items: list[int]
    calib: dict[int, PositionPrior]
    first: int
    rows: dict[str, tuple[float, ...]] = field(default_factory=dict)
    costs: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, name: str, orders: Sequence[Sequence[int]], m: int | None) -> None:
        """Row ``name``: each list's ``orders`` scored; it costs ``m`` orders (None: none)."""
        self.rows[name] = tuple(self.metric(o, s) for o, s in zip(orders, self.lists, strict=True))
        if m is not None:
            self.costs[name] = _cost(self.lists, self.window, m)

    def by_probability(self, priors: Mapping[int, PositionPrior] | None) -> list[list[int]]:
        """Each list's first order, by probability (calibrated by ``priors``)."""
        sized = zip(self.every, self.n_items, strict=True)
        return [_by_probability(o[0], n, priors) for o, n in sized]

    def passage_singles(self) -> str:
        """The first stage, a random order and the single pass (also calibrated)."""
        sized = list(zip(self.n_items, self.lists, strict=True))
        self.rows["first stage"] = tuple(self.metric(range(n), s) for n, s in sized)
        self.rows["random order"] = tuple(_chance(n, s, self.metric) for n, s in sized)
        self.add("single pass", self.by_probability(None), 1)
        if self.calib:
            self.add("single pass, calibrated", self.by_probability(self.calib), 1)
        return "single pass"

    def sorting_single(self) -> str:
        """A sorting list's single pass: the mean over its orders of each order alone."""
        name = "single (mean of the orders)"
        self.rows[name] = tuple(
            statistics.fmean(self.metric(_by_probability(x, n, None), s) for x in o)
            for o, n, s in zip(self.every, self.n_items, self.lists, strict=True)
        )
        self.costs[name] = _cost(self.lists, self.window, 1)
        return name

    def psc(self, m: int, aggregators: Sequence[str]) -> None:
        """PSC over the first ``m`` shuffled orders, per aggregator, and calibrated."""
        chosen = [o[self.first : self.first + m] for o in self.every]
        sized = list(zip(chosen, self.n_items, strict=True))
        for method in aggregators:
            self.add(f"PSC m={m} {method}", [_psc(c, n, method) for c, n in sized], m)
        if self.calib:
            orders = [_psc(c, n, "mean_probability", self.calib) for c, n in sized]
            self.add(f"PSC m={m} mean_probability, calibrated", orders, m)

    def fused(self, top: int) -> dict[str, float]:
        """The single passes and PSC at m = ``top``, fused with the first stage at the weight
        chosen leave-one-out; returns each row's mean weight."""
        weights: dict[str, float] = {}
        names = [
            r for r in self.rows if r.startswith("single pass") or r.startswith(f"PSC m={top} ")
        ]
        for name in names:
            orders = _orders_of(name, self.every, self.n_items, self.first, self.calib)
            scores, weights[name] = _loo_fused(orders, self.lists, self.metric)
            self.rows[f"{name} + first stage (LOO w)"] = scores
        return weights


def _top_label(lists: Sequence[ListSamples], first: int, window: int) -> tuple[str, float, int]:
    """The label most often the most probable among the shuffled samples, its share of them,
    and the labels a window holds: a share far above ``1 / window`` is a model that answers by
    position (docs/first_token.md)."""
    per = [len(cut_blocks(range(len(s.example.items)), window)) for s in lists]
    shown = Counter(
        t for s, p in zip(lists, per, strict=True) for t in s.raw_texts[first * p :] if t
    )
    if not shown:
        return ("", 0.0, window)
    label, count = shown.most_common(1)[0]
    return (label, count / sum(shown.values()), min(window, len(lists[0].example.items)))


def _orders_of(
    name: str,
    every: Sequence[Sequence[Order]],
    n_items: Sequence[int],
    first: int,
    calib: Mapping[int, PositionPrior],
) -> list[list[int]]:
    """The orders behind row ``name`` again (for the fusion)."""
    if name.startswith("single pass"):
        prior = calib if name.endswith("calibrated") else None
        return [_by_probability(o[0], n, prior) for o, n in zip(every, n_items, strict=True)]
    spec, _, rest = name.partition(" ")[2].partition(" ")  # "m=5", "kemeny[, calibrated]"
    m = int(spec.removeprefix("m="))
    method, _, cal = rest.partition(", ")
    return [
        _psc(o[first : first + m], n, method, calib if cal else None)
        for o, n in zip(every, n_items, strict=True)
    ]
