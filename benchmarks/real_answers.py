"""Real answers: top-10 of lists longer than a window, answered by the embedded Qwen2.5-Coder-1.5B.

WordSort lists of 30-60 words (the first 10 alphabetically) and MathSort lists of 30-60
expressions (the 10 smallest), drawn from the perm-sc data files by (task, ``--seed``, list
index; benchmarks/_real_lists.py), window 10. Every method reaches the model the same way:
an OpenAI-compatible loopback server (``BackendOpenAIServer``) in front of an
``AnswerStore`` in front of the embedded model, greedy, answers capped at 112 tokens:

- ``PSC blocks m=M`` (M = 1, 2, 3, 5; Kemeny): ``PSCRanker(num_permutations=M, top_k=10)``;
- ``PSC adaptive``: ``adaptive=True, top_k=10`` (cap m = 5);
- ``PSC sliding``: ``strategy="sliding"``, step 5, m = 1 (RankGPT's passes);
- ``PSC max_calls=B``: ``top_k=10, max_calls=B`` at each blocks method's and each peer's calls
  on that list (equal calls);
- the ``blitzrank`` peers (``BlitzRank`` and ``SlidingWindow`` at window 10) through LiteLLM at
  ``OPENAI_BASE_URL``, asked the task as a query (benchmarks/_real_lists.py ``QUERIES``).

PSC uses the paper's sorting prompts (``prompt="wordsort"``/``"mathsort"``), the peers their
own RankGPT prompt. ``--record`` fills the store from the model (resumable: a re-run asks only
what is missing); the default replays it (no model; a prompt not in the store fails the run,
naming its fingerprint), writes docs/results/real-answers.json, the "real answers" section of
docs/benchmarks.md and docs/img/real-answers.png. ``--held-out`` draws lists the saved run
never saw (from index 1000), which need ``--record``. Not part of CI.

The peers install offline into a folder of their own (benchmarks/_peer_methods.py)::

    pip install --no-deps --target /work/peers-site blitzrank loguru trueskill \
        pytrec-eval-terrier datasets dill multiprocess

    PYTHONPATH=/work/peers-site .venv/bin/python benchmarks/real_answers.py --record --lists 2
    PYTHONPATH=/work/peers-site .venv/bin/python benchmarks/real_answers.py --lists 2
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _real_lists as lists  # noqa: E402
from _real_report import is_reference, report  # noqa: E402

from permsc_integrations import PSCRanker, RetryPolicy  # noqa: E402
from permsc_integrations.cli._eval import sorting_max_tokens  # noqa: E402
from permsc_integrations.errors import ConfigurationError, PermscError  # noqa: E402
from permsc_integrations.testing import (  # noqa: E402
    AnswerMissingError,
    AnswerStore,
    BackendOpenAIServer,
    StoredBackend,
)

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "docs" / "results" / "real-answers.store.jsonl"
RESULTS = ROOT / "docs" / "results" / "real-answers.json"
WINDOW, TOP = 10, 10
FIXED: dict[str, dict[str, Any]] = {
    **{f"PSC blocks m={m}": {"num_permutations": m} for m in (1, 2, 3, 5)},
    "PSC adaptive": {"num_permutations": 5, "adaptive": True},
    "PSC sliding": {"strategy": "sliding", "num_permutations": 1, "step": 5},
}
PEERS = {"BlitzRank w=10": ("BlitzRank", {"window_size": 10}),
         "SlidingWindow w=10": ("SlidingWindow", {"window_size": 10, "step": 5})}
ORDER = ("PSC blocks m=1", "BlitzRank w=10", "PSC sliding", "SlidingWindow w=10", "PSC blocks m=2",
         "PSC blocks m=3", "PSC adaptive", "PSC blocks m=5")
SKIP_MISSING = False  # --skip-missing: leave out the rankings a cut recording lacks
REFERENCES = {n for n in ORDER if is_reference(n)}


def psc(server: BackendOpenAIServer, item: lists.RealList, seed: int, options: dict) -> list[int]:
    backend = {"base_url": server.base_url, "api_key": "none"}
    with PSCRanker(
        "openai:qwen2.5-coder-1.5b", backend_options=backend, prompt=item.task, seed=seed,
        window_size=WINDOW, top_k=TOP, max_tokens=sorting_max_tokens(WINDOW), timeout=None,
        max_concurrency=32, retry=RetryPolicy(max_total_time=None), **options,
    ) as ranker:
        return list(ranker.rank("", list(item.items)).order)


def peer(blitzrank: Any, name: str, item: lists.RealList, seed: int) -> list[int]:
    import _peer_methods

    cls, options = PEERS[name]
    ranker = getattr(blitzrank, cls)(**options)
    texts = list(item.items)
    return _peer_methods.rank(ranker, lists.QUERIES[item.task], texts, seed, TOP)


def measure(
    server: BackendOpenAIServer, store: AnswerStore, run: Any, key: dict
) -> dict | None:
    """One ranking's row: nDCG@10, calls, tokens and rounds as the server saw them; None for
    a ranking the store cannot replay whole, under ``--skip-missing`` (else an error)."""
    server.reset()
    item = key.pop("item")
    error = None
    try:
        order = run()
    except ConfigurationError:
        raise
    except PermscError as exc:  # a ranking with no usable answer: scores 0, keeps its error
        order, error = [], str(exc)[:200]
    except Exception:  # a peer's own error for a missing answer: reported below
        if not store.missing:
            raise
        order = []
    if store.missing:
        if not SKIP_MISSING:
            raise AnswerMissingError(store.missing[0], store.path)
        logging.getLogger("real_answers").warning(
            "%s on %s: not in the store (%d prompts missing), left out",
            key["method"], item.id, len(store.missing))
        store.missing.clear()
        return None
    ok = [r for r in server.records if r.outcome == "ok"]
    tokens = sum(_usage(server, r.request.index) for r in ok)
    row = {**key, "task": item.task, "list": item.id, "ndcg": lists.ndcg(order, item.keys, TOP),
           "calls": len(server.records), "tokens": tokens,
           "rounds": lists.rounds([(r.start, r.end) for r in server.records])}
    row |= {"error": error} if error else {}
    logging.getLogger("real_answers").warning("%s", json.dumps(row))
    return row


def _usage(server: BackendOpenAIServer, index: int) -> int:
    return server.usage.get(index, 0)


def rank_list(
    server, store, blitzrank, item: lists.RealList, seed: int, only: set[str] | None = None
) -> list[dict]:
    """Every method on one list, each reference (a blocks m, a peer) followed by PSC at its
    calls; the cheap ones first, so that a recording cut short keeps them."""
    rows: list[dict] = []
    for name in ORDER:
        if (name in PEERS and blitzrank is None) or (only and name not in only):
            continue
        if name in PEERS:
            run = lambda n=name: peer(blitzrank, n, item, seed)  # noqa: E731
        else:
            run = lambda o=FIXED[name]: psc(server, item, seed, o)  # noqa: E731
        row = measure(server, store, run, {"method": name, "item": item})
        if row is None:
            continue
        rows.append(row)
        budget, done = row["calls"], {r.get("budget") for r in rows}
        if name in REFERENCES and budget > 0 and budget not in done and (
            not only or "PSC max_calls" in only
        ):
            run = lambda b=budget: psc(server, item, seed, {"max_calls": b})  # noqa: E731
            key = {"method": "PSC max_calls", "budget": budget, "item": item}
            rows += filter(None, [measure(server, store, run, key)])
    return rows


def run(args: argparse.Namespace) -> list[dict]:
    mode = "record" if args.record else "replay"
    store = AnswerStore(args.store, mode=mode)
    model = None
    if args.record:
        from permsc_integrations.backends.local._embedded import embedded_backend

        model = embedded_backend(args.model, batch_size=args.batch_size)
    backend = StoredBackend(store, model, model=f"embedded:{args.model}")
    latency = 0.0 if args.record else args.latency
    blitzrank = None
    if not args.no_peers:
        import _peer_methods

        blitzrank = _peer_methods.setup()
    rows: list[dict] = []
    with store, BackendOpenAIServer(backend, max_tokens=sorting_max_tokens(WINDOW),
                                    latency=latency, batch_size=args.batch_size) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url  # LiteLLM's way there
        for index in range(args.start, args.start + args.lists):
            for task in args.tasks.split(","):
                [item] = lists.draw(task, 1, seed=args.seed, start=index,
                                    min_items=args.min_items, max_items=args.max_items)
                only = set(args.methods.split("|")) if args.methods else None
                rows += rank_list(server, store, blitzrank, item, args.seed + index, only)
                logging.getLogger("real_answers").warning(
                    "%s done: store %d answers, %d model calls", item.id, len(store),
                    backend.backend_calls)
    args.store_size = len(store)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", action="store_true", help="ask the model what the store lacks")
    ap.add_argument("--store", type=Path, default=STORE)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="the embedded model")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--tasks", default="wordsort,mathsort")
    ap.add_argument("--lists", type=int, default=2, help="lists per task")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="index of the first list")
    ap.add_argument("--held-out", action="store_true", help="lists from index 1000 (unsaved)")
    ap.add_argument("--min-items", type=int, default=30)
    ap.add_argument("--max-items", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.05, help="replay: seconds an answer")
    ap.add_argument("--methods", help="only these methods (names separated by |)")
    ap.add_argument("--skip-missing", action="store_true",
                    help="replay: leave out a ranking the store lacks, instead of failing")
    ap.add_argument("--no-peers", action="store_true", help="PSC only (no blitzrank needed)")
    ap.add_argument("--no-report", action="store_true", help="leave docs/ alone")
    args = ap.parse_args()
    if args.held_out:
        args.start += 1000
    global SKIP_MISSING
    SKIP_MISSING = args.skip_missing
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    for noisy in ("permsc_integrations", "LiteLLM", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    rows = run(args)
    if not args.no_report and not args.record:
        report(rows, args)


if __name__ == "__main__":
    main()
