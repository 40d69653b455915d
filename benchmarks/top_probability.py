"""``RankingResult.top_probability``: is it calibrated, and what does it cost?

Calibration: PSCRanker ranks DL19's BM25 top-100 lists through the simulated judge (in process,
the three named regimes), and each item's predicted chance of the top 10 is set against whether
it is in the true top 10 by the qrels grades (an item tied with others across the cut counts
for its share: 2 slots left among 4 items of that grade: 0.5 each). Bins of the prediction:
the mean predicted, the share observed, the items; over queries x regimes, per way the
probability is made (the frontier's rounds under ``max_calls``, its adaptive rounds, or a
fixed m = 20 run whose samples the list model is fitted to afterwards). Cost: that fit on a
100-item, m = 20 run, timed alone (``strategies/_top_probability.py``'s ``_fitted``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/top_probability.py --queries 20
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: see docs/strategies.md

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _dl19  # noqa: E402
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.strategies._top_probability import _fitted as _top_probability  # noqa: E402
from permsc_integrations.testing import REGIMES, SimulatedJudge  # noqa: E402

K = 10
EDGES = (0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0000001)
METHODS = {
    "max_calls=12": {"max_calls": 12, "top_k": K},
    "max_calls=26": {"max_calls": 26, "top_k": K},
    "adaptive": {"adaptive": True, "top_k": K},
    "m=20 (fitted after)": {"num_permutations": 20, "top_k": K},
}


def membership(grades: tuple[int, ...], k: int = K) -> list[float]:
    """Each item's share of the true top ``k`` by grade (ties across the cut share it)."""
    cut = sorted(grades, reverse=True)[k - 1]
    above = sum(g > cut for g in grades)
    at = sum(g == cut for g in grades)
    return [1.0 if g > cut else (k - above) / at if g == cut else 0.0 for g in grades]


def collect(queries: list[_dl19.Query], seed: int) -> dict[str, list[tuple[float, float]]]:
    """method -> (predicted, observed) for every item of every query and regime."""
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in METHODS}
    for regime in REGIMES:
        judge = SimulatedJudge(REGIMES[regime], seed=seed)
        for q in queries:
            texts = judge.documents(q.texts, q.grades, group=q.qid)
            truth = membership(q.grades)
            for name, options in METHODS.items():
                with PSCRanker(judge.backend(), seed=seed, **options) as ranker:
                    result = ranker.rank(q.query, texts)
                out[name] += list(zip(result.top_probability, truth, strict=True))
    return out


def table(pairs: dict[str, list[tuple[float, float]]]) -> list[str]:
    lines = [
        "| method | predicted bin | mean predicted | share in the true top 10 | items |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, points in pairs.items():
        for low, high in zip(EDGES, EDGES[1:], strict=False):
            inside = [(p, o) for p, o in points if low <= p < high]
            if inside:
                mean_p = statistics.fmean(p for p, _ in inside)
                share = statistics.fmean(o for _, o in inside)
                label = f"[{low:.2f}, {min(high, 1.0):.2f}{']' if high > 1 else ')'}"
                lines.append(f"| {name} | {label} | {mean_p:.3f} | {share:.3f} | {len(inside)} |")
        brier = statistics.fmean((p - o) ** 2 for p, o in points)
        ece = sum(abs(sum(p - o for p, o in b)) for b in _bins(points)) / len(points)
        lines.append(f"| {name} | Brier {brier:.4f}, ECE {ece:.4f} | | | {len(points)} |")
    return lines


def _bins(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    return [
        [(p, o) for p, o in points if low <= p < high]
        for low, high in zip(EDGES, EDGES[1:], strict=False)
    ]


def fit_cost(query: _dl19.Query, repeats: int) -> tuple[float, float, int]:
    """Seconds of the list model's fit after a fixed m = 20 run of ``query`` (median, max),
    and the answers it read."""
    judge = SimulatedJudge(REGIMES["mild"], seed=0)
    texts = judge.documents(query.texts, query.grades, group=query.qid)
    with PSCRanker(judge.backend(), num_permutations=20) as ranker:
        result = ranker.rank(query.query, texts)
    samples = [s for s in result.samples if s.ok]
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        _top_probability(result.order, samples, K)
        times.append(time.perf_counter() - began)
    return statistics.median(times), max(times), len(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    queries = _dl19.load(args.queries)
    median, worst, answers = fit_cost(queries[0], args.repeats)
    lines = [
        f"`RankingResult.top_probability` (each item's chance of the top {K} under the list "
        "model) against the truth: DL19 BM25 top-100, "
        f"{len(queries)} queries x the judge's three regimes (seed {args.seed}), in process; "
        "observed: the item's share of the true top 10 by qrels grade (ties across the cut "
        "share it). A calibrated score's observed share matches its mean prediction in every "
        "bin. ECE: the items' mean absolute gap, bin by bin.",
        "",
        *table(collect(queries, args.seed)),
        "",
        f"The fit's cost after a fixed m = 20 run of 100 items ({answers} answers, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}): median "
        f"{median:.3f} s, worst {worst:.3f} s of {args.repeats}.",
    ]
    write_section("calibration", "## Calibration of top_probability\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
