"""``permsc rank``'s progress: tqdm bars on a terminal (the ``cli`` extra), else log lines."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from permsc_integrations.cli._common import Query, report

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from tqdm import tqdm

    from permsc_integrations._events import Event
    from permsc_integrations.ray import RankedRow

__all__ = ["LogLines", "Progress"]


class LogLines:
    """Progress for logs: one line on stderr at most every ``every`` seconds, as work is done,
    and a last one at the end if any was written."""

    def __init__(self, queries: int, samples: int, every: float) -> None:
        self.queries, self.samples, self.every = queries, samples, every
        self.done = self.sampled = 0
        self.began = self.last = time.monotonic()
        self.written = False

    def sample_done(self) -> None:
        self.sampled += 1
        self._maybe()

    def query_done(self) -> None:
        self.done += 1
        self._maybe()

    def _maybe(self) -> None:
        if time.monotonic() - self.last >= self.every:
            self._write()

    def _write(self) -> None:
        self.last, self.written = time.monotonic(), True
        report(
            f"progress: {self.done}/{self.queries} queries, {self.sampled}/~{self.samples} "
            f"samples, {self.last - self.began:.0f} s"
        )

    def close(self) -> None:
        if self.written:
            self._write()


class Progress:
    """tqdm bars (queries, samples) on stderr when it is a terminal and tqdm (the ``cli``
    extra) is installed; else log lines."""

    def __init__(
        self, queries: list[Query], samples: int, enabled: bool, every: float = 10.0
    ) -> None:
        self.bars: list[tqdm] = []
        self.lines: LogLines | None = None
        if enabled and not sys.stderr.isatty():
            self.lines = LogLines(len(queries), samples, every)
        elif enabled:
            try:
                # lazy: optional dependency (tqdm, the cli extra)
                from tqdm import tqdm
            except ImportError:  # no bars without the cli extra: the log lines, then
                self.lines = LogLines(len(queries), samples, every)
                return
            self.bars = [
                tqdm(total=len(queries), desc="queries", unit="q", position=0),
                tqdm(total=samples, desc="samples", unit="s", position=1),
            ]

    def on_event(self, event: Event) -> None:
        if event.kind != "sample_end":
            return
        if self.bars:
            self.bars[1].update(1)
        if self.lines is not None:
            self.lines.sample_done()

    def query_done(self) -> None:
        if self.bars:
            self.bars[0].update(1)
        if self.lines is not None:
            self.lines.query_done()

    def row_done(self, row: RankedRow) -> None:
        """A row ranked elsewhere (a Ray actor): its samples at once, then the query."""
        if self.bars:
            self.bars[1].update(row.samples or 0)
        if self.lines is not None:
            self.lines.sampled += row.samples or 0
        self.query_done()

    def close(self) -> None:
        for bar in self.bars:
            bar.close()
        if self.lines is not None:
            self.lines.close()
