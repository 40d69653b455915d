"""One request's identity and limits, carried down the request path as one object.

:class:`RequestState` is built once per request (:meth:`~.engine.Engine.open`) and handed to
every part that runs for it: the request (:mod:`.request`), the engine's waves
(:mod:`.engine`) and each window's calls (:mod:`.sampling`). It holds what used to travel as
loose arguments: the query and the texts, the event hooks and the request id, the seed its
permutations derive from, and :class:`~._calls.calls.Calls`, the request's way out to the backend
with its limiters, the breaker and its meters. The request's meter (``calls.meter``) is the
one count of what it spent, and the one place a call is reserved before it is sent (a spending
cap today; a per-request call budget would be its ``calls`` cap).

Example:
    >>> derive_seed(0, "q", ["a", "b"]) == derive_seed(0, "q", ["a", "b"])
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from permsc_integrations._calls.calls import Calls
from permsc_integrations._events import Event, EventHook, EventKind, emit
from permsc_integrations._options.options import RankingOptions
from permsc_integrations.results import Usage

__all__ = ["RequestState", "derive_seed"]


def derive_seed(seed: int, query: str, texts: Sequence[str], window: object = 0) -> int:
    """A 63-bit seed from the ranker's seed, the request and the window (stable across runs)."""
    blob = json.dumps([seed, query, list(texts), repr(window)], ensure_ascii=False)
    return int.from_bytes(hashlib.blake2b(blob.encode("utf-8"), digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True, slots=True)
class RequestState:
    """One request in flight, as every part below the ranker sees it (module docstring):
    ``total`` is the rounds of its plan (the events' total), ``seed`` the ranker's,
    ``options`` the request's (the ranker's, with a token budget's ``max_calls``)."""

    query: str
    texts: Sequence[str]
    hooks: tuple[EventHook | None, ...]
    request_id: object
    seed: int
    total: int
    calls: Calls
    options: RankingOptions

    def usage(self) -> Usage:
        """What the request has spent so far (a read of its meter, priced when it can be)."""
        return self.calls.meter.spent

    def seed_for(self, inside: Sequence[int], where: object) -> int:
        """The seed of the permutations over the items ``inside`` at ``where`` in the plan."""
        return derive_seed(self.seed, self.query, [self.texts[i] for i in inside], where)

    @property
    def observed(self) -> bool:
        """Whether any hook listens (events are built only then)."""
        return any(self.hooks)

    async def emit(
        self,
        kind: EventKind,
        window: int | None = None,
        *,
        sample: int | None = None,
        total: int | None = None,
        **detail: object,
    ) -> None:
        """Send an event of this request to its hooks (``total``: the plan's rounds unless
        given, as a sample event gives its window's samples)."""
        if self.observed:
            rounds = self.total if total is None else total
            event = Event(kind, self.request_id, window, sample, rounds, detail)
            await emit(self.hooks, event)
