"""The journal of ``permsc rank --engine ray``: every row as it finishes, with what it spent.

``OUTPUT.journal`` gets one JSON line per finished row, ranked or failed, flushed as the row
comes back (in whatever order rows finish). Each line is keyed by the row's unit of work: its
qid, query, items with their docids (what a record's fingerprint covers) and every option
that can change an answer (the shuffles' seeds derive from them), so the unit is idempotent.
``--resume`` writes the journal's ranked rows whose key is one of this run's without a call,
and ranks the rest; a failed row stays in the journal with its usage (the calls it spent) and
is ranked again. Rows under other keys (another input, other options) are ranked again. A
row replayed is checked against its query first (its qid; an ``order`` that holds each of
its candidates once; scores and chances, one each): a line that is not a journal row, or a
row that does not fit its query, stops the run before any call (:class:`JournalError`, with
its line number); a last line a crash left half-written is cut off.

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
from typing import IO, TYPE_CHECKING, TypedDict, TypeGuard, cast

from permsc_integrations.cli._common import Query
from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:
    from permsc_integrations.ray import (
        RankedRow,  # lazy: start-up time of every permsc command
    )

__all__ = ["Journal", "JournalError", "unit_key", "SUFFIX"]

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
        "docids": query.docids,
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
    from permsc_integrations.ray import RankedRow

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


class JournalError(ConfigurationError):
    """A line of ``OUTPUT.journal`` that is not a journal row, or a ranked row that does not
    fit the query its key names: ``--resume`` stops before any call rather than replay it."""


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _numbers(value: object, n: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == n
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )


def _misfit(record: Mapping[str, object], query: Query) -> str | None:
    """What in a ranked row does not fit ``query`` (None: nothing)."""
    n = len(query.texts)
    order, usage, head = record.get("order"), record.get("usage"), record.get("head")
    chances = record.get("top_probability", [])
    checks = {
        f"its qid is not {query.qid!r}": record.get("qid") == query.qid,
        f"'order' does not hold each of its {n} candidates once": isinstance(order, list)
        and all(_count(i) for i in order)
        and sorted(order) == list(range(n)),
        f"'scores' is not {n} numbers": _numbers(record.get("scores"), n),
        "'confidence' is not a number": _numbers([record.get("confidence")], 1),
        "'samples' or 'failed_samples' is not a count": _count(record.get("samples"))
        and _count(record.get("failed_samples")),
        "'usage' is not counts by name": isinstance(usage, dict)
        and all(_count(v) for v in usage.values()),
        f"'head' is not a count up to {n}": head is None or (_count(head) and head <= n),
        "'stopped' is not a string": isinstance(record.get("stopped", ""), str),
        f"'top_probability' is not {n} numbers": chances == [] or _numbers(chances, n),
    }
    return next((what for what, fits in checks.items() if not fits), None)


def _parse(path: Path, number: int, line: str) -> dict[str, object]:
    """One journal line as its fields; :class:`JournalError` if it is not a journal row."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        record = None
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("key"), str)
        or not isinstance(record.get("error"), str | None)
    ):
        raise JournalError(f"{path} line {number}: not a journal row; {_REMEDY}")
    return record


_REMEDY = "remove the journal (its rows are then ranked again) or rank into a new --output"


class Journal:
    """``OUTPUT.journal``, opened anew (or, resuming, to append); a line at a time.

    ``expected``: this run's queries by their unit keys; resuming, the journal's ranked rows
    under those keys are read back, each checked against its query."""

    def __init__(
        self, output: str, resume: bool, expected: Mapping[str, Query] | None = None
    ) -> None:
        self.path = Path(output + SUFFIX)
        self.earlier: dict[str, RankedRow] = self._read(expected or {}) if resume else {}
        self._out: IO[str] = open(self.path, "a" if resume else "w", encoding="utf-8")

    def _read(self, expected: Mapping[str, Query]) -> dict[str, RankedRow]:
        """The ranked rows of earlier runs under ``expected``'s keys (a torn last line is cut
        off; a bad line or a row that does not fit its query raises :class:`JournalError`)."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        rows = {}
        text = whole.decode("utf-8", errors="replace")
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            record = _parse(self.path, number, line)
            query = expected.get(str(record["key"]))
            if record["error"] is not None or query is None:
                continue
            misfit = _misfit(record, query)
            if misfit is not None:
                raise JournalError(
                    f"{self.path} line {number}: the row of qid {query.qid!r} does not fit its "
                    f"query ({misfit}), so it is not replayed; {_REMEDY}"
                )
            rows[str(record["key"])] = _ranked_row(cast(_Ranked, record))
        if len(whole) < len(data):
            self.path.write_bytes(whole)
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
