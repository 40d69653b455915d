"""Ray at a call budget: 1,000 queries x m = 5 against a server that answers in L = 1 s.

The bound is calls x L / budget (5,000 x 1 s / 200 = 25 s): no schedule can do better with 200
calls in flight. Measured: the wall time from ``ray.init()`` to the last row (Ray's start-up
included) of ``rank_rows`` (Ray actors, the engine of ``permsc rank --engine ray``) and of
``rank_dataset`` (Ray Data), and, side by side, one process ranking the same rows with
``PSCRanker.rank_many`` at the same budget. Efficiency = bound / wall.

Run: ``.venv/bin/python benchmarks/ray_scale.py`` (about 2 minutes; ``--queries 200`` for a
quick look). The server runs in a process of its own.
Writes the "ray" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker, RankRequest  # noqa: E402
from permsc_integrations.testing import Reply, ScriptedOpenAIServer, oracle_responder  # noqa: E402


def rows(n: int) -> list[dict]:
    return [
        {"query": f"q{k}", "items": [f"item {k} {'x' * j}" for j in range(5)]} for k in range(n)
    ]


def on_ray(url: str, data: list[dict], args: argparse.Namespace) -> tuple[float, int]:
    import ray

    from permsc_integrations.ray import rank_dataset

    began = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    ranked = rank_dataset(
        ray.data.from_items(data),
        backend="openai:bench",
        num_permutations=args.m,
        max_concurrency=args.budget,
        backend_options={"base_url": url},
        concurrency=args.actors,
        batch_size=args.batch,
        batches_per_actor=args.batches,
    )
    out = ranked.take_all()
    wall = time.perf_counter() - began
    ray.shutdown()
    return wall, sum(r["error"] is not None for r in out)


def on_ray_rows(url: str, data: list[dict], args: argparse.Namespace) -> tuple[float, int]:
    import ray

    from permsc_integrations.ray._rows import rank_rows

    began = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    rows = rank_rows(
        [RankRequest(r["query"], r["items"]) for r in data],
        backend="openai:bench",
        num_permutations=args.m,
        max_concurrency=args.budget,
        backend_options={"base_url": url},
        concurrency=args.actors,
        batch_size=args.batch,
        batches_per_actor=args.batches,
    )
    failed = sum(row.error is not None for row in rows)
    wall = time.perf_counter() - began
    ray.shutdown()
    return wall, failed


def one_process(url: str, data: list[dict], args: argparse.Namespace) -> tuple[float, int]:
    began = time.perf_counter()
    with PSCRanker(
        "openai:bench",
        num_permutations=args.m,
        max_concurrency=args.budget,
        backend_options={"base_url": url},
    ) as ranker:
        out = ranker.rank_many(
            [RankRequest(r["query"], r["items"]) for r in data], return_exceptions=True
        )
    return time.perf_counter() - began, sum(isinstance(o, BaseException) for o in out)


ENGINES = {
    "ray": ("Ray Data, rank_dataset (start-up included)", on_ray),
    "rows": ("Ray actors, rank_rows (start-up included)", on_ray_rows),
    "one": ("one process (rank_many)", one_process),
}


@contextmanager
def server_process(responder: Callable[[Any], Reply]) -> Iterator[str]:
    """The scripted server in a process of its own, as a real server is: in the benchmark's
    process its thread and the client's would take turns on one GIL (5 ms switches), which
    measured the GIL rather than the engine."""
    ctx = multiprocessing.get_context("fork")  # the responder is a closure: inherit it
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(responder, child), daemon=True)
    proc.start()
    try:
        yield parent.recv()
    finally:
        proc.terminate()
        proc.join(5)


def _serve(responder: Callable[[Any], Reply], conn: Any) -> None:
    with ScriptedOpenAIServer(responder) as server:
        conn.send(server.base_url)
        threading.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("-m", type=int, default=5)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--actors", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument(
        "--engines", default="rows,ray,one", help="rows (rank_rows), ray (rank_dataset), one"
    )
    args = ap.parse_args()
    data = rows(args.queries)
    calls = args.queries * args.m
    bound = calls * args.latency / args.budget
    oracle = oracle_responder(lambda text: text.count("x"))
    lines = [
        f"{args.queries} queries x m = {args.m} ({calls} calls), L = {args.latency} s, a budget "
        f"of {args.budget} calls in flight: bound = {bound:.1f} s. Ray: {args.actors} actors, "
        f"batches of {args.batch} rows, {args.batches} batches per actor at once.",
        "",
        "| engine | wall (s) | bound / wall | failed rows |",
        "| --- | ---: | ---: | ---: |",
    ]
    with server_process(lambda r: Reply(oracle(r).text, delay=args.latency)) as url:
        for name, run in (ENGINES[e] for e in args.engines.split(",")):
            wall, failed = run(url, data, args)
            lines.append(f"| {name} | {wall:.1f} | {bound / wall:.0%} | {failed} |")
            sys.stdout.write(lines[-1] + "\n")
            sys.stdout.flush()
    write_section("ray", "\n".join(lines))


if __name__ == "__main__":
    main()
