"""Where ``permsc rank`` writes its records, each as soon as it can.

To a file (``--output``) each query's record is appended and flushed the moment the query
finishes, in the order queries finish: a slow query holds back no other, and a crash (SIGKILL
included) leaves every finished query on disk, where ``--resume`` finds it
(:mod:`._rank_resume`). When the run ends, done, failed or interrupted, the file is rewritten
in input order, atomically (a temporary file renamed over it), so a finished run's file is in
input order as before. To stdout the records go in input order, each as soon as every earlier
one is out (a stream cannot be reordered afterwards).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

from permsc_integrations.cli._common import Query
from permsc_integrations.cli._rank_resume import Block
from permsc_integrations.results import RankingResult

__all__ = ["InputOrder", "OutputFile", "Render", "Writer"]

Render = Callable[[Query, RankingResult], str]


class Writer(Protocol):
    """Where each query's record goes: ``put(position, text)`` as the query at ``position``
    (of those being ranked) finishes; ``text`` None for a query that failed."""

    render: Render

    def put(self, position: int, text: str | None) -> None: ...


class InputOrder:
    """Records to a stream in input order, each as soon as every earlier one is written."""

    def __init__(self, out: IO[str], render: Render) -> None:
        self.out, self.render = out, render
        self.pending: dict[int, str | None] = {}
        self.next = 0

    def put(self, position: int, text: str | None) -> None:
        self.pending[position] = text
        while self.next in self.pending:
            text = self.pending.pop(self.next)
            if text:
                self.out.write(text)
                self.out.flush()
            self.next += 1


class OutputFile:
    """``--output``: records appended as queries finish, put in input order at :meth:`close`.

    ``positions[k]``: the input position of the k-th query being ranked; ``earlier``: the
    blocks a resumed file already holds (appended to, else the file starts empty)."""

    def __init__(
        self,
        path: Path,
        render: Render,
        positions: Sequence[int],
        earlier: Sequence[Block] = (),
        append: bool = False,
    ) -> None:
        self.path, self.render, self.positions = path, render, positions
        self.blocks = list(earlier)
        self.out = open(path, "ab" if append else "wb")  # noqa: SIM115 - closed by close()
        self.out.seek(0, os.SEEK_END)

    def put(self, position: int, text: str | None) -> None:
        if not text:
            return
        data = text.encode("utf-8")
        start = self.out.tell()
        self.out.write(data)
        self.out.flush()
        self.blocks.append(Block(self.positions[position], start, start + len(data)))

    def close(self) -> None:
        """Close the file, and rewrite it in input order if it is not."""
        self.out.close()
        ordered = sorted(self.blocks, key=lambda block: block.position)
        if ordered == self.blocks:
            return
        sorting = self.path.with_name(self.path.name + ".sorting")
        try:
            with open(self.path, "rb") as source, open(sorting, "wb") as target:
                for block in ordered:
                    source.seek(block.start)
                    target.write(source.read(block.end - block.start))
                target.flush()
                os.fsync(target.fileno())
            os.replace(sorting, self.path)
        finally:
            sorting.unlink(missing_ok=True)

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
