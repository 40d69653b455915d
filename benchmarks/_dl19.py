"""DL19's BM25 (or SPLADE++) top-100 lists with their qrels grades, for the frontier benchmarks.

The simulated judge's hidden relevance of a candidate is its qrels grade (unjudged: 0);
nDCG@10 is scored against those grades with the ideal taken from the list itself (so a
perfect reranking of the list scores 1.0, as in issue 31's table).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from permsc_integrations.metrics import ndcg_at_k

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl"
for _candidate in (DATA, Path("/work/shared/data/trec-dl")):
    if _candidate.exists():
        DATA = _candidate
        break


@dataclass(frozen=True)
class Query:
    qid: str
    query: str
    texts: tuple[str, ...]
    grades: tuple[int, ...]

    def ndcg(self, order: list[int] | tuple[int, ...], k: int = 10) -> float:
        """nDCG@k of ``order`` (indices into the list; missing ones follow in list order)."""
        seen = set(order)
        full = [*order, *(i for i in range(len(self.texts)) if i not in seen)]
        qrels = {str(i): g for i, g in enumerate(self.grades)}
        return ndcg_at_k([str(i) for i in full], qrels, k)


RUNS = {"bm25": "dl19.bm25.top100.jsonl", "splade": "dl19.splade-pp-ed.top100.jsonl"}


def load(limit: int | None = 20, *, offset: int = 0, run: str = "bm25") -> list[Query]:
    """The first ``limit`` DL19 queries (topics order) that have a relevant candidate, in
    the first-stage order of ``run`` (:data:`RUNS`)."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (DATA / "qrels" / "qrels.dl19-passage.txt").read_text().splitlines():
        qid, _, docid, grade = line.split()
        qrels.setdefault(qid, {})[docid] = int(grade)
    out = []
    for line in (DATA / "normalized" / RUNS[run]).read_text().splitlines():
        record = json.loads(line)
        judged = qrels.get(record["qid"], {})
        grades = tuple(judged.get(c["docid"], 0) for c in record["candidates"])
        if any(grades):
            texts = tuple(c["text"] for c in record["candidates"])
            out.append(Query(record["qid"], record["query"], texts, grades))
    out = out[offset:]
    return out if limit is None else out[:limit]
