"""The ranker's parts off a request's path: :class:`RankRequest` and the many-request helpers
(:meth:`~permsc_integrations.PSCRanker.arank_many`), and why a built ranker refuses a write."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from permsc_integrations._options.options import RankingOptions
from permsc_integrations.errors import ConfigurationError, add_note, grouped

__all__ = ["RankRequest"]


@dataclass(frozen=True)
class RankRequest:
    """One list to rank: ``items`` are strings, documents or mappings; ``id`` tags events."""

    query: str
    items: Sequence[Any]
    id: Any = None


_SETTABLE = frozenset({"on_event"})
"""What a built ranker reads on every request, so that setting it is honoured: its event hook.
Its parts (``_engine``, ``_limiter``, ``_breaker``, ``_meter``: the spending meter of
``ranker_cap``, given to another ranker as ``meter=``) are private."""


def _refusal(ranker: object, name: str) -> str:
    """Why ``ranker.name = ...`` is refused (a built PSCRanker), and what to do instead."""
    if name in RankingOptions.names():
        return (
            f"a PSCRanker's options are fixed when it is built (its engine, limiter and breaker "
            f"are made from them), so setting {name!r} would be ignored; build a new ranker: "
            f"PSCRanker(backend, options=ranker.options.replace({name}=...))"
        )
    if hasattr(type(ranker), name) or name in vars(ranker):
        return (
            f"PSCRanker.{name} is fixed when the ranker is built, so setting it would be "
            "ignored; build a new ranker"
        )
    public = [a for a in vars(ranker) if not a.startswith("_")]
    close = difflib.get_close_matches(name, [*RankingOptions.names(), *public], n=2)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return (
        f"PSCRanker has no attribute {name!r}{hint}; its options are given when it is built "
        f"(PSCRanker(backend, num_permutations=...)) and fixed after"
    )


def _as_request(request: RankRequest | tuple[str, Sequence[Any]]) -> RankRequest:
    if isinstance(request, RankRequest):
        return request
    try:
        query, items = request
    except (TypeError, ValueError):
        raise ConfigurationError(
            "each request must be a RankRequest or a (query, items) pair, "
            f"got {type(request).__name__}"
        ) from None
    return RankRequest(query, items)


def _first_failure(failures: list[BaseException]) -> BaseException:
    for line in grouped(failures[1:]):  # identical failures once, counted
        add_note(failures[0], f"other requests also failed: {line}")
    return failures[0]
