"""What the embedded Qwen2.5-Coder-1.5B answers, by window size (issue 39 item 4).

One window of ``w`` items (w = 5, 10, 15, 20), shuffled ``--shuffles`` times, for ``--lists``
WordSort and MathSort lists the real-answer benchmark never ranks (benchmarks/_real_lists.py,
from index 500), through the same loopback server as benchmarks/real_answers.py, in front of
an answer store of its own (docs/results/window-sizes.store.jsonl; greedy; ``--record`` asks
the model what the store lacks, the default replays). Per window size: the share of answers
that are sound (read, neither a copy of the order shown nor fewer than half the items:
:func:`permsc_integrations.results.answer_defect`), echoed, reversed, sparse, or not read at
all; the
share of the window an answer names; its Kendall tau to the true order over the items it
names. Writes docs/benchmarks.md "window sizes". Not part of CI.

    python benchmarks/window_sizes.py --record   # the model (minutes)
    python benchmarks/window_sizes.py            # replay
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _real_lists as lists  # noqa: E402
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker, RetryPolicy  # noqa: E402
from permsc_integrations.cli._eval import sorting_max_tokens  # noqa: E402
from permsc_integrations.testing import AnswerStore, BackendOpenAIServer, StoredBackend  # noqa: E402

STORE = Path(__file__).resolve().parents[1] / "docs" / "results" / "window-sizes.store.jsonl"
SIZES = (5, 10, 15, 20)


def answers(server: BackendOpenAIServer, item: lists.RealList, size: int, shuffles: int, seed: int):
    """The samples of one window of the list's first ``size`` items, ``shuffles`` orders."""
    backend = {"base_url": server.base_url, "api_key": "none"}
    with PSCRanker(
        "openai:qwen2.5-coder-1.5b", backend_options=backend, prompt=lists.PROMPTS[item.task],
        seed=seed,
        window_size=size, num_permutations=shuffles, max_tokens=sorting_max_tokens(size),
        timeout=None, retry=RetryPolicy(max_total_time=None), max_concurrency=32,
    ) as ranker:
        return ranker.rank("", list(item.items[:size])).samples


def row(task: str, size: int, answered: list[tuple[Any, tuple]]) -> dict:
    """One table row over ``answered`` (each sample with its own list's keys): the shares of
    sound, echoed, reversed, sparse and unread answers; the share of the window named; tau."""
    samples = [s for s, _ in answered]
    n = len(samples)
    taus = [_tau(s.ranking, keys) for s, keys in answered if s.ok and len(s.ranking) >= 2]
    return {
        "task": task, "size": size, "answers": n,
        "sound": sum(1 for s in samples if s.ok and s.defect is None) / n,
        "echo": sum(1 for s in samples if s.defect == "echo") / n,
        "reversed": sum(1 for s in samples if s.defect == "reversed") / n,
        "sparse": sum(1 for s in samples if s.defect == "sparse") / n,
        "unread": sum(1 for s in samples if not s.ok) / n,
        "named": statistics.fmean(len(s.ranking) / size for s in samples),
        "tau": statistics.fmean(taus) if taus else float("nan"),
    }


def _tau(ranking, keys) -> float:
    """Kendall tau of ``ranking`` (items, best first) to the order of their keys (smallest
    first; tied keys count neither way)."""
    score = pairs = 0
    for a, x in enumerate(ranking):
        for y in ranking[a + 1 :]:
            pairs += 1
            score += (keys[x] < keys[y]) - (keys[x] > keys[y])
    return score / pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--store", type=Path, default=STORE)
    ap.add_argument("--lists", type=int, default=6, help="lists per task")
    ap.add_argument("--shuffles", type=int, default=2)
    ap.add_argument("--tasks", default="wordsort,mathsort")
    args = ap.parse_args()
    store = AnswerStore(args.store, mode="record" if args.record else "replay")
    model = None
    if args.record:
        from permsc_integrations.backends.local._embedded import embedded_backend

        model = embedded_backend("qwen2.5-coder-1.5b", batch_size=8)
    backend = StoredBackend(store, model, model="embedded:qwen2.5-coder-1.5b")
    rows = []
    with store, BackendOpenAIServer(backend, max_tokens=sorting_max_tokens(max(SIZES)),
                                    latency=0.0, batch_size=8) as server:
        for task in args.tasks.split(","):
            drawn = lists.draw(task, args.lists, seed=0, start=500, min_items=20, max_items=20)
            for size in SIZES:
                answered = [
                    (sample, item.keys)
                    for index, item in enumerate(drawn)
                    for sample in answers(server, item, size, args.shuffles, 500 + index)
                ]
                rows.append(row(task, size, answered))
    write_section("window sizes", _table(rows, args))


def _table(rows: list[dict], args: argparse.Namespace) -> str:
    head = (
        "## What the embedded 1.5B model answers, by window size (benchmarks/window_sizes.py)\n\n"
        f"One window of the first w items of {args.lists} lists a task (20 items each, from "
        f"index 500: lists the real-answer benchmark never ranks), {args.shuffles} shuffles "
        "each, greedy, through the answer store. *sound*: read, neither a copy of the order "
        "shown (an echo, or reversed) nor fewer than half the items; *named*: the share of "
        "the window an answer names; *tau*: Kendall tau to the true order over the items it "
        "names (read answers)."
        "\n\n| task | window | answers | sound | echo | reversed | sparse | unread | named "
        "| tau |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    body = "".join(
        f"| {r['task']} | {r['size']} | {r['answers']} | {r['sound']:.0%} | {r['echo']:.0%} | "
        f"{r['reversed']:.0%} | {r['sparse']:.0%} | {r['unread']:.0%} | {r['named']:.2f} | "
        f"{r['tau']:.3f} |\n"
        for r in rows
    )
    return head + body


if __name__ == "__main__":
    main()
