"""The records ``permsc rank`` writes for a ranked query: a JSONL object or TREC run lines."""

from __future__ import annotations

from ..results import RankingResult
from ._common import Query

__all__ = ["to_json", "to_trec"]


def to_json(query: Query, result: RankingResult) -> dict[str, object]:
    """The JSONL record of one ranked query."""
    record: dict[str, object] = {
        "qid": query.qid,
        "query": query.query,
        "ranking": [
            {"docid": query.docids[i], "rank": r, "score": round(result.scores[i], 6)}
            for r, i in enumerate(result.order, start=1)
        ],
        "order": list(result.order),
        "confidence": round(result.confidence, 4),
        "samples": len(result.samples),
        "failed_samples": len(result.failures),
        "usage": result.usage.as_dict(),
    }
    if query.plain:
        record["items"] = [query.items[i] for i in result.order]
    return record


def to_trec(query: Query, result: RankingResult, tag: str) -> str:
    """TREC run lines: ``qid Q0 docid rank score tag``."""
    return "".join(
        f"{query.qid} Q0 {query.docids[i]} {r} {result.scores[i]:.6f} {tag}\n"
        for r, i in enumerate(result.order, start=1)
    )
