"""Fast in-process simulations of the frontier policy against the simulated judge.

The judge answers in process (its scoring core, no prompt text: each window is seeded by the
query and the order shown, so a prompt repeated gets the same answer), the policy
(:mod:`permsc_integrations.strategies._frontier`) runs its rounds, and each run is scored by nDCG@k
against the qrels grades. Regimes (benchmarks/_frontier_regimes.py): ``tuned`` (what the
policy was tuned on) and ``held-out`` (written down before tuning, never tuned on), or names.
Not part of CI; numbers for issue 31's design. The peers and PSC today (PSCRanker's blocks)
run once into JSON Lines caches; the policy is recomputed each time.

    PEERS=/work/venvs/peers/bin/python  # blitzrank's environment (benchmarks/_peer_methods.py)
    $PEERS benchmarks/frontier_sim.py --peers /tmp/peers.jsonl --regimes held-out --seeds 0,1
    python benchmarks/frontier_sim.py --psc-today /tmp/psc.jsonl --regimes held-out --seeds 0,1
    # PSC at each peer's own mean budget (floor), and adaptive against fixed m = 20:
    python benchmarks/frontier_sim.py --versus /tmp/peers.jsonl,/tmp/psc.jsonl --regimes held-out \
        --seeds 0,1 --adaptive --write
    python benchmarks/frontier_sim.py --budgets 4,6,9,12,26 --regimes tuned --seeds 0
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # 2 shared cores: BLAS threads only thrash

import argparse  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _frontier_runs as runs  # noqa: E402
from _frontier_regimes import ALL, HELD_OUT, TUNED  # noqa: E402
from _report import write_section  # noqa: E402

from permsc_integrations.strategies._frontier import model, stopping  # noqa: E402
from permsc_integrations.strategies._frontier.policy import Settings  # noqa: E402

Rows = dict[tuple[int, str], runs.Row]
MARGIN = 0.005  # PSC must reach the peer's nDCG minus this (issue 31's target)


class Policy:
    """The policy's rows per (regime, budget), computed once per process."""

    def __init__(self, seeds: Sequence[int], count: int | None, changes: dict) -> None:
        self.seeds, self.count, self.changes = seeds, count, changes
        self._judged: dict[tuple[str, int], runs.Judged] = {}
        self._rows: dict[tuple[str, int | None], Rows] = {}

    def judged(self, regime: str, seed: int) -> runs.Judged:
        if (regime, seed) not in self._judged:
            self._judged[regime, seed] = runs.Judged(ALL[regime], seed, self.count)
        return self._judged[regime, seed]

    def units(self, regime: str) -> set[tuple[int, str]]:
        """The (seed, query) units the policy runs: a cache's other rows are left out."""
        return {(seed, q.qid) for seed in self.seeds for q in self.judged(regime, seed).lists}

    def rows(self, regime: str, budget: int | None) -> Rows:
        if (regime, budget) not in self._rows:
            out: Rows = {}
            for seed in self.seeds:
                judged = self.judged(regime, seed)
                settings = Settings(budget=budget, seed=seed, k=judged.regime.k, **self.changes)
                for q in judged.lists:
                    out[seed, q.qid] = runs.frontier(judged, q, settings)
            self._rows[regime, budget] = out
        return self._rows[regime, budget]


def paired(ours: Rows, theirs: Rows, draws: int = 2000) -> tuple[float, float, float]:
    """Mean of ours - theirs (nDCG) over shared (seed, query) units, and a 90 % paired
    bootstrap interval (queries resampled)."""
    units = sorted(set(ours) & set(theirs))
    diffs = [ours[u]["ndcg"] - theirs[u]["ndcg"] for u in units]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(draws))
    return statistics.fmean(diffs), means[int(0.05 * draws)], means[int(0.95 * draws)]


def _names(spec: str) -> list[str]:
    groups = {"tuned": list(TUNED), "held-out": list(HELD_OUT), "all": list(ALL)}
    return [name for part in spec.split(",") for name in groups.get(part, [part])]


def versus(policy: Policy, rows: dict, regimes: list[str]) -> list[dict]:
    """PSC at each peer's own mean budget (floor) against the peer, regime by regime."""
    out = []
    for regime in regimes:
        for name in runs.PEERS:
            units = policy.units(regime)
            theirs = {u: r for u, r in rows.get((regime, name), {}).items() if u in units}
            if not theirs:
                continue
            budget = math.floor(runs.mean(theirs.values(), "calls"))
            ours = {u: r for u, r in policy.rows(regime, budget).items() if u in theirs}
            diff, low, high = paired(ours, theirs)
            out.append(
                {
                    "regime": regime,
                    "peer": name,
                    "budget": budget,
                    "peer_ndcg": runs.mean(theirs.values(), "ndcg"),
                    "psc_ndcg": runs.mean(ours.values(), "ndcg"),
                    "rounds": runs.mean(ours.values(), "rounds"),
                    "diff": (diff, low, high),
                    "ok": diff >= -MARGIN,
                }
            )
            print(_line(out[-1]), flush=True)  # noqa: T201
    return out


def _line(r: dict) -> str:
    d, lo, hi = r["diff"]
    return (
        f"{r['regime']:20s} {r['peer']:26s} B={r['budget']:3d} peer={r['peer_ndcg']:.3f} "
        f"psc={r['psc_ndcg']:.3f} diff={d:+.3f} [{lo:+.3f},{hi:+.3f}] rounds={r['rounds']:.1f} "
        f"{'ok' if r['ok'] else 'SHORT'}"
    )


def adaptive(policy: Policy, rows: dict, regimes: list[str]) -> list[dict]:
    """The policy's adaptive mode (cap 120) against PSC's fixed m = 20 (blocks)."""
    out = []
    for regime in regimes:
        fixed = {
            u: r
            for u, r in rows.get((regime, "blocks m=20"), {}).items()
            if u in policy.units(regime)
        }
        ours = policy.rows(regime, None)
        ours = {u: r for u, r in ours.items() if u in fixed} if fixed else ours
        row = {
            "regime": regime,
            "calls": runs.mean(ours.values(), "calls"),
            "rounds": runs.mean(ours.values(), "rounds"),
            "ndcg": runs.mean(ours.values(), "ndcg"),
        }
        if fixed:
            row |= {
                "fixed_calls": runs.mean(fixed.values(), "calls"),
                "fixed_ndcg": runs.mean(fixed.values(), "ndcg"),
                "diff": paired(ours, fixed),
            }
        out.append(row)
        print(  # noqa: T201
            f"{regime:20s} adaptive calls={row['calls']:.1f} rounds={row['rounds']:.1f} "
            f"ndcg={row['ndcg']:.3f}"
            + (
                f" | m=20 calls={row['fixed_calls']:.0f} ndcg={row['fixed_ndcg']:.3f} "
                f"diff={row['diff'][0]:+.3f} [{row['diff'][1]:+.3f},{row['diff'][2]:+.3f}]"
                if fixed
                else ""
            ),
            flush=True,
        )
    return out


def sweep(policy: Policy, regimes: list[str], budgets: list[int | None]) -> None:
    for regime in regimes:
        for budget in budgets:
            began = time.perf_counter()
            found = policy.rows(regime, budget).values()
            values = [r["ndcg"] for r in found]
            spread = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0
            print(  # noqa: T201
                f"{regime:20s} B={budget!s:5s} ndcg={statistics.fmean(values):.3f}"
                f"±{spread:.3f} calls={runs.mean(found, 'calls'):.1f} "
                f"rounds={runs.mean(found, 'rounds'):.1f} ({time.perf_counter() - began:.0f} s)",
                flush=True,
            )


def _apply(spec: str, target: object) -> None:
    for part in filter(None, spec.split(",")):
        name, value = part.split("=")
        setattr(target, name, type(getattr(target, name))(value))


def _settings(spec: str) -> dict:
    changes = {}
    for part in filter(None, spec.split(",")):
        name, value = part.split("=")
        changes[name] = type(getattr(Settings(), name) or 0)(eval(value))  # noqa: S307
    return changes


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--regimes", default="tuned")
    ap.add_argument("--budgets", default="4,6,9,12,26")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--queries", type=int, default=None, help="the first N lists (all: 43)")
    ap.add_argument("--adaptive", action="store_true", help="adaptive vs fixed m = 20")
    ap.add_argument("--peers", type=Path, help="run the peers in process into this cache")
    ap.add_argument("--psc-today", type=Path, help="run PSCRanker's blocks into this cache")
    ap.add_argument("--versus", help="caches (comma-separated): PSC at each peer's budget")
    ap.add_argument(
        "--write", action="store_true", help="write docs/benchmarks.md 'frontier-held-out'"
    )
    ap.add_argument("--set", default="", help="Settings changes, e.g. floor=0.05")
    ap.add_argument("--model", default="", help="model constants, e.g. PRIOR_SLOPE=1.0")
    ap.add_argument("--stopping", default="", help="stopping constants")
    return ap.parse_args()


def main() -> None:
    args = _args()
    _apply(args.model, model)
    _apply(args.stopping, stopping)
    regimes, seeds = _names(args.regimes), [int(s) for s in args.seeds.split(",")]
    if args.peers:
        return runs.run_peers(regimes, seeds, args.queries, args.peers)
    if args.psc_today:
        return runs.run_psc_today(regimes, seeds, args.queries, args.psc_today)
    policy = Policy(seeds, args.queries, _settings(args.set))
    if args.versus:
        rows = runs.load_rows(Path(p) for p in args.versus.split(","))
        found = versus(policy, rows, regimes)
        fits = adaptive(policy, rows, regimes) if args.adaptive else []
        if args.write:
            import _frontier_report

            write_section(
                "frontier-held-out", _frontier_report.section(found, fits, rows, seeds, policy)
            )
        return None
    budgets: list[int | None] = (
        [None] if args.adaptive else [int(b) for b in args.budgets.split(",")]
    )
    sweep(policy, regimes, budgets)
    return None


if __name__ == "__main__":
    main()
