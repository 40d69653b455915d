"""The records ``permsc rank`` writes for a ranked query: a JSONL object or TREC run lines."""

from __future__ import annotations

import hashlib
import json

from permsc_integrations.cli._common import Query
from permsc_integrations.results import RankingResult

__all__ = ["fingerprint", "to_json", "to_trec"]


def fingerprint(query: Query) -> str:
    """A short digest of what a record answers: the qid, the query and every candidate's docid
    and text, in order. ``--resume`` keeps a record only where it is this input's query's.

    >>> q = Query("q1", "query", ("a", "b"), ("d1", "d2"), ("a", "b"), False)
    >>> fingerprint(q) == fingerprint(Query("q1", "query", ("a", "b"), ("d1", "d2"), (), True))
    True
    >>> fingerprint(q) == fingerprint(Query("q1", "query", ("a", "B"), ("d1", "d2"), (), True))
    False
    """
    candidates = [list(c) for c in zip(query.docids, query.texts, strict=True)]
    canonical = [query.qid, query.query, candidates]
    blob = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def to_json(query: Query, result: RankingResult) -> dict[str, object]:
    """The JSONL record of one ranked query (``fingerprint``: its query's; each item's
    ``top_probability`` of the top k where the ranking has one; ``head``: the items ranked,
    the rest in input order)."""
    chances = bool(result.top_probability)
    record: dict[str, object] = {
        "qid": query.qid,
        "fingerprint": fingerprint(query),
        "query": query.query,
        "ranking": [
            {"docid": query.docids[i], "rank": r, "score": round(result.scores[i], 6)}
            | ({"top_probability": _rounded(result.top_probability[i])} if chances else {})
            for r, i in enumerate(result.order, start=1)
        ],
        "order": list(result.order),
        "confidence": round(result.confidence, 4),
        "samples": len(result.samples),
        "failed_samples": len(result.failures),
        "usage": result.usage.as_dict(),
    }
    if result.head is not None:  # what the ranker says (not a row rebuilt from a Ray table)
        record |= {"head": result.head, "stopped": result.stopped}
    if query.plain:
        record["items"] = [query.items[i] for i in result.order]
    return record


def to_trec(query: Query, result: RankingResult, tag: str) -> str:
    """TREC run lines: ``qid Q0 docid rank score tag``."""
    return "".join(
        f"{query.qid} Q0 {query.docids[i]} {r} {result.scores[i]:.6f} {tag}\n"
        for r, i in enumerate(result.order, start=1)
    )


def _rounded(p: float | None) -> float | None:
    """A ``top_probability`` for the record: None (never shown to the model) stays None."""
    return None if p is None else round(p, 4)
