"""Adaptive ``top_k`` on fine grades (issue 39 item 5): the frontier's adaptive rounds against
fixed m = 20 on lists graded 0-10.

Lists: DL19's BM25 top 100 in the first-stage order; each candidate's qrels grade g (0-3,
unjudged 0) becomes a fine grade ``min(10, 3 g + d)``, ``d`` drawn 0-2 per candidate (seeded
by query, candidate and judge seed): 0-2 for the unjudged, 9-10 for the highly relevant, so
the top 10 hold neighbouring grades that a coarse stop rule counts as ties. The simulated
judge (docs/judge.md) scores ``gain * grade + ...`` with the ``mild`` regime's noise, error and
position bias and ``gain = 1/3`` (the whole 0-10 range spans what 0-3 spans at gain 1).

Methods: ``adaptive`` (the frontier policy in process, ``Settings(k=10)``: cap 120 calls,
rounds of 6 until the top 10 is certified) and ``m=20`` (``PSCRanker(num_permutations=20)``,
blocks, Kemeny: 120 calls). Scores: nDCG@10 with linear gains (the grade) and exponential
gains (2^grade - 1), and the share of the top 10 places whose item has the ideal grade of
that place. Paired 90 % bootstrap intervals of adaptive - m=20 over (seed, query) units.

Rows are cached per (label, seed, method, query) in ``--cache`` (JSON Lines), so the code
before a change and after it can be run into one cache under two labels and reported side by
side (``--label``; m = 20 is run once, under the label ``fixed``):

    python benchmarks/fine_grades.py --label before   # with the old code on PYTHONPATH
    python benchmarks/fine_grades.py --label after --write
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # 2 shared cores: BLAS threads only thrash

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _dl19  # noqa: E402
import _frontier_runs as runs  # noqa: E402
from _frontier_regimes import Regime, _rng  # noqa: E402
from _report import write_section  # noqa: E402

from permsc_integrations.strategies._frontier.policy import Frontier, Settings  # noqa: E402
from permsc_integrations.testing import REGIMES  # noqa: E402

CACHE = Path("/tmp/fine-grades.jsonl")
K = 10


@dataclass(frozen=True)
class FineRegime(Regime):
    """A :class:`Regime` whose lists carry grades 0-10 (module docstring)."""

    def _list(self, q: _dl19.Query, other: _dl19.Query, seed: int) -> _dl19.Query:
        base = Regime._list(self, q, other, seed)
        rng = _rng("fine", q.qid, seed)
        grades = tuple(min(10, 3 * g + rng.randint(0, 2)) for g in base.grades)
        return _dl19.Query(base.qid, base.query, base.texts, grades)


GAINS = "1/3,1/2"  # 1/3: the 0-10 range spans what DL19's 0-3 spans at gain 1


def dcg(grades: Sequence[int], gain: str) -> float:
    value = (lambda g: g) if gain == "linear" else (lambda g: 2.0**g - 1)
    return sum(value(g) / math.log2(r + 2) for r, g in enumerate(grades[:K]))


def scores(q: _dl19.Query, order: Sequence[int]) -> dict[str, float]:
    """nDCG@10 (linear, exponential gains) and the share of the top 10 places holding the
    ideal grade of that place."""
    got = [q.grades[i] for i in order[:K]]
    ideal = sorted(q.grades, reverse=True)[:K]
    return {
        "linear": dcg(got, "linear") / dcg(ideal, "linear"),
        "exponential": dcg(got, "exponential") / dcg(ideal, "exponential"),
        "ideal_share": sum(a == b for a, b in zip(got, ideal, strict=True)) / K,
    }


def adaptive(judged: runs.Judged, q: _dl19.Query, seed: int) -> dict:
    policy = Frontier(len(q.texts), Settings(k=K, seed=seed))
    while (windows := policy.next_round()) is not None:
        policy.observe([judged.ask(q, w) for w in windows])
    result = policy.result()
    return {**scores(q, result.order), "calls": policy.calls, "stopped": result.stopped}


def fixed(judged: runs.Judged, q: _dl19.Query, seed: int) -> dict:
    from permsc_integrations import PSCRanker
    from permsc_integrations.testing import ScriptedBackend

    judged.judge.reset()
    backend = ScriptedBackend(judged.respond)
    with PSCRanker(backend, num_permutations=20, max_concurrency=1000, seed=seed) as ranker:
        order = ranker.rank(q.query, judged.texts[q.qid]).order
    return {**scores(q, order), "calls": judged.judge.stats(q.qid).calls}


def run(args: argparse.Namespace) -> None:
    import logging

    logging.disable(logging.WARNING)
    rows = _load(args.cache)
    with args.cache.open("a") as out:
        for gain, seed in itertools.product(args.gains, args.seeds):
            regime = FineRegime(REGIMES["mild"].but(gain=eval(gain)))  # noqa: S307
            judged = runs.Judged(regime, seed, args.queries)
            for q in judged.lists:
                for label, method in ((args.label, adaptive), ("fixed", fixed)):
                    key = (label, gain, seed, q.qid)
                    if key not in rows:
                        rows[key] = method(judged, q, seed)
                        out.write(json.dumps({"key": key, **rows[key]}) + "\n")
                        out.flush()


def _load(cache: Path) -> dict[tuple, dict]:
    if not cache.exists():
        return {}
    out = {}
    for line in cache.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[tuple(row.pop("key"))] = row
    return out


def paired(ours: list[float], theirs: list[float], draws: int = 2000) -> tuple[float, ...]:
    diffs = [a - b for a, b in zip(ours, theirs, strict=True)]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(draws))
    return statistics.fmean(diffs), means[int(0.05 * draws)], means[int(0.95 * draws)]


def table(rows: dict[tuple, dict], labels: list[str], units: list[tuple]) -> list[str]:
    lines = [
        "| method | calls (min-max) | certified | nDCG@10 linear | diff vs m=20 [90 %] "
        "| nDCG@10 exp | diff vs m=20 [90 %] | ideal grade share | diff vs m=20 [90 %] |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- | ---: | --- |",
    ]
    base = [rows[("fixed", *u)] for u in units]
    for label in ["fixed", *labels]:
        got = [rows[(label, *u)] for u in units]
        calls = [r["calls"] for r in got]
        done = sum(r.get("stopped", "") == "certified" for r in got) / len(got)
        cells = [f"{statistics.fmean(calls):.1f} ({min(calls)}-{max(calls)})"]
        cells.append("" if label == "fixed" else f"{done:.0%}")
        for field in ("linear", "exponential", "ideal_share"):
            cells.append(f"{statistics.fmean(r[field] for r in got):.3f}")
            if label == "fixed":
                cells.append("")
            else:
                d, lo, hi = paired([r[field] for r in got], [r[field] for r in base])
                cells.append(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]")
        name = "fixed m=20 (blocks, Kemeny)" if label == "fixed" else f"adaptive top_k ({label})"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def report(args: argparse.Namespace) -> None:
    rows = _load(args.cache)
    labels = [x for x in args.labels.split(",") if x]
    lines: list[str] = []
    for gain in args.gains:
        units = sorted({(g, s, q) for (lb, g, s, q) in rows if lb == "fixed" and g == gain})
        units = [u for u in units if u[1] in args.seeds and all((lb, *u) in rows for lb in labels)]
        if not units:
            continue
        lines += [f"**gain {gain}** ({len(units)} units)", "", *table(rows, labels, units), ""]
    print("\n".join(lines))  # noqa: T201
    if args.write:
        body = (
            "## Adaptive top_k on fine grades (issue 39 item 5; benchmarks/fine_grades.py)\n\n"
            "DL19 BM25 top 100, grades 0-10 (`min(10, 3 g + d)`, d drawn 0-2), the mild judge "
            f"at gain 1/3 (the 0-10 range spans what 0-3 spans at gain 1) and 1/2, "
            f"{args.queries} queries x judge seeds {','.join(map(str, args.seeds))} a gain; "
            "adaptive: the frontier policy's `Settings(k=10)` (cap 120 calls); m=20: "
            "`PSCRanker(num_permutations=20)` (blocks, Kemeny). Means, and adaptive - m=20 "
            "with paired 90 % bootstrap intervals; 'ideal grade share': the top-10 places "
            "whose item has the ideal grade of that place. 'before': the zone 0.5 x the whole "
            "list's spread (tau); 'after': 0.5 x the spread of the contenders (the top 2k "
            "posterior means) where the posterior resolves it (at least 1.5 of their "
            "posterior sds), at most the former.\n\n" + "\n".join(lines)
        )
        write_section("fine-grades", body, command=args.command)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--label", default="after", help="the label of the adaptive rows")
    ap.add_argument("--labels", default="before,after", help="the labels reported")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--gains", default=GAINS, help="the judge's score per grade")
    ap.add_argument("--command", help="the command line(s) to record in the doc")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--write", action="store_true", help="write docs/benchmarks.md fine-grades")
    args = ap.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.gains = args.gains.split(",")
    if not args.report_only:
        run(args)
    report(args)


if __name__ == "__main__":
    main()
