"""Adaptive m through the real openai client and the loopback server: a self-consistent model
stops early with the right answer, a noisy one gets more samples, a stopped run is a prefix of
the full one, the calls saved show in the usage and the events, and the sign-test rule stops or
goes on, wave by wave, exactly where hand-made answers say it should."""

from __future__ import annotations

import pytest

from permsc_integrations import RankingOptions
from permsc_integrations._events import Event
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.strategies._adaptive import Adaptive, sign_test
from permsc_integrations.testing import ChatRequest, noisy_responder, oracle_responder
from permsc_integrations.testing._responders import shown_passages

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(60)

ITEMS = [
    f"doc {'x' * k}"
    for k in (3, 11, 7, 1, 19, 5, 13, 2, 17, 9, 4, 15, 8, 6, 12, 10, 16, 14, 18, 20)
]
TRUTH = tuple(sorted(range(20), key=lambda i: -len(ITEMS[i])))


def test_a_self_consistent_model_stops_after_the_first_wave_with_the_right_answer(
    scripted_server,
) -> None:
    server = scripted_server(oracle_responder(len))
    events: list[Event] = []
    with server.ranker(num_permutations=20, adaptive=True, on_event=events.append) as r:
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
    with server.ranker(num_permutations=20) as r:
        full = r.rank("q", ITEMS)
    with server.ranker(num_permutations=20, adaptive=Adaptive(first_wave=4, wave=4)) as r:
        early = r.rank("q", ITEMS)
    k = len(early.samples)
    assert 4 <= k <= 20
    assert [s.permutation for s in early.samples] == [s.permutation for s in full.samples[:k]]
    assert [s.ranking for s in early.samples] == [s.ranking for s in full.samples[:k]]


def test_a_noisy_model_gets_more_samples_than_a_quiet_one(scripted_server) -> None:
    drawn = {}
    for keep in (1.0, 0.3):
        server = scripted_server(noisy_responder(len, keep=keep, seed=4))
        with server.ranker(num_permutations=20, adaptive=True, window_size=10, step=5) as r:
            results = [r.rank(f"q{k}", ITEMS) for k in range(3)]
        drawn[keep] = sum(len(res.samples) for res in results) / sum(
            len(res.windows) for res in results
        )
    assert drawn[1.0] <= 8 < drawn[0.3]


def _swap_noise(request: ChatRequest) -> str:
    """The true order with each adjacent pair swapped with probability 0.3."""
    import random

    shown = shown_passages(request.messages)
    rng = random.Random(request.text)
    order = sorted(range(len(shown)), key=lambda p: -len(shown[p]))
    for i in range(len(order) - 1):
        if rng.random() < 0.3:
            order[i], order[i + 1] = order[i + 1], order[i]
    return " > ".join(f"[{p + 1}]" for p in order)


def test_a_model_that_swaps_neighbours_is_not_stopped_by_a_stable_looking_first_wave(
    scripted_server,
) -> None:
    """Issue 25: answers that swap each adjacent pair with probability 0.3 mostly agree, so
    four of them looked stable to the old rule (4 calls a list); the evidence is not there.
    The sign test alone waits for more than two waves; the zone rule needs the consensus to
    hold over a wave, so never stops on the first."""
    server = scripted_server(_swap_noise)
    drawn = {}
    for zone in (None, 0.5):
        with server.ranker(num_permutations=20, adaptive=Adaptive(zone=zone)) as r:
            drawn[zone] = [len(r.rank(f"q{k}", ITEMS).samples) for k in range(3)]
    assert min(drawn[None]) > 8, drawn
    assert min(drawn[0.5]) > 4, drawn


def test_a_pair_the_model_splits_evenly_stops_by_the_zone_not_at_the_cap(
    scripted_server,
) -> None:
    """Issue 39: a real model leaves a pair it orders by a coin flip in nearly every list, so
    the sign test alone draws the cap; the list model's zone settles that pair as a tie once
    the consensus holds, and the rest of the order is the truth's."""
    coin = {TRUTH[4], TRUTH[5]}

    def split_pair(request: ChatRequest) -> str:
        shown = shown_passages(request.messages)
        order = sorted(range(len(shown)), key=lambda p: -len(shown[p]))
        spots = [p for p in order if ITEMS.index(shown[p]) in coin]
        if request.index % 2:  # each wave of 4 splits the pair 2-2
            a, b = (order.index(p) for p in spots)
            order[a], order[b] = order[b], order[a]
        return " > ".join(f"[{p + 1}]" for p in order)

    server = scripted_server(split_pair)
    runs, whys = {}, {}
    for zone in (None, 0.5):
        events: list[Event] = []
        policy = Adaptive(zone=zone)
        with server.ranker(num_permutations=20, adaptive=policy, on_event=events.append) as r:
            runs[zone] = [r.rank(f"q{k}", ITEMS) for k in range(3)]
        whys[zone] = [
            e.detail["why"] for e in events if e.kind == "wave_end" and e.detail["stopped"]
        ]
    assert [len(res.samples) for res in runs[None]] == [20, 20, 20]
    assert whys[None] == ["cap"] * 3
    assert all(len(res.samples) < 20 for res in runs[0.5]), [len(x.samples) for x in runs[0.5]]
    assert whys[0.5] == ["zone"] * 3, "the wave_end says which rule stopped the window"
    for res in runs[0.5]:
        assert [i for i in res.order if i not in coin] == [i for i in TRUTH if i not in coin]
        assert set(res.order[4:6]) == coin


def test_top_k_stability_stops_sooner_than_the_whole_order(scripted_server) -> None:
    server = scripted_server(noisy_responder(len, keep=0.6, seed=7))
    sizes = {}
    for policy in (Adaptive(), Adaptive(top_k=3)):
        with server.ranker(num_permutations=20, adaptive=policy) as r:
            sizes[policy.top_k] = sum(len(r.rank(f"q{k}", ITEMS).samples) for k in range(4))
    assert sizes[3] <= sizes[None]


def test_options_accept_flags_objects_and_strings() -> None:
    assert RankingOptions(adaptive=True).adaptive == Adaptive()
    assert RankingOptions(adaptive="4,2,5").adaptive == Adaptive(4, 2, 5)
    assert RankingOptions(adaptive="4,4,all,0.95").adaptive == Adaptive(confidence=0.95)
    assert RankingOptions(adaptive="4,4,all,0.9,off").adaptive == Adaptive(zone=None)
    assert RankingOptions(adaptive="4,4,,,0.25").adaptive == Adaptive(zone=0.25)
    assert RankingOptions(adaptive={"zone": None}).adaptive == Adaptive(zone=None)
    with pytest.raises(ConfigurationError, match="zone must be a number above 0"):
        RankingOptions(adaptive="4,4,all,0.9,0")
    assert RankingOptions(adaptive={"confidence": 0.8}).adaptive == Adaptive(confidence=0.8)
    assert RankingOptions(adaptive=False).adaptive is None
    with pytest.raises(ConfigurationError, match="FIRST,WAVE"):
        RankingOptions(adaptive="soon")
    with pytest.raises(ConfigurationError, match="first_wave"):
        Adaptive(first_wave=0)
    for bad in (0, 1, 1.5, True, "0.9"):
        with pytest.raises(ConfigurationError, match="confidence"):
            Adaptive(confidence=bad)
    with pytest.raises(ConfigurationError, match="FIRST,WAVE"):
        RankingOptions(adaptive="4,4,3,0.9,0.5,1")
    with pytest.raises(ConfigurationError, match="confidence"):  # the rule before issue 25
        RankingOptions(adaptive={"first_wave": 4, "tolerance": 0.1})


def test_the_command_line_takes_adaptive() -> None:
    from permsc_integrations.cli import build_parser
    from permsc_integrations.cli._common import cli_options

    args = build_parser().parse_args(["rank", "-i", "x.jsonl", "--adaptive", "4,2"])
    assert cli_options(args).adaptive == Adaptive(first_wave=4, wave=2)


def test_an_empty_adaptive_is_refused_not_taken_as_on(tmp_path) -> None:
    """An empty string (an unset environment variable, an empty form field, ``--adaptive ''``)
    says nothing: it was taken as 'on'; refused, with the values accepted."""
    import subprocess
    import sys

    for empty in ("", "  "):
        with pytest.raises(ConfigurationError, match="adaptive is empty.*'on'.*FIRST,WAVE"):
            RankingOptions(adaptive=empty)
    assert RankingOptions(adaptive="on").adaptive == Adaptive()
    assert RankingOptions(adaptive=False).adaptive is None
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "q", "items": ["a", "b"]}\n')
    command = ["estimate", "-i", str(queries), "--adaptive", ""]
    run = subprocess.run(
        [sys.executable, "-m", "permsc_integrations.cli", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "adaptive is empty" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


# The sign-test rule on hand-made answers. Three items, so two adjacent pairs; at confidence
# 0.9 (Holm over two pairs) the stronger pair needs p <= 0.05 and the weaker p <= 0.1: a 4-0
# pair has p = 1/16, 5-0: 1/32, 6-1: 1/16, 5-1: 7/64.
ABC = ["alpha", "beta", "gamma"]


def scripted_answers(*answers: str, then: str = "alpha beta gamma") -> object:
    """Request i (in arrival order: waves go out one after another) answers ``answers[i]``,
    a best-first list of item texts (possibly partial), mapped to the shown positions."""

    def respond(request: ChatRequest) -> str:
        wanted = (answers[request.index] if request.index < len(answers) else then).split()
        shown = shown_passages(request.messages)
        return " > ".join(f"[{shown.index(text) + 1}]" for text in wanted)

    return respond


def wave_log(server, policy: Adaptive, cap: int = 10, items=ABC) -> tuple[list, object]:
    events: list[Event] = []
    with server.ranker(num_permutations=cap, adaptive=policy, on_event=events.append) as r:
        result = r.rank("which first?", items)
    return [(e.detail["samples"], e.detail["why"]) for e in events if e.kind == "wave_end"], result


def test_four_agreeing_answers_are_not_yet_evidence_five_are(scripted_server) -> None:
    server = scripted_server(scripted_answers())
    waves, result = wave_log(server, Adaptive(first_wave=4, wave=1, zone=None))
    assert waves == [(4, "unsettled"), (5, "stable")]  # 1/16 > 0.05; 1/32 <= 0.05
    assert result.order == (0, 1, 2) and server.request_count == 5


def test_one_dissent_needs_more_answers_before_the_pair_is_settled(scripted_server) -> None:
    # four items (24 distinct prompts; three items have only 6): Holm over three pairs
    items, full = [*ABC, "delta"], "alpha beta gamma delta"
    server = scripted_server(scripted_answers("beta alpha gamma delta", then=full))
    waves, result = wave_log(server, Adaptive(first_wave=4, wave=1, zone=None), items=items)
    # alpha over beta: 3-1, 4-1, 5-1 (p 7/64 > 0.1), then 6-1 (p 1/16 <= 0.1)
    assert waves == [(4, "unsettled"), (5, "unsettled"), (6, "unsettled"), (7, "stable")]
    assert result.order == (0, 1, 2, 3)


def test_three_items_are_asked_at_most_their_six_orders(scripted_server) -> None:
    server = scripted_server(scripted_answers("beta alpha gamma"))
    waves, result = wave_log(server, Adaptive(first_wave=4, wave=1, zone=None))  # cap 10: 6 orders
    assert waves == [(4, "unsettled"), (5, "unsettled"), (6, "cap")]
    assert server.request_count == 6 and len({s.permutation for s in result.samples}) == 6


def test_a_pair_seen_together_less_often_is_less_evidence(scripted_server) -> None:
    # four items, three pairs (Holm: 1/30, 1/20, 1/10); five agreeing answers settle them all
    items, full = [*ABC, "delta"], "alpha beta gamma delta"
    agreeing = scripted_server(scripted_answers(then=full))
    assert wave_log(agreeing, Adaptive(first_wave=5, wave=1), items=items)[0] == [(5, "stable")]
    # two of the first five leave beta out: beta met its neighbours 3 times (p = 1/8), then
    # 4 (1/16 > 1/20), then 5 (1/32)
    partial = scripted_server(scripted_answers("alpha gamma delta", "alpha gamma delta", then=full))
    waves, _ = wave_log(partial, Adaptive(first_wave=5, wave=1, zone=None), items=items)
    assert waves == [(5, "unsettled"), (6, "unsettled"), (7, "stable")]


def test_a_pair_the_model_cannot_decide_runs_to_the_cap(scripted_server) -> None:
    coin = ["alpha beta gamma delta", "beta alpha gamma delta"] * 4
    server = scripted_server(scripted_answers(*coin))
    waves, result = wave_log(
        server, Adaptive(first_wave=4, wave=2, zone=None), cap=8, items=[*ABC, "delta"]
    )
    assert waves == [(4, "unsettled"), (6, "unsettled"), (8, "cap")]
    assert len(result.samples) == 8 and result.usage.saved_calls == 0


def test_top_k_settles_the_top_even_when_the_bottom_is_a_coin_toss(scripted_server) -> None:
    answers = ["alpha beta gamma delta", "alpha beta delta gamma"] * 3
    items = [*ABC, "delta"]
    whole = scripted_server(scripted_answers(*answers, then="alpha beta gamma delta"))
    top = scripted_server(scripted_answers(*answers, then="alpha beta gamma delta"))
    assert wave_log(whole, Adaptive(first_wave=6, wave=2), items=items)[0][0] == (6, "unsettled")
    # top 2: alpha-beta and beta-gamma 6-0 (1/64 <= 0.05); gamma-delta 3-3 does not count
    assert wave_log(top, Adaptive(first_wave=6, wave=2, top_k=2), items=items)[0] == [(6, "stable")]


def test_sign_test_and_holm_on_counts() -> None:
    rankings = [(0, 1, 2)] * 5 + [(1, 0, 2)]
    assert sign_test(rankings, [(0, 1), (1, 2), (1, 0)], 3) == [7 / 64, 1 / 64, 63 / 64]
    assert sign_test([(0, 1), (2,)], [(1, 2)], 3) == [1.0]  # never met
    policy = Adaptive(confidence=0.9)
    assert policy.confident([0.049, 0.1]) and not policy.confident([0.051, 0.051])
    assert policy.confident([])  # a one-item part has nothing to establish
    # another source of p-values (e.g. first-token probabilities) plugs into the same test
    assert Adaptive(confidence=0.99).confident([0.001, 0.004, 0.01])
    assert not Adaptive(confidence=0.99).confident([0.001, 0.004, 0.011])
