"""The cost-quality frontier: PSCRanker and the blitzrank peers against the simulated judge.

Every method ranks DL19's BM25 top-100 lists (the judge's hidden relevance is the qrels
grade, unjudged 0) through the judge's real loopback server: PSC through ``PSCRanker`` and
its ``openai`` backend, the peers (BlitzRank, SlidingWindow, SetWise, TourRank, AcuRank, each
at its defaults and one other setting) through LiteLLM (``OPENAI_BASE_URL``). The judge counts
every call, its tokens and the sequential rounds (its logical clock; PSC's calls wait
``--latency`` seconds so a round's calls overlap, the peers' calls are sequential anyway).
Methods:

- ``PSC blocks m=M``: ``PSCRanker(num_permutations=M)`` (blocks, Kemeny);
- ``PSC max_calls=B``: ``PSCRanker(top_k=10, max_calls=B)`` at each peer's own budget,
  B = floor(the peer's mean calls) in that regime (issue 31: the frontier policy's rounds);
- ``PSC adaptive``: ``PSCRanker(adaptive=True, top_k=10)`` (cap: m = 20's 120 calls);
- ``PSC sliding max_calls=B``: ``strategy="sliding"`` sharing B over its windows (B = 4: the
  first-stage top 50, as RankGPT's ``rank_end=50``; 9: one pass; 18: two shuffles a window);
- ``PSC max_total_tokens=T``: ``PSCRanker(top_k=10, max_total_tokens=T)`` at each peer's own
  mean tokens (floor; prompt + completion, as the judge counts them), and ``PSC w=10
  max_total_tokens=T`` the same with ``window_size=10`` (issue 39: equal tokens).

Regimes: the judge's three (``testing.REGIMES``) and ``window-noisy`` (mild, but its noise
grows with the prompt's length: ``window_noise=1.5``, twice as noisy at 16 documents as at 10;
written down before any run, never tuned on).

PairWise (heapsort, 318-445 sequential calls a query) is left out: m = 20 is above it
(docs/benchmarks.md "frontier-sim"). Results are cached per (regime, seed, method, query) in
``--cache`` (JSONL), so a run resumes and a re-run adds only what is missing (``--redo NAME``
drops a method's rows; the peers are cached, so PSC alone can be rerun without their
environment: ``--no-peers``). Writes the "frontier" section of docs/benchmarks.md and
docs/img/frontier.png. Needs the peers' environment (README of benchmarks/_peer_methods.py);
not part of CI.

    OPENBLAS_NUM_THREADS=1 /work/venvs/peers/bin/python benchmarks/peers.py --queries 20
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _dl19  # noqa: E402
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.testing import REGIMES, SimulatedJudge  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "docs" / "results" / "frontier.jsonl"
PLOT = ROOT / "docs" / "img" / "frontier.png"
LEFT_OUT = ("PairWise",)
JUDGES = {**REGIMES, "window-noisy": REGIMES["mild"].but(noise=0.7, window_noise=1.5)}

Ranker = Callable[[str, str, list[str], int], list[int]]  # (base_url, query, texts, seed)


def psc(**options: Any) -> Ranker:
    def rank(url: str, query: str, texts: list[str], seed: int) -> list[int]:
        backend = {"base_url": url, "api_key": "none"}
        with PSCRanker(
            "openai:judge", backend_options=backend, max_concurrency=1000, seed=seed, **options
        ) as ranker:
            return list(ranker.rank(query, texts).order)

    return rank


def peer(make: Callable[[], Any]) -> Ranker:
    import _peer_methods

    def rank(url: str, query: str, texts: list[str], seed: int) -> list[int]:
        return _peer_methods.rank(make(), query, texts, seed)

    return rank


def fixed_methods(with_peers: bool) -> dict[str, tuple[Ranker, bool]]:
    """Name -> (ranker, whether its calls overlap: PSC's wait out the judge's latency)."""
    out: dict[str, tuple[Ranker, bool]] = {
        f"PSC blocks m={m}": (psc(num_permutations=m), True) for m in (1, 2, 5, 20)
    }
    out["PSC adaptive"] = (psc(num_permutations=20, adaptive=True, top_k=10), True)
    for b in (4, 9, 18):  # sliding windows sharing a budget (below 9: the first-stage head)
        out[f"PSC sliding max_calls={b}"] = (psc(strategy="sliding", top_k=10, max_calls=b), True)
    if with_peers:
        import _peer_methods

        blitzrank = _peer_methods.setup()
        made = _peer_methods.peers(blitzrank).items()
        out |= {n: (peer(make), False) for n, make in made if n not in LEFT_OUT}
    return out


def peer_budgets(rows: list[dict], regime: str, of: str = "calls") -> dict[str, int]:
    """Each peer's budget in ``regime``: the floor of its mean calls (``of``: or tokens) a
    query."""
    spent: dict[str, list[int]] = {}
    for row in rows:
        if row["key"][0] == regime and not row["key"][2].startswith("PSC"):
            spent.setdefault(row["key"][2], []).append(row[of])
    return {name: math.floor(statistics.fmean(c)) for name, c in spent.items()}


def run(args: argparse.Namespace) -> None:
    """Every method on every query, regime and seed not in the cache yet: the fixed ones
    and the peers first, then PSC at each peer's budget."""
    queries = _dl19.load(args.queries)
    table = fixed_methods(not args.no_peers)
    rows = [json.loads(line) for line in args.cache.open()] if args.cache.exists() else []
    rows = [r for r in rows if r["key"][2] not in args.redo]
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    args.cache.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for regime in args.regimes.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            _run_regime(args, queries, table, regime, seed)


def _run_regime(args: argparse.Namespace, queries: list, table: dict, regime: str, seed: int):
    judge = SimulatedJudge(JUDGES[regime], seed=seed)
    docs = {q.qid: judge.documents(q.texts, q.grades, group=q.qid) for q in queries}
    with judge.serve() as server, args.cache.open("a") as out:
        os.environ["OPENAI_BASE_URL"] = server.base_url  # LiteLLM's way there
        _methods(args, queries, judge, server, docs, table, regime, seed, out)
        rows = [json.loads(line) for line in args.cache.open()]
        budgets = sorted(set(peer_budgets(rows, regime).values()))
        more = {f"PSC max_calls={b}": (psc(top_k=10, max_calls=b), True) for b in budgets}
        for t in sorted(set(peer_budgets(rows, regime, "tokens").values())):
            more[f"PSC max_total_tokens={t}"] = (psc(top_k=10, max_total_tokens=t), True)
            at10 = psc(top_k=10, window_size=10, max_total_tokens=t)
            more[f"PSC w=10 max_total_tokens={t}"] = (at10, True)
        _methods(args, queries, judge, server, docs, more, regime, seed, out)


def _methods(args, queries, judge, server, docs, table, regime, seed, out) -> None:
    done = {tuple(json.loads(line)["key"]) for line in args.cache.open()}
    for name, (rank, overlap) in table.items():
        if args.only and name not in args.only.split("|"):
            continue
        judge.latency = args.latency if overlap else 0.0
        for q in [q for q in queries if (regime, seed, name, q.qid) not in done]:
            order = rank(server.base_url, q.query, docs[q.qid], seed)
            out.write(_row(judge, q, order, [regime, seed, name]))
            out.flush()


def _row(judge: SimulatedJudge, q: _dl19.Query, order: list[int], key: list) -> str:
    """One run's JSON line (the judge's counts for the query, then reset)."""
    st = judge.stats(q.qid)
    judge.reset()
    tokens = st.prompt_tokens + st.completion_tokens
    row = {"key": [*key, q.qid], "ndcg": q.ndcg(order), "calls": st.calls, "rounds": st.rounds}
    return json.dumps({**row, "tokens": tokens}) + "\n"


def summary(cache: Path, queries: int) -> dict[str, dict[str, dict[str, float]]]:
    """regime -> method -> mean nDCG@10, calls, tokens, rounds (over seeds and queries)."""
    qids = {q.qid for q in _dl19.load(queries)}
    found: dict[tuple[str, str], list[dict]] = {}
    for line in cache.open():
        row = json.loads(line)
        regime, _, name, qid = row["key"]
        if qid in qids and name not in LEFT_OUT:
            found.setdefault((regime, name), []).append(row)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (regime, name), rows in found.items():
        stats = {
            k: statistics.fmean(r[k] for r in rows) for k in ("ndcg", "calls", "tokens", "rounds")
        }
        out.setdefault(regime, {})[name] = {**stats, "runs": len(rows)}
    return out


def versus_tokens(by_method: dict[str, dict[str, float]]) -> list[str]:
    """Each peer against PSC at its mean tokens (target: PSC >= peer - 0.005)."""
    lines = [
        "| peer | peer tokens | peer nDCG@10 | PSC tokens (w=20) | PSC nDCG@10 | "
        "PSC w=10 tokens | PSC w=10 nDCG@10 | |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    peers = {n: r for n, r in by_method.items() if not n.startswith("PSC")}
    for name, p in sorted(peers.items(), key=lambda kv: kv[1]["tokens"]):
        t = math.floor(p["tokens"])
        ours, at10 = (by_method.get(f"PSC{w} max_total_tokens={t}") for w in ("", " w=10"))
        if ours is None or at10 is None:
            continue
        verdict = "ok" if ours["ndcg"] >= p["ndcg"] - 0.005 else "SHORT"
        lines.append(
            f"| {name} | {p['tokens']:.0f} | {p['ndcg']:.3f} | {ours['tokens']:.0f} | "
            f"{ours['ndcg']:.3f} | {at10['tokens']:.0f} | {at10['ndcg']:.3f} | {verdict} |"
        )
    return lines


def versus(by_method: dict[str, dict[str, float]]) -> list[str]:
    """Each peer against PSC at its budget (target: PSC >= peer - 0.005)."""
    lines = [
        "| peer | peer calls = rounds | peer nDCG@10 | PSC max_calls | PSC calls | PSC rounds "
        "| PSC tokens | PSC nDCG@10 | |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    peers = {n: r for n, r in by_method.items() if not n.startswith("PSC")}
    for name, p in sorted(peers.items(), key=lambda kv: kv[1]["calls"]):
        budget = math.floor(p["calls"])
        ours = by_method.get(f"PSC max_calls={budget}")
        if ours is None:
            continue
        verdict = "ok" if ours["ndcg"] >= p["ndcg"] - 0.005 else "SHORT"
        lines.append(
            f"| {name} | {p['calls']:.1f} | {p['ndcg']:.3f} | {budget} | {ours['calls']:.1f} | "
            f"{ours['rounds']:.1f} | {ours['tokens']:.0f} | {ours['ndcg']:.3f} | {verdict} |"
        )
    return lines


def report(results: dict[str, dict[str, dict[str, float]]], args: argparse.Namespace) -> None:
    lines = [
        f"`PSCRanker` as shipped against the `blitzrank` peers (0.1.0, through LiteLLM) on the "
        f"simulated judge (docs/judge.md), over HTTP: DL19 BM25 top-100, {args.queries} "
        f"queries, judge seeds {args.seeds}; nDCG@10 against the qrels grades (ideal from the "
        "list); calls, tokens (prompt + completion, as the judge counts them) and sequential "
        "rounds a query, means. PSC max_calls=B: `PSCRanker(top_k=10, max_calls=B)` at each "
        "peer's own budget B = floor(its mean calls) (the frontier policy's rounds, at most "
        "4); PSC adaptive: `PSCRanker(adaptive=True, top_k=10)` (the frontier's adaptive "
        "rounds, cap 120 calls: blocks at m = 20); PSC blocks m=M: `num_permutations=M`; PSC "
        "max_total_tokens=T: `PSCRanker(top_k=10, max_total_tokens=T)` at each peer's own mean "
        "tokens T (floor), at the default window of 20 and at `window_size=10`. A "
        "peer's calls are sequential (rounds = calls). Target: PSC >= peer - 0.005. The plot: "
        "docs/img/frontier.png.",
        "",
    ]
    for regime, by_method in results.items():
        lines += [f"**{regime}**", "", *versus(by_method), "", *versus_tokens(by_method), ""]
        lines += [
            "| method | calls | rounds | tokens | nDCG@10 | runs |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, r in sorted(by_method.items(), key=lambda kv: (kv[1]["calls"], kv[0])):
            lines.append(
                f"| {name} | {r['calls']:.1f} | {r['rounds']:.1f} | "
                f"{r['tokens']:.0f} | {r['ndcg']:.3f} | {r['runs']:.0f} |"
            )
        lines.append("")
    body = "## The cost-quality frontier (issue 31; benchmarks/peers.py)\n\n" + "\n".join(lines)
    write_section("frontier", body)
    plot(results)


def plot(results: dict[str, dict[str, dict[str, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.2), squeeze=False)
    for ax, (regime, by_method) in zip(axes[0], results.items(), strict=True):
        families = (("PSC max_calls", "o-"), ("PSC blocks", "s--"), ("PSC sliding", "d:"))
        for family, style in (*families, ("", "^")):
            points = sorted(
                (r["calls"], r["ndcg"], n)
                for n, r in by_method.items()
                if (n.startswith(family) if family else not n.startswith("PSC"))
            )
            if family:
                ax.plot([p[0] for p in points], [p[1] for p in points], style, label=family)
            else:
                for x, y, n in points:
                    ax.plot(x, y, style, color="tab:red")
                    ax.annotate(n, (x, y), fontsize=6, xytext=(3, -3), textcoords="offset points")
        if "PSC adaptive" in by_method:
            r = by_method["PSC adaptive"]
            ax.plot(r["calls"], r["ndcg"], "*", markersize=11, label="PSC adaptive (top 10)")
        ax.set_xscale("log")
        ax.set_title(regime)
        ax.set_xlabel("calls per query (log)")
        ax.set_ylabel("nDCG@10")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--regimes", default=",".join(JUDGES))
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per PSC call")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--only", help="method names separated by |")
    ap.add_argument("--redo", default="", help="method names (|) whose cached rows to drop")
    ap.add_argument("--no-peers", action="store_true", help="PSC only (no blitzrank needed)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    args.redo = set(filter(None, args.redo.split("|")))
    logging.disable(logging.WARNING)  # Kemeny's "approximate" notes, LiteLLM's chatter
    if not args.report_only:
        run(args)
    report(summary(args.cache, args.queries), args)


if __name__ == "__main__":
    main()
