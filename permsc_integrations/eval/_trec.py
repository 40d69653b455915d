"""TREC files in and out: run files, qrels, topics and JSONL candidate lists.

- Run file lines: ``qid Q0 docid rank score tag``. :func:`read_run` orders each query's
  documents by the ``rank`` column (some published LLM runs keep first-stage scores in the
  ``score`` column); :func:`write_run` writes ranks 1.. and strictly decreasing scores.
- Qrels lines: ``qid 0 docid grade``.
- Candidates JSONL: ``{"qid", "query", "candidates": [{"docid", "text", ...}]}`` per line,
  the layout of ``../shared/data/trec-dl/normalized``.

Example:
    >>> import io
    >>> buf = io.StringIO()
    >>> write_run({"q1": ["d2", "d1"]}, buf, tag="psc")
    >>> buf.getvalue().splitlines()[0]
    'q1 Q0 d2 1 2 psc'
    >>> read_run(io.StringIO(buf.getvalue()))
    {'q1': ['d2', 'd1']}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from permsc_integrations.errors import ConfigurationError

__all__ = [
    "Candidate",
    "Query",
    "Run",
    "Qrels",
    "read_run",
    "write_run",
    "read_qrels",
    "read_candidates",
    "read_topics",
]

Run = dict[str, list[str]]
"""qid -> docids, best first."""
Qrels = dict[str, dict[str, int]]
"""qid -> docid -> graded relevance."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A first-stage hit: ``docid``, passage ``text`` and its first-stage ``score``."""

    docid: str
    text: str
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class Query:
    """A query with its candidates in first-stage order."""

    qid: str
    query: str
    candidates: tuple[Candidate, ...]


def _lines(source: str | Path | IO[str]) -> Iterable[tuple[int, str]]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ConfigurationError(f"file not found: {path}")
        with path.open(encoding="utf-8") as handle:
            yield from ((k + 1, line) for k, line in enumerate(handle) if line.strip())
    else:
        yield from ((k + 1, line) for k, line in enumerate(source) if line.strip())


def read_run(source: str | Path | IO[str]) -> Run:
    """Read a TREC run: each query's docids ordered by rank (then by descending score)."""
    rows: dict[str, list[tuple[int, float, str]]] = {}
    for number, line in _lines(source):
        parts = line.split()
        if len(parts) < 5:
            raise ConfigurationError(
                f"line {number} of the run is not 'qid Q0 docid rank score [tag]': {line.strip()!r}"
            )
        try:
            rank, score = int(parts[3]), float(parts[4])
        except ValueError:
            raise ConfigurationError(
                f"line {number} of the run has a bad rank or score: {line.strip()!r}"
            ) from None
        rows.setdefault(parts[0], []).append((rank, -score, parts[2]))
    run: Run = {}
    for qid, hits in rows.items():
        docids = [docid for _, _, docid in sorted(hits)]
        if len(set(docids)) != len(docids):
            raise ConfigurationError(f"query {qid} lists a document twice in the run")
        run[qid] = docids
    return run


def write_run(
    run: Mapping[str, Sequence[str]], target: str | Path | IO[str], *, tag: str = "permsc"
) -> None:
    """Write a TREC run with ranks 1..n and scores n..1 (what trec_eval sorts by)."""
    lines: list[str] = []
    for qid, docids in run.items():
        n = len(docids)
        lines.extend(
            f"{qid} Q0 {docid} {rank} {n - rank + 1} {tag}\n"
            for rank, docid in enumerate(docids, 1)
        )
    if isinstance(target, (str, Path)):
        Path(target).write_text("".join(lines), encoding="utf-8")
    else:
        target.write("".join(lines))


def read_qrels(source: str | Path | IO[str]) -> Qrels:
    """Read TREC qrels ``qid 0 docid grade``."""
    qrels: Qrels = {}
    for number, line in _lines(source):
        parts = line.split()
        if len(parts) != 4:
            raise ConfigurationError(
                f"line {number} of the qrels is not 'qid 0 docid grade': {line.strip()!r}"
            )
        qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def read_topics(source: str | Path | IO[str]) -> dict[str, str]:
    """Read a ``qid<TAB>query`` topics file."""
    topics = {}
    for number, line in _lines(source):
        qid, sep, text = line.rstrip("\n").partition("\t")
        if not sep:
            raise ConfigurationError(
                f"line {number} of the topics file has no tab: {line.strip()!r}"
            )
        topics[qid] = text
    return topics


def read_candidates(source: str | Path | IO[str], *, depth: int | None = None) -> list[Query]:
    """Read JSONL candidate lists (first ``depth`` candidates per query)."""
    queries = []
    for number, line in _lines(source):
        try:
            record = json.loads(line)
            hits = record["candidates"][:depth]
            candidates = tuple(
                Candidate(
                    str(h["docid"]),
                    str(h.get("text", h.get("content", ""))),
                    float(h.get("score", 0.0)),
                )
                for h in hits
            )
            queries.append(Query(str(record["qid"]), str(record["query"]), candidates))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(
                f"line {number} of the candidates file is not {{'qid', 'query', 'candidates': "
                f"[{{'docid', 'text'}}]}}: {exc}"
            ) from None
    return queries
