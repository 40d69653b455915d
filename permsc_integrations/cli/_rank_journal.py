"""The journal of ``permsc rank --engine ray``: every row as it finishes, with what it spent.

``OUTPUT.journal`` gets one JSON line per finished row, ranked or failed, flushed as the row
comes back (in whatever order rows finish), while the output keeps the input order. Each line
is keyed by the row's unit of work: its qid, query, items and every option that can change an
answer (the shuffles' seeds derive from them), so the unit is idempotent. ``--resume`` writes
the journal's ranked rows whose key matches without a call, and ranks the rest; a failed row
stays in the journal with its usage (the calls it spent) and is ranked again.

Example:
    >>> from permsc_integrations.cli._common import Query
    >>> q = Query("q1", "query", ("a", "b"), ("d1", "d2"), ("a", "b"), False)
    >>> unit_key(q, "openai:m", {"num_permutations": 5}) == unit_key(
    ...     q, "openai:m", {"num_permutations": 5, "max_concurrency": 8})  # not an answer's
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypedDict

from ._common import Query

if TYPE_CHECKING:
    from ..ray import RankedRow  # lazy: start-up time of every permsc command

__all__ = ["Journal", "unit_key", "SUFFIX"]

SUFFIX = ".journal"
OPERATIONAL = frozenset(
    {"max_concurrency", "timeout", "breaker_cooldown", "request_cap", "ranker_cap", "prices"}
)
"""Options that change how a row is run, not its answer: outside the unit key."""


def unit_key(query: Query, backend: str, options: Mapping[str, object]) -> str:
    """A stable digest of one row's unit of work (see the module docstring)."""
    unit = {
        "qid": query.qid,
        "query": query.query,
        "items": query.texts,
        "backend": backend,
        "options": {k: v for k, v in options.items() if k not in OPERATIONAL},
    }
    blob = json.dumps(unit, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _record(key: str, qid: str, row: RankedRow) -> str:
    fields = {
        "qid": qid,
        "key": key,
        "order": list(row.order) if row.order is not None else None,
        "scores": list(row.scores) if row.scores is not None else None,
        "confidence": row.confidence,
        "samples": row.samples,
        "failed_samples": row.failed_samples,
        "usage": row.usage,
        "error": row.error,
        "head": row.head,
        "stopped": row.stopped,
        "top_probability": list(row.top_probability),
    }
    return json.dumps(fields, ensure_ascii=False) + "\n"


class _RankedFields(TypedDict):
    """A journal line of a ranked row (``error`` None)."""

    qid: str
    key: str
    order: list[int]
    scores: list[float]
    confidence: float
    samples: int
    failed_samples: int
    usage: dict[str, int]
    error: None


class _Ranked(_RankedFields, total=False):
    """A ranked row's journal line (journals written before these three lack them)."""

    head: int | None
    stopped: str
    top_probability: list[float | None]


def _ranked_row(record: _Ranked) -> RankedRow:
    # lazy: start-up time of every permsc command
    from ..ray import RankedRow

    return RankedRow(
        record["key"],
        tuple(record["order"]),
        tuple(record["scores"]),
        float(record["confidence"]),
        int(record["samples"]),
        int(record["failed_samples"]),
        {k: int(v) for k, v in record["usage"].items()},
        None,
        record.get("head"),
        record.get("stopped", "complete"),
        tuple(record.get("top_probability", ())),
    )


class Journal:
    """``OUTPUT.journal``, opened anew (or, resuming, to append); a line at a time."""

    def __init__(self, output: str, resume: bool) -> None:
        self.path = Path(output + SUFFIX)
        self.earlier: dict[str, RankedRow] = self._read() if resume else {}
        self._out: IO[str] = open(self.path, "a" if resume else "w", encoding="utf-8")

    def _read(self) -> dict[str, RankedRow]:
        """The ranked rows of earlier runs, by key (a line torn by a crash is cut off)."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            self.path.write_bytes(data)
        rows = {}
        for line in data.decode("utf-8").splitlines():
            record = json.loads(line)
            if record.get("error") is None:
                rows[record["key"]] = _ranked_row(record)
        return rows

    def write(self, key: str, qid: str, row: RankedRow) -> None:
        self._out.write(_record(key, qid, row))
        self._out.flush()

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
