"""``permsc rank --engine ray``: the same records as the single process, ranked by Ray Data.

Ray starts on this machine (or joins ``--ray-address``); the queries become a dataset whose rows
are ranked by ``--actors`` actors sharing ``--max-concurrency`` calls in flight
(:mod:`permsc_integrations.ray`). Seeds derive from each row's content, so the output equals the
single-process ``permsc rank`` for the same options; rows come back in any order and are
written in input order.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from ..results import RankingResult, Usage, scores_from_order
from ._common import Query, backend_spec, one_line, report
from .rank_records import to_json

__all__ = ["rank_queries_on_ray"]


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.base_url:
        options["base_url"] = args.base_url
    if args.device:
        options["device"] = args.device
    return options


def _result(row: dict[str, Any]) -> RankingResult:
    order = tuple(row["order"])
    usage = Usage(**{k: int(v) for k, v in row["usage"].items()})
    return RankingResult(order, scores_from_order(order), (), float(row["confidence"]), usage)


def rank_queries_on_ray(
    args: argparse.Namespace, opts: dict[str, Any], queries: list[Query], writer: Any
) -> int:
    """Rank ``queries`` on Ray; write each record in input order; return the failures."""
    # lazy: optional dependency (the ray extra)
    import ray

    from ..ray import rank_dataset

    if not ray.is_initialized():
        ray.init(
            address=args.ray_address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
    ray.data.DataContext.get_current().enable_progress_bars = not args.no_progress
    rows = [
        {"position": k, "query": q.query, "items": list(q.texts)} for k, q in enumerate(queries)
    ]
    options = {
        **opts,
        "backend_options": {**opts.get("backend_options", {}), **_backend_options(args)},
    }
    ranked = rank_dataset(
        ray.data.from_items(rows), backend=backend_spec(args), concurrency=args.actors, **options
    )
    failed = 0
    for row in ranked.iter_rows():
        k = int(row["position"])
        if row["error"] is not None:
            failed += 1
            report(f"query {queries[k].qid} failed: {one_line(Exception(row['error']))}")
            writer.put(k, None)
        else:
            writer.put(k, _render(args, writer, queries[k], row))
    return failed


def _render(args: argparse.Namespace, writer: Any, query: Query, row: dict[str, Any]) -> str:
    """The single process's record; its sample counts come from the row (no windows here)."""
    if args.format != "jsonl":
        return str(writer.render(query, _result(row)))
    record = {
        **to_json(query, _result(row)),
        "samples": int(row["samples"]),
        "failed_samples": int(row["failed_samples"]),
    }
    return json.dumps(record, ensure_ascii=False) + "\n"
