"""Fast in-process simulations of the frontier policy against the simulated judge.

The judge answers in process (its scoring core, no prompt text: each window is seeded by the
query and the order shown, so a prompt repeated gets the same answer), the policy
(:mod:`permsc_integrations.frontier`) runs its rounds, and each run is scored by nDCG@10
against the qrels grades. Regimes: the judge's three named ones and variations of them
(``--regimes``). Not part of CI; numbers for issue 31's design.

    python benchmarks/frontier_sim.py --budgets 4,6,9,12,13,16,26 --seeds 0,1
    python benchmarks/frontier_sim.py --adaptive --seeds 0
    # the peers in process (their environment: benchmarks/_peer_methods.py), then PSC at
    # each peer's own mean budget (floor), regime by regime (docs/benchmarks.md "frontier"):
    PEERS=/work/venvs/peers/bin/python
    $PEERS benchmarks/frontier_sim.py --peers /tmp/peers.jsonl --seeds 0,1 --queries 43
    python benchmarks/frontier_sim.py --versus /tmp/peers.jsonl --seeds 0,1 --queries 43
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _dl19  # noqa: E402

from permsc_integrations.frontier.model import Answer  # noqa: E402
from permsc_integrations.frontier.policy import Frontier, Settings  # noqa: E402
from permsc_integrations.testing import (  # noqa: E402
    REGIMES,
    JudgeParams,
    SimulatedJudge,
    hidden_keys,
)

VARIANTS: dict[str, JudgeParams] = {
    **REGIMES,
    "primacy-only": REGIMES["position-biased"].but(recency=0.0, primacy=2.0),
    "recency-heavy": REGIMES["mild"].but(primacy=0.2, recency=1.5, curve=4.0),
    "sticky": REGIMES["mild"].but(doc_error=0.6, noise=0.3),
    "echo-heavy": REGIMES["mild"].but(echo=0.5, noise=1.0),
    "very-noisy": REGIMES["noisy"].but(noise=3.0, echo=0.1),
    "flat-noisy": REGIMES["noisy"].but(primacy=0.0, recency=0.0, echo=0.0),
}


def run_query(
    judge: SimulatedJudge, q: _dl19.Query, keys: list[int], settings: Settings
) -> tuple[float, int, int, str]:
    """One policy run on one query: (nDCG@10, calls, rounds, why it stopped)."""
    policy = Frontier(len(keys), settings)
    while (windows := policy.next_round()) is not None:
        answers = []
        for window in windows:
            positions, _ = judge.judge([keys[i] for i in window], f"{q.qid}|{window}")
            answers.append(Answer(window, tuple(window[p] for p in positions)))
        policy.observe(answers)
    result = policy.result()
    return q.ndcg(result.order), policy.calls, policy.rounds, result.stopped


def register(judge: SimulatedJudge, q: _dl19.Query) -> tuple[list[str], list[int]]:
    texts = judge.documents(q.texts, q.grades, group=q.qid)
    return texts, [hidden_keys(t)[0] for t in texts]


def evaluate(
    regime: str, seeds: list[int], queries: list[_dl19.Query], make: Callable[[int], Settings]
) -> dict[str, float]:
    rows = []
    for seed in seeds:
        judge = SimulatedJudge(VARIANTS[regime], seed=seed)
        for q in queries:
            rows.append(run_query(judge, q, register(judge, q)[1], make(seed))[:3])
    return {
        name: statistics.fmean(r[i] for r in rows)
        for i, name in enumerate(("ndcg", "calls", "rounds"))
    }


def run_peers(
    regimes: list[str], seeds: list[int], queries: list[_dl19.Query], cache: Path
) -> None:
    """Every peer in process (needs the peers' environment), one JSON line per run."""
    import _peer_methods

    blitzrank = _peer_methods.setup()
    done = {tuple(json.loads(line)["key"]) for line in cache.open()} if cache.exists() else set()
    with cache.open("a") as out:
        for regime, seed in itertools.product(regimes, seeds):
            judge = SimulatedJudge(VARIANTS[regime], seed=seed, latency=0.0)
            _peer_methods.in_process(judge)
            docs = {q.qid: register(judge, q)[0] for q in queries}
            for name, make in _peer_methods.peers(blitzrank).items():
                for q in queries:
                    key = [regime, seed, name, q.qid]
                    if tuple(key) in done:
                        continue
                    judge.reset()
                    order = _peer_methods.rank(make(), q.query, docs[q.qid], seed=seed)
                    st = judge.stats(q.qid)
                    row = {
                        "key": key,
                        "ndcg": q.ndcg(order),
                        "calls": st.calls,
                        "rounds": st.rounds,
                    }
                    out.write(json.dumps(row) + "\n")
                out.flush()


def versus(cache: Path, seeds: list[int], queries: list[_dl19.Query], changes: dict) -> None:
    """PSC at each peer's own mean budget (floor), regime by regime, against the peer."""
    rows: dict[tuple[str, str], list[dict]] = {}
    qids = {q.qid for q in queries}
    for line in cache.open():
        row = json.loads(line)
        regime, seed, name, qid = row["key"]
        if seed in seeds and qid in qids:
            rows.setdefault((regime, name), []).append(row)
    for (regime, name), found in rows.items():
        peer = {k: statistics.fmean(r[k] for r in found) for k in ("ndcg", "calls", "rounds")}
        budget = math.floor(peer["calls"])
        ours = evaluate(
            regime,
            seeds,
            queries,
            lambda seed, budget=budget: Settings(budget=budget, seed=seed, **changes),
        )
        verdict = "ok" if ours["ndcg"] >= peer["ndcg"] - 0.005 else "SHORT"
        print(  # noqa: T201
            f"{regime:16s} {name:26s} B={budget:4d} peer={peer['ndcg']:.3f} "
            f"psc={ours['ndcg']:.3f} rounds={ours['rounds']:.1f} {verdict}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--regimes", default="mild,position-biased,noisy")
    ap.add_argument("--budgets", default="4,6,9,12,16,26")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--adaptive", action="store_true")
    ap.add_argument("--peers", type=Path, help="run the peers in process into this JSONL cache")
    ap.add_argument("--versus", type=Path, help="PSC at each cached peer's budget")
    ap.add_argument("--set", default="", help="Settings changes, e.g. floor=0.05,max_rounds=3")
    ap.add_argument("--model", default="", help="model constants, e.g. PRIOR_SLOPE=0.001")
    args = ap.parse_args()
    from permsc_integrations.frontier import model

    for part in filter(None, args.model.split(",")):
        name, value = part.split("=")
        setattr(model, name, float(value))
    changes = {}
    for part in filter(None, args.set.split(",")):
        name, value = part.split("=")
        changes[name] = type(getattr(Settings(), name) or 0)(eval(value))  # noqa: S307
    queries = _dl19.load(args.queries)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.peers:
        run_peers(args.regimes.split(","), seeds, queries, args.peers)
        return
    if args.versus:
        versus(args.versus, seeds, queries, changes)
        return
    budgets: list[int | None] = (
        [None] if args.adaptive else [int(b) for b in args.budgets.split(",")]
    )
    for regime in args.regimes.split(","):
        for budget in budgets:
            began = time.perf_counter()
            r = evaluate(
                regime,
                seeds,
                queries,
                lambda seed, budget=budget: Settings(budget=budget, seed=seed, **changes),
            )
            print(  # noqa: T201
                f"{regime:16s} B={budget!s:5s} ndcg={r['ndcg']:.3f} calls={r['calls']:.1f} "
                f"rounds={r['rounds']:.1f} ({time.perf_counter() - began:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
