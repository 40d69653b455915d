"""The real-answer benchmark's lists, score and intervals (benchmarks/real_answers.py).

A list is drawn from the perm-sc data files (../shared/data/perm-sc, or PERMSC_DATA_DIR) by
(task, seed, index) alone: its length uniformly in [min_items, max_items], its items the
concatenation of randomly chosen rows (WordSort: lists of 10 words; MathSort: groups of 10
expressions), repeated strings dropped, shuffled. Another seed or index range gives lists
the saved run never saw (``--held-out``). The truth is the sort key (the word; the value),
ties kept: an item's relevance is ``k - r`` for ``r`` the number of items strictly before
it, so tied items are equally relevant (nDCG@k, linear gains).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from permsc_integrations.eval._datasets import default_data_dir, load_sorting

QUERIES = {  # what the peers' RankGPT prompts are asked (PSC's sorting prompts need none)
    "wordsort": "Which word comes first in alphabetical order?",
    "mathsort": "Which math expression has the smallest value?",
}
FILES = {"wordsort": "wordsort.tsv", "mathsort": "mathsort.tsv"}


@dataclass(frozen=True, slots=True)
class RealList:
    task: str
    id: str
    items: tuple[str, ...]
    keys: tuple[float | str, ...]


def _rows(task: str, data_dir: Path) -> list[list[tuple[str, float | str]]]:
    """The data file's lists (WordSort's rows, MathSort's groups) as (text, key) pairs."""
    if task not in QUERIES:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(QUERIES)}")
    dataset = load_sorting(task, data_dir / FILES[task])
    return [list(zip(e.items, e.keys, strict=True)) for e in dataset.examples]


def draw(
    task: str, count: int, *, seed: int = 0, start: int = 0, min_items: int = 30,
    max_items: int = 60, data_dir: Path | None = None,
) -> list[RealList]:
    """Lists ``start .. start + count - 1`` of ``task`` for ``seed``."""
    rows = _rows(task, Path(data_dir) if data_dir else default_data_dir())
    out = []
    for index in range(start, start + count):
        rng = random.Random(f"{task}:{seed}:{index}")
        size = rng.randint(min_items, max_items)
        picked = rng.sample(range(len(rows)), math.ceil(size / 10) + 1)
        seen: dict[str, float | str] = {}
        for row in picked:
            for text, key in rows[row]:
                seen.setdefault(text, key)
        pairs = list(seen.items())[:size]
        rng.shuffle(pairs)
        out.append(
            RealList(task, f"{task}-{seed}-{index}", tuple(p[0] for p in pairs),
                     tuple(p[1] for p in pairs))
        )
    return out


def relevance(keys: Sequence[float | str], k: int = 10) -> list[int]:
    """``k - r`` (0 below) for ``r`` the number of items whose key is strictly smaller."""
    return [max(0, k - sum(1 for other in keys if other < key)) for key in keys]  # type: ignore[operator]


def ndcg(order: Sequence[int], keys: Sequence[float | str], k: int = 10) -> float:
    """nDCG@k of ``order`` (indices, best first) against the tie-aware truth."""
    rel = relevance(keys, k)
    dcg = sum(rel[i] / math.log2(pos + 2) for pos, i in enumerate(list(order)[:k]))
    ideal = sum(r / math.log2(pos + 2) for pos, r in enumerate(sorted(rel, reverse=True)[:k]))
    return dcg / ideal if ideal else 0.0


def bootstrap(values: Sequence[float], *, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95 % percentile interval of the mean of ``values`` (resampled over lists)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (math.nan, math.nan)
    rng = random.Random(seed)
    means = sorted(
        sum(rng.choice(values) for _ in values) / len(values) for _ in range(draws)
    )
    return means[int(0.025 * draws)], means[int(0.975 * draws) - 1]


def rounds(spans: Sequence[tuple[float, float]]) -> int:
    """Sequential rounds of calls given as (start, end): the judge's logical clock (a call
    is one round after the latest round answered before it started)."""
    starts = [(s, 1, i) for i, (s, _) in enumerate(spans)]
    events = sorted(starts + [(e, 0, i) for i, (_, e) in enumerate(spans)])
    answered, most = 0, 0
    stamp: dict[int, int] = {}
    for _, kind, i in events:
        if kind == 1:
            stamp[i] = answered + 1
            most = max(most, stamp[i])
        else:
            answered = max(answered, stamp.get(i, answered))
    return most
