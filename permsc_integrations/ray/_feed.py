"""The rows of a :func:`~permsc_integrations.ray._rows.rank_rows` job not yet given to an
actor (those a lost actor handed back first, a row lost too often delivered failed), and the
watchdog that says when the job has had no live actor for too long.

Example:
    >>> from permsc_integrations import RankRequest
    >>> feed = Feed([RankRequest("q", ["a", "b"], id="q1"), RankRequest("q", ["c", "d"])])
    >>> sorted(feed.take(1)), feed.keys
    ([0], {0: 'q1'})
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from permsc_integrations._ranker.ranker import RankRequest
from permsc_integrations.ray._actors import RankedRow

__all__ = ["ROW_LOSSES", "Feed", "Watchdog"]

ROW_LOSSES = 3
"""A row whose actor was lost this many times while ranking it is delivered failed (a row
that kills its actor would otherwise be retried for ever)."""


class Feed:
    """The rows not yet given to an actor: the ones handed back by a lost actor first."""

    def __init__(self, requests: Iterable[RankRequest]) -> None:
        self._fresh = enumerate(requests)
        self._next = next(self._fresh, None)
        self.back: deque[tuple[int, RankRequest]] = deque()
        self.keys: dict[int, object] = {}
        self.losses: dict[int, int] = {}  # position: times lost with its actor

    def __bool__(self) -> bool:
        return bool(self.back) or self._next is not None

    def take(self, n: int) -> dict[int, RankRequest]:
        out: dict[int, RankRequest] = {}
        while len(out) < n and self:
            if self.back:
                position, request = self.back.popleft()
            else:
                assert self._next is not None
                position, request = self._next
                self._next = next(self._fresh, None)
                self.keys[position] = position if request.id is None else request.id
            out[position] = request
        return out

    def hand_back(self, rows: dict[int, RankRequest], cause: str) -> list[RankedRow]:
        """Queue the rows of a lost actor again; those lost too often come back failed."""
        failed = []
        for position, request in rows.items():
            self.losses[position] = self.losses.get(position, 0) + 1
            if self.losses[position] < ROW_LOSSES:
                self.back.append((position, request))
                continue
            error = f"RayActorError: lost with its actor {ROW_LOSSES} times (the last: {cause})"
            failed.append(RankedRow.failed(self.delivered(position), error))
        return failed

    def delivered(self, position: int) -> object:
        """Forget the row at ``position`` (it is delivered); its key."""
        self.losses.pop(position, None)
        return self.keys.pop(position)


@dataclass
class Watchdog:
    """Whether a job has gone ``timeout`` seconds with no live actor (from its start, or from
    the moment its last one was lost).

    >>> dog = Watchdog(60.0, since=0.0)
    >>> dog.expired(alive=False, now=59.0), dog.expired(alive=True, now=61.0)
    (False, False)
    >>> dog.expired(alive=False, now=100.0), dog.expired(alive=False, now=161.5)
    (False, True)
    """

    timeout: float
    since: float | None  # when the last live actor was lost (None: one is alive)

    def expired(self, *, alive: bool, now: float) -> bool:
        if alive:
            self.since = None
        elif self.since is None:
            self.since = now
        return self.since is not None and now - self.since > self.timeout
