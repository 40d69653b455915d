"""A ``wave_end``'s ``why`` is one of :data:`~permsc_integrations._events.WaveReason`, the one
declaration of the reasons (adaptive m's waves and the frontier's rounds), on real rankings."""

from __future__ import annotations

from typing import get_args

import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._events import Event, WaveReason
from permsc_integrations.results import StopReason
from permsc_integrations.testing import ScriptedBackend, noisy_responder, oracle_responder

ITEMS = ["x" * k for k in (3, 1, 4, 2, 5, 6)]
REASONS = set(get_args(WaveReason))


def test_the_reasons_are_the_stop_reasons_and_adaptive_ms_own() -> None:
    assert REASONS == set(get_args(StopReason)) | {"stable", "zone", "unsettled"}


@pytest.mark.parametrize(
    "responder, last",
    [(oracle_responder(len), "stable"), (noisy_responder(len, keep=0.0, seed=1), "cap")],
)
def test_adaptive_waves_say_why_they_go_on_or_stop(responder, last: str) -> None:
    events: list[Event] = []
    ranker = PSCRanker(
        ScriptedBackend(responder), num_permutations=12, adaptive=True, on_event=events.append
    )
    ranker.rank("longest?", ITEMS)
    whys = [e.detail["why"] for e in events if e.kind == "wave_end"]
    assert whys and set(whys) <= REASONS
    assert all(why == "unsettled" for why in whys[:-1]) and whys[-1] == last
