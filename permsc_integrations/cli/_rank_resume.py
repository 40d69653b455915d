"""What ``permsc rank --resume`` keeps of ``--output``: the records written for this input.

A JSONL record counts as done when its ``fingerprint`` (:func:`._rank_records.fingerprint`:
the qid, the query, every candidate's docid and text) is that of this input's query with its
qid, and its ``order`` and ``ranking`` rank that query's candidates. A TREC run has no field
for a fingerprint: a qid's lines count when they rank exactly that query's docids, ranks 1 to
n (a changed query or passage text under the same docids goes unseen there; JSONL sees it).

Records of another input (or without a fingerprint, written by an earlier permsc) stop the
run before any call, naming their qids; so does a line that is not a record, by its number.
What a crash leaves at the end (a last line without its newline; in TREC, a query's lines cut
short) is cut off and that query ranked again. Nothing is cut when the run is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from permsc_integrations.cli._common import Query
from permsc_integrations.cli._rank_records import fingerprint
from permsc_integrations.errors import ConfigurationError

__all__ = ["Block", "ResumeError", "written"]


class ResumeError(ConfigurationError):
    """``--output`` cannot be resumed from this input: it holds records of another input (or
    of an earlier permsc), or a line that is not a record; refused before any call."""


@dataclass(frozen=True)
class Block:
    """One query's bytes in the output file: its position in the input, its byte range."""

    position: int
    start: int
    end: int


@dataclass(frozen=True)
class _Line:
    number: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Scan:
    """What a read of the output found: this input's blocks, the qids of others, where the
    good part ends (a torn end after it), how many records have no fingerprint."""

    blocks: list[Block]
    foreign: list[str]
    keep: int
    unstamped: int = 0


def written(path: Path, fmt: str, queries: Sequence[Query]) -> list[Block]:
    """The blocks of ``path`` written for ``queries`` (the input, in order); a torn end is cut
    off. :class:`ResumeError` if anything else in it is not this input's."""
    if not path.exists():
        return []
    data = path.read_bytes()
    by_qid = {q.qid: (k, q) for k, q in enumerate(queries)}
    lines = list(_lines(data))
    scan = _trec(path, lines, by_qid) if fmt == "trec" else _jsonl(path, lines, by_qid)
    if scan.foreign:
        raise _foreign(path, scan)
    if scan.keep < len(data):
        os.truncate(path, scan.keep)
    return scan.blocks


def _lines(data: bytes) -> Iterator[_Line]:
    """The non-blank lines ended by a newline (what follows the last newline is torn)."""
    start = 0
    for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
        end = start + len(raw) + 1
        if raw.strip():
            yield _Line(number, start, end, raw.decode("utf-8", errors="replace"))
        start = end


def _good_end(lines: Sequence[_Line]) -> int:
    return lines[-1].end if lines else 0


_Known = Mapping[str, tuple[int, Query]]


def _jsonl(path: Path, lines: Sequence[_Line], known: _Known) -> _Scan:
    blocks, foreign, seen, unstamped = [], [], dict[str, int](), 0
    for line in lines:
        record = _record(path, line)
        qid = str(record["qid"])
        if qid in seen:
            raise _corrupt(path, line, f"qid {qid!r} again (first on line {seen[qid]})")
        seen[qid] = line.number
        unstamped += "fingerprint" not in record
        entry = known.get(qid)
        if entry is None or record.get("fingerprint") != fingerprint(entry[1]):
            foreign.append(qid)
            continue
        if not _ranks(record, entry[1]):
            n = len(entry[1].texts)
            why = f"the record of qid {qid!r} does not rank its {n} candidates, each once"
            raise _corrupt(path, line, f"{why} ('order', 'ranking')")
        blocks.append(Block(entry[0], line.start, line.end))
    return _Scan(blocks, foreign, _good_end(lines), unstamped)


def _record(path: Path, line: _Line) -> dict[str, object]:
    try:
        record = json.loads(line.text)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("qid"), str):
        raise _corrupt(path, line, "not a record of permsc rank (is --format the one it had?)")
    return record


def _ranks(record: Mapping[str, object], query: Query) -> bool:
    """``order`` holds each candidate once and ``ranking`` names their docids in that order."""
    order, ranking = record.get("order"), record.get("ranking")
    if not isinstance(order, list) or not all(type(i) is int for i in order):
        return False
    if sorted(order) != list(range(len(query.texts))) or not isinstance(ranking, list):
        return False
    docids = [r.get("docid") if isinstance(r, dict) else None for r in ranking]
    return docids == [query.docids[i] for i in order]


_Group = list[tuple[_Line, list[str]]]


def _trec(path: Path, lines: Sequence[_Line], known: _Known) -> _Scan:
    groups = _trec_groups(path, lines)
    blocks, foreign, seen = [], [], dict[str, int]()
    for at, group in enumerate(groups):
        first, qid = group[0][0], group[0][1][0]
        if qid in seen:
            raise _corrupt(path, first, f"qid {qid!r} again (first on line {seen[qid]})")
        seen[qid] = first.number
        entry = known.get(qid)
        if entry is None or not _among(group, entry[1]):
            foreign.append(qid)
        elif len(group) == len(entry[1].docids):
            blocks.append(Block(entry[0], first.start, group[-1][0].end))
        elif at == len(groups) - 1:  # a crash cut the last query's lines short
            return _Scan(blocks, foreign, first.start)
        else:
            n = len(entry[1].docids)
            raise _corrupt(path, first, f"qid {qid!r} has {len(group)} of its {n} lines")
    return _Scan(blocks, foreign, _good_end(lines))


def _trec_groups(path: Path, lines: Sequence[_Line]) -> list[_Group]:
    """The lines as runs of one qid each, in file order; a line that is not a run line raises,
    and so do ranks that are not 1, 2, ... within a run."""
    groups: list[_Group] = []
    for line in lines:
        fields = line.text.split()
        if len(fields) != 6 or not fields[3].isdigit():
            raise _corrupt(
                path,
                line,
                "not a TREC run line (qid Q0 docid rank score tag; is --format the one it had?)",
            )
        if groups and groups[-1][0][1][0] == fields[0]:
            groups[-1].append((line, fields))
        else:
            groups.append([(line, fields)])
        if int(fields[3]) != len(groups[-1]):
            raise _corrupt(path, line, f"rank {fields[3]} of qid {fields[0]!r} is out of order")
    return groups


def _among(group: _Group, query: Query) -> bool:
    """The run's docids are distinct candidates of ``query`` (all of them: the whole run)."""
    docids = [fields[2] for _, fields in group]
    return len(set(docids)) == len(docids) and set(docids) <= set(query.docids)


def _corrupt(path: Path, line: _Line, what: str) -> ResumeError:
    return ResumeError(
        f"--resume: {path} line {line.number}: {what}; fix or delete that line (its query is "
        "ranked again), or rank into a new --output"
    )


def _foreign(path: Path, scan: _Scan) -> ResumeError:
    qids = scan.foreign
    named = ", ".join(map(repr, qids[:5])) + (f" and {len(qids) - 5} more" if len(qids) > 5 else "")
    old = " (records without a fingerprint, from an earlier permsc, never match)"
    return ResumeError(
        f"--resume: {path} was written from another input: {len(qids)} of its records are not "
        f"those of this input's queries with their qid: {named}{old if scan.unstamped else ''}; "
        "rank into a new --output, or remove it to start over"
    )
