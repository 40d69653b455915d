"""The input lines of ``permsc rank``, checked before anything is read back or written: two
lines that share a qid would merge their results and ``--resume`` would skip one of them."""

from __future__ import annotations

from collections.abc import Sequence

from permsc_integrations.cli._common import Query
from permsc_integrations.errors import ConfigurationError

__all__ = ["DuplicateQidError", "check_qids"]


class DuplicateQidError(ConfigurationError):
    """Two input lines share a qid: their results would merge and ``--resume`` would skip
    one of them, so the run is refused before anything is written."""


def check_qids(queries: Sequence[Query], path: str) -> None:
    """Raise :class:`DuplicateQidError` naming every qid that more than one line has.

    >>> from permsc_integrations.cli._common import parse_line
    >>> rows = [parse_line('{"qid": "2", "query": "q", "items": ["a"]}', 1),
    ...         parse_line('{"query": "q", "items": ["a"]}', 2)]  # its qid: its line, "2"
    >>> try:
    ...     check_qids(rows, "in.jsonl")
    ... except DuplicateQidError as exc:
    ...     print(str(exc).split(";")[0])
    in.jsonl: 2 lines share a qid: '2' (lines 1, 2)
    """
    lines: dict[str, list[int]] = {}
    for q in queries:
        lines.setdefault(q.qid, []).append(q.line)
    shared = {qid: at for qid, at in lines.items() if len(at) > 1}
    if not shared:
        return
    named = "; ".join(f"{qid!r} (lines {', '.join(map(str, at))})" for qid, at in shared.items())
    implicit = any(q.qid == str(q.line) for q in queries if q.qid in shared)
    hint = " a line without 'qid' (or 'id') takes its line number as its qid;" if implicit else ""
    raise DuplicateQidError(
        f"{path}: {sum(map(len, shared.values()))} lines share a qid: {named};{hint} give every "
        "line its own"
    )
