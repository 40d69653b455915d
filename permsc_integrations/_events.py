"""Progress events and the hook that receives them.

The engine emits one :class:`Event` when a request, a window or a sample starts and ends.
A hook is any callable taking an event; it may be sync or async. An exception raised by a
hook is logged and never breaks the ranking.

Example:
    >>> import anyio
    >>> seen = []
    >>> anyio.run(emit, [seen.append], Event("sample_end", "q1", 0, 3, 20, {"status": "ok"}))
    >>> seen[0].kind, seen[0].sample, seen[0].detail["status"]
    ('sample_end', 3, 'ok')
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from permsc_integrations._registry import publish
from permsc_integrations.results import StopReason

__all__ = ["Event", "EventKind", "EventHook", "WaveReason", "emit"]

logger = logging.getLogger(__name__)

EventKind = Literal[
    "request_start",
    "request_end",
    "window_start",
    "window_end",
    "wave_end",
    "sample_start",
    "sample_end",
]

StableReason = Literal["stable", "zone"]
"""By which rule adaptive m's samples establish a window's consensus: the sign test or a
blocks round's stable head (``"stable"``), or the list model's indifference zone with the
consensus steady over the last wave (``"zone"``)."""

WaveReason = Literal[StopReason, StableReason, "unsettled"]
"""A ``wave_end``'s ``why``: the samples go on (``"unsettled"``) or stop; adaptive m's waves
when the consensus is established (:data:`StableReason`) or m is reached (``"cap"``), the frontier's
rounds for the result's :data:`~permsc_integrations.results.StopReason` (``"certified"``,
``"budget"``, ``"cap"``, ``"exhausted"``)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One progress event.

    ``window`` is the window's position in the plan (0 = first window run), ``sample`` the
    sample's index within its window, ``total`` the count of its kind (windows in the plan,
    samples in the window). ``detail`` carries kind-specific values: ``status``, ``attempts``
    (calls sent for the sample: asks and re-asks, retries included), ``retries``, ``error``,
    ``usage`` (the sample's :class:`~.results.Usage`) and ``permutation`` (the items shown, in
    prompt order, as places in the window's ``items``) for ``sample_end``; ``start``/``end``
    for windows and, on ``window_start``, ``items`` (the caller's indices of the window's
    items); ``n_items`` for requests, and on a ranking's ``request_end`` its ``status``,
    ``usage``, and when it succeeded ``confidence`` and ``stopped`` (the result's: why
    sampling ended); on ``wave_end`` (adaptive m's waves, the frontier's rounds) ``wave``,
    ``samples``, ``cap``, ``stopped`` and ``why`` (a :data:`WaveReason`).
    """

    kind: EventKind
    request_id: object = None
    window: int | None = None
    sample: int | None = None
    total: int | None = None
    detail: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", MappingProxyType(dict(self.detail)))


EventHook = Callable[[Event], "None | Awaitable[None]"]
"""``hook(event)``; may return an awaitable, which is awaited."""


async def emit(hooks: Iterable[EventHook | None], event: Event) -> None:
    """Send ``event`` to every hook; a hook's exception is logged, never raised."""
    for hook in hooks:
        if hook is None:
            continue
        try:
            result = hook(event)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a broken progress bar must not break a ranking
            logger.exception("event hook %r failed on %s event", hook, event.kind)


publish("permsc_integrations", Event)
