"""The runs behind benchmarks/frontier_sim.py: the frontier policy, PSC today (PSCRanker's
blocks) and the blitzrank peers, each against the simulated judge in process, in a regime
(benchmarks/_frontier_regimes.py), one row per (regime, judge seed, method, query).

The judge answers in process; listwise answers are garbled as the regime says (the policy's
answers, PSC today's and the peers' alike). Peers and PSC today are slow, so their rows are
cached in a JSON Lines file (resumable); the policy's are recomputed (milliseconds a round).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import _dl19
from _frontier_regimes import ALL, Regime

from permsc_integrations.strategies._frontier.model import Answer
from permsc_integrations.strategies._frontier.policy import Frontier, Settings
from permsc_integrations.testing import ChatRequest, Fault, Reply, SimulatedJudge, hidden_keys

Row = dict[str, Any]
PEERS = (
    "SlidingWindow rank_end=50",
    "BlitzRank",
    "SlidingWindow",
    "AcuRank hc=8",
    "BlitzRank w=10",
    "TourRank",
    "AcuRank",
    "TourRank R2",
)
"""The peers run in every regime: the methods at 4-30 calls (SetWise at 40-130 calls and
PairWise at 280-450 are far below PSC's fixed m = 20 in every regime phase 1 ran)."""
PSC_TODAY = {"blocks m=1": 1, "blocks m=2": 2, "blocks m=20": 20}
_LISTWISE = re.compile(r"^\s*(\[\d+\]\s*>\s*)+\[\d+\]\s*$")


class Judged:
    """One regime's judge (seeded) and its lists, the documents registered."""

    def __init__(self, regime: Regime, seed: int, count: int | None) -> None:
        self.regime, self.seed = regime, seed
        self.judge = SimulatedJudge(regime.judge, seed=seed, latency=0.0)
        self.lists = regime.lists(count, seed)
        self.texts: dict[str, list[str]] = {}
        self.keys: dict[str, list[int]] = {}
        for q in self.lists:
            self.texts[q.qid] = self.judge.documents(q.texts, q.grades, group=q.qid)
            self.keys[q.qid] = [hidden_keys(t)[0] for t in self.texts[q.qid]]

    def ndcg(self, q: _dl19.Query, order: Iterable[int]) -> float:
        return q.ndcg(list(order), k=self.regime.k)

    def ask(self, q: _dl19.Query, window: tuple[int, ...]) -> Answer:
        """The judge's answer to ``window`` (items of ``q`` in prompt order), garbled."""
        prompt = f"{q.qid}|{window}"
        positions, _ = self.judge.judge([self.keys[q.qid][i] for i in window], prompt)
        positions = self.regime.garble.apply(positions, f"{self.seed}|{prompt}")
        return Answer(window, tuple(window[p] for p in positions))

    async def respond(self, request: ChatRequest) -> Reply | Fault:
        """The judge's responder, its listwise answers garbled (PSC today, the peers)."""
        reply = await self.judge.respond(request)
        if isinstance(reply, Reply) and _LISTWISE.match(reply.text):
            labels = re.findall(r"\[\d+\]", reply.text)
            kept = self.regime.garble.apply(labels, f"{self.seed}|{request.text}")
            return Reply(" > ".join(kept))
        return reply


def frontier(judged: Judged, q: _dl19.Query, settings: Settings) -> Row:
    """One policy run on one list."""
    policy = Frontier(len(q.texts), settings)
    while (windows := policy.next_round()) is not None:
        policy.observe([judged.ask(q, w) for w in windows])
    result = policy.result()
    return {
        "ndcg": judged.ndcg(q, result.order),
        "calls": policy.calls,
        "rounds": policy.rounds,
        "stopped": result.stopped,
    }


def _cached(cache: Path) -> set[tuple]:
    if not cache.exists():
        return set()
    return {tuple(json.loads(line)["key"]) for line in cache.open() if line.strip()}


def run_peers(regimes: list[str], seeds: list[int], count: int | None, cache: Path) -> None:
    """Every peer of :data:`PEERS` in process (the peers' environment), into ``cache``."""
    import _peer_methods

    blitzrank = _peer_methods.setup()
    makers = _peer_methods.peers(blitzrank)
    done = _cached(cache)
    with cache.open("a") as out:
        for regime in regimes:
            for seed in seeds:
                judged = Judged(ALL[regime], seed, count)
                _peer_methods.in_process(judged)  # type: ignore[arg-type]  # its respond
                for name in PEERS:
                    for q in judged.lists:
                        key = [regime, seed, name, q.qid]
                        if tuple(key) in done:
                            continue
                        judged.judge.reset()
                        order = _peer_methods.rank(
                            makers[name](), q.query, judged.texts[q.qid], seed, top=judged.regime.k
                        )
                        out.write(json.dumps(_row(key, judged, q, order)) + "\n")
                    out.flush()


def run_psc_today(regimes: list[str], seeds: list[int], count: int | None, cache: Path) -> None:
    """PSCRanker's blocks at m = 1, 2, 20 (Kemeny) in process, into ``cache``."""
    import logging

    from permsc_integrations import PSCRanker
    from permsc_integrations.testing import ScriptedBackend

    logging.disable(logging.WARNING)
    done = _cached(cache)
    with cache.open("a") as out:
        for regime in regimes:
            for seed in seeds:
                judged = Judged(ALL[regime], seed, count)
                for name, m in PSC_TODAY.items():
                    for q in judged.lists:
                        key = [regime, seed, name, q.qid]
                        if tuple(key) in done:
                            continue
                        judged.judge.reset()
                        with PSCRanker(
                            ScriptedBackend(judged.respond),
                            num_permutations=m,
                            max_concurrency=1000,
                            seed=seed,
                        ) as ranker:
                            order = ranker.rank(q.query, judged.texts[q.qid]).order
                        out.write(json.dumps(_row(key, judged, q, order)) + "\n")
                    out.flush()


def _row(key: list, judged: Judged, q: _dl19.Query, order: Iterable[int]) -> Row:
    stats = judged.judge.stats(q.qid)
    return {
        "key": key,
        "ndcg": judged.ndcg(q, order),
        "calls": stats.calls,
        "rounds": stats.rounds,
    }


def load_rows(caches: Iterable[Path]) -> dict[tuple[str, str], dict[tuple[int, str], Row]]:
    """(regime, method) -> (seed, qid) -> row, from every cache."""
    out: dict[tuple[str, str], dict[tuple[int, str], Row]] = {}
    for cache in caches:
        if not cache.exists():
            continue
        for line in cache.open():
            if line.strip():
                row = json.loads(line)
                regime, seed, name, qid = row["key"]
                out.setdefault((regime, name), {})[(seed, qid)] = row
    return out


def mean(rows: Iterable[Row], field: str) -> float:
    return statistics.fmean(r[field] for r in rows)
