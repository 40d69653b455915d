"""Adaptive m through the real openai client and the loopback server: a self-consistent model
stops early with the right answer, a noisy one gets more samples, a stopped run is a prefix of
the full one, and the calls saved show in the usage and the events."""

from __future__ import annotations

import pytest

from permsc_integrations import PSCRanker, RankingOptions
from permsc_integrations.adaptive import Adaptive
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.events import Event
from permsc_integrations.testing import noisy_responder, oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(60)

ITEMS = [
    f"doc {'x' * k}"
    for k in (3, 11, 7, 1, 19, 5, 13, 2, 17, 9, 4, 15, 8, 6, 12, 10, 16, 14, 18, 20)
]
TRUTH = tuple(sorted(range(20), key=lambda i: -len(ITEMS[i])))


def ranker(server, **options) -> PSCRanker:
    return PSCRanker("openai:m", backend_options={"base_url": server.base_url}, **options)


def test_a_self_consistent_model_stops_after_the_first_wave_with_the_right_answer(
    scripted_server,
) -> None:
    server = scripted_server(oracle_responder(len))
    events: list[Event] = []
    with ranker(server, num_permutations=20, adaptive=True, on_event=events.append) as r:
        result = r.rank("longest?", ITEMS)
    assert result.order == TRUTH
    assert server.request_count <= 8 and len(result.samples) == server.request_count
    assert result.usage.saved_calls == 20 - server.request_count
    waves = [e for e in events if e.kind == "wave_end"]
    assert waves[-1].detail["why"] == "stable" and waves[-1].detail["stopped"]
    window_end = [e for e in events if e.kind == "window_end"][0]
    assert window_end.detail["samples"] == server.request_count


def test_a_stopped_run_is_a_prefix_of_the_full_run(scripted_server) -> None:
    server = scripted_server(noisy_responder(len, keep=0.7, seed=2))
    with ranker(server, num_permutations=20) as r:
        full = r.rank("q", ITEMS)
    with ranker(server, num_permutations=20, adaptive=Adaptive(first_wave=4, wave=4)) as r:
        early = r.rank("q", ITEMS)
    k = len(early.samples)
    assert 4 <= k <= 20
    assert [s.permutation for s in early.samples] == [s.permutation for s in full.samples[:k]]
    assert [s.ranking for s in early.samples] == [s.ranking for s in full.samples[:k]]


def test_a_noisy_model_gets_more_samples_than_a_quiet_one(scripted_server) -> None:
    drawn = {}
    for keep in (1.0, 0.3):
        server = scripted_server(noisy_responder(len, keep=keep, seed=4))
        with ranker(server, num_permutations=20, adaptive=True, window_size=10, step=5) as r:
            results = [r.rank(f"q{k}", ITEMS) for k in range(3)]
        drawn[keep] = sum(len(res.samples) for res in results) / sum(
            len(res.windows) for res in results
        )
    assert drawn[1.0] <= 8 < drawn[0.3]


def test_top_k_stability_stops_sooner_than_the_whole_order(scripted_server) -> None:
    server = scripted_server(noisy_responder(len, keep=0.6, seed=7))
    sizes = {}
    for policy in (Adaptive(tolerance=0.0), Adaptive(top_k=3, tolerance=0.0)):
        with ranker(server, num_permutations=20, adaptive=policy) as r:
            sizes[policy.top_k] = sum(len(r.rank(f"q{k}", ITEMS).samples) for k in range(4))
    assert sizes[3] <= sizes[None]


def test_options_accept_flags_objects_and_strings() -> None:
    assert RankingOptions(adaptive=True).adaptive == Adaptive()
    assert RankingOptions(adaptive="4,2,5").adaptive == Adaptive(4, 2, 5)
    assert RankingOptions(adaptive=False).adaptive is None
    with pytest.raises(ConfigurationError, match="FIRST,WAVE"):
        RankingOptions(adaptive="soon")
    with pytest.raises(ConfigurationError, match="first_wave"):
        Adaptive(first_wave=0)


def test_the_command_line_takes_adaptive() -> None:
    from permsc_integrations.cli import build_parser
    from permsc_integrations.cli._common import cli_options

    args = build_parser().parse_args(["rank", "-i", "x.jsonl", "--adaptive", "4,2"])
    assert cli_options(args).adaptive == Adaptive(first_wave=4, wave=2)
