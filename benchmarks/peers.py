"""The cost-quality frontier: PSC and the blitzrank peers against the simulated judge.

Every method ranks DL19's BM25 top-100 lists (the judge's hidden relevance is the qrels
grade, unjudged 0) through the judge's real loopback server: PSC through the ``openai``
backend, the peers (BlitzRank, SlidingWindow, SetWise, PairWise, TourRank, AcuRank, each at
its defaults and one other setting) through LiteLLM (``OPENAI_BASE_URL``). The judge counts
every call, its tokens and the sequential rounds (its logical clock; PSC's calls wait
``--latency`` seconds so a round's calls overlap, the peers' calls are sequential anyway).
Methods:

- ``PSC blocks m=M``, ``PSC adaptive``: PSCRanker today (blocks, Kemeny; adaptive with
  ``top_k=10``, cap m = 20);
- ``PSC frontier B=N``, ``PSC frontier adaptive``: issue 31's design
  (:mod:`permsc_integrations.frontier`) driven round by round here (parallel rounds of
  RankGPT windows through the same backend) until the strategies run it (phase 2).

Results are cached per (regime, seed, method, query) in ``--cache`` (JSONL), so a run
resumes and a re-run adds only what is missing (``--redo NAME`` drops a method's rows).
Writes the "frontier-http" section of docs/benchmarks.md and docs/img/frontier-http.png. Needs the
peers' environment (README of benchmarks/_peer_methods.py); not part of CI.

    /work/venvs/peers/bin/python benchmarks/peers.py --queries 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
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
from permsc_integrations.backends.base import GenerationSettings  # noqa: E402
from permsc_integrations.backends.openai import OpenAIBackend  # noqa: E402
from permsc_integrations.frontier.model import Answer  # noqa: E402
from permsc_integrations.frontier.policy import Frontier, Settings  # noqa: E402
from permsc_integrations.prompts import get_prompt  # noqa: E402
from permsc_integrations.testing import REGIMES, SimulatedJudge  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "docs" / "results" / "frontier.jsonl"
PLOT = ROOT / "docs" / "img" / "frontier-http.png"
BUDGETS = (4, 6, 9, 12, 13, 15, 26, 50)
PROMPT = get_prompt("rankgpt")

Ranker = Callable[[str, str, list[str], int], list[int]]  # (base_url, query, texts, seed)


def psc_today(**options: Any) -> Ranker:
    def rank(url: str, query: str, texts: list[str], seed: int) -> list[int]:
        backend = {"base_url": url, "api_key": "none"}
        with PSCRanker(
            "openai:judge", backend_options=backend, max_concurrency=1000, seed=seed, **options
        ) as ranker:
            return list(ranker.rank(query, texts).order)

    return rank


async def _frontier(url: str, query: str, texts: list[str], settings: Settings) -> list[int]:
    """Issue 31's policy, one parallel round of RankGPT windows at a time."""
    backend = OpenAIBackend("judge", base_url=url, api_key="none")
    policy = Frontier(len(texts), settings)
    try:
        while (windows := policy.next_round()) is not None:

            async def ask(window: tuple[int, ...]) -> Answer:
                messages = PROMPT.render(query, [texts[i] for i in window])
                done = await backend.acomplete(messages, GenerationSettings(temperature=0.0))
                ranking = PROMPT.parse(done.text, len(window)).ranking
                return Answer(window, tuple(window[p] for p in ranking))

            policy.observe(await asyncio.gather(*(ask(w) for w in windows)))
    finally:
        await backend.aclose()
    return list(policy.result().order)


def psc_frontier(budget: int | None) -> Ranker:
    def rank(url: str, query: str, texts: list[str], seed: int) -> list[int]:
        return asyncio.run(_frontier(url, query, texts, Settings(budget=budget, seed=seed)))

    return rank


def peer(make: Callable[[], Any]) -> Ranker:
    import _peer_methods

    def rank(url: str, query: str, texts: list[str], seed: int) -> list[int]:
        return _peer_methods.rank(make(), query, texts, seed)

    return rank


def methods(with_peers: bool) -> dict[str, tuple[Ranker, bool]]:
    """Name -> (ranker, whether its calls overlap: PSC's wait out the judge's latency)."""
    out: dict[str, tuple[Ranker, bool]] = {
        f"PSC blocks m={m}": (psc_today(num_permutations=m), True) for m in (1, 2, 5, 20)
    }
    out["PSC adaptive"] = (psc_today(num_permutations=20, adaptive=True, top_k=10), True)
    out |= {f"PSC frontier B={b}": (psc_frontier(b), True) for b in BUDGETS}
    out["PSC frontier adaptive"] = (psc_frontier(None), True)
    if with_peers:
        import _peer_methods

        blitzrank = _peer_methods.setup()
        out |= {n: (peer(make), False) for n, make in _peer_methods.peers(blitzrank).items()}
    return out


def run(args: argparse.Namespace) -> None:
    """Every method on every query, regime and seed not in the cache yet."""
    queries = _dl19.load(args.queries)
    table = methods(not args.no_peers)
    rows = [json.loads(line) for line in args.cache.open()] if args.cache.exists() else []
    rows = [r for r in rows if r["key"][2] not in args.redo]
    done = {tuple(r["key"]) for r in rows}
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    args.cache.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with args.cache.open("a") as out:
        for regime in args.regimes.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                judge = SimulatedJudge(REGIMES[regime], seed=seed)
                docs = {q.qid: judge.documents(q.texts, q.grades, group=q.qid) for q in queries}
                with judge.serve() as server:
                    os.environ["OPENAI_BASE_URL"] = server.base_url  # LiteLLM's way there
                    for name, (rank, overlap) in table.items():
                        if args.only and name not in args.only.split("|"):
                            continue
                        judge.latency = args.latency if overlap else 0.0
                        todo = [q for q in queries if (regime, seed, name, q.qid) not in done]
                        for q in todo:
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
        if qid in qids:
            found.setdefault((regime, name), []).append(row)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (regime, name), rows in found.items():
        stats = {
            k: statistics.fmean(r[k] for r in rows) for k in ("ndcg", "calls", "tokens", "rounds")
        }
        out.setdefault(regime, {})[name] = {**stats, "runs": len(rows)}
    return out


def report(results: dict[str, dict[str, dict[str, float]]], args: argparse.Namespace) -> None:
    lines = [
        f"DL19 BM25 top-100, {args.queries} queries, judge seeds {args.seeds}; nDCG@10 against "
        "the qrels grades (ideal from the list); calls, tokens (prompt + completion, as the "
        "judge counts them) and sequential rounds per query, means. PSC today: blocks, Kemeny. "
        "PSC frontier: issue 31's policy (budget B = max calls; adaptive: top_k = 10, cap "
        "120). Peers: blitzrank 0.1.0 through LiteLLM. The plot: docs/img/frontier-http.png.",
        "",
    ]
    for regime, by_method in results.items():
        lines += [
            f"**{regime}**",
            "",
            "| method | calls | rounds | tokens | nDCG@10 | runs |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, r in sorted(by_method.items(), key=lambda kv: kv[1]["calls"]):
            lines.append(
                f"| {name} | {r['calls']:.1f} | {r['rounds']:.1f} | "
                f"{r['tokens']:.0f} | {r['ndcg']:.3f} | {r['runs']:.0f} |"
            )
        lines.append("")
    write_section(
        "frontier-http", "## The frontier over HTTP (benchmarks/peers.py)\n\n" + "\n".join(lines)
    )
    plot(results)


def plot(results: dict[str, dict[str, dict[str, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4.2), squeeze=False)
    for ax, (regime, by_method) in zip(axes[0], results.items(), strict=True):
        for family, style in (("PSC frontier", "o-"), ("PSC blocks", "s--"), ("", "^")):
            points = sorted(
                (r["calls"], r["ndcg"], n)
                for n, r in by_method.items()
                if (n.startswith(family) if family else not n.startswith("PSC"))
                and "adaptive" not in n
            )
            if family:
                ax.plot([p[0] for p in points], [p[1] for p in points], style, label=family)
            else:
                for x, y, n in points:
                    ax.plot(x, y, style, color="tab:red")
                    ax.annotate(n, (x, y), fontsize=6, xytext=(3, -3), textcoords="offset points")
        for n, r in by_method.items():
            if "adaptive" in n:
                ax.plot(r["calls"], r["ndcg"], "*", markersize=10, label=n)
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
    ap.add_argument("--regimes", default=",".join(REGIMES))
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
