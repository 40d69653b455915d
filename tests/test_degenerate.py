"""Degenerate answers (issue 39): echoes of the order shown and windows answered with fewer
than half their items are named on the result and warned about; under a budget the consensus
leaves frequent echoes out (``ECHO_SHARE``) and the frontier shrinks windows that come back
degenerate. Through the real openai client against a scripted server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import logging
import math

import pytest

from permsc_integrations.results import answer_defect
from permsc_integrations.strategies._frontier import Answer, rounds
from permsc_integrations.strategies._frontier.policy import Frontier, Settings
from permsc_integrations.testing import ChatRequest, Reply, oracle_responder
from permsc_integrations.testing._responders import shown_passages

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(120)

N = 40
TEXTS = [f"item {k}" for k in range(N)]  # item k is the k-th best


def _rank_of(text: str) -> int:
    return int(text.split()[-1])


def _answer(positions: list[int]) -> Reply:
    return Reply(" > ".join(f"[{p + 1}]" for p in positions))


def _coin(request: ChatRequest) -> float:
    """A share in [0, 1) fixed by the prompt (the same prompt, the same answer)."""
    return int(hashlib.sha256(request.text.encode()).hexdigest()[:8], 16) / 2**32


def echoing(share: float):
    """Copies the order shown in ``share`` of its prompts (by the prompt), else answers right."""

    def respond(request: ChatRequest) -> Reply:
        shown = shown_passages(request.messages)
        if _coin(request) < share:
            return _answer(list(range(len(shown))))
        return _answer(sorted(range(len(shown)), key=lambda p: _rank_of(shown[p])))

    return respond


def stuck_above(size: int):
    """Answers windows of up to ``size`` items right; a longer one with its best item
    repeated (the 1.5B model's ``calamity`` eight times over)."""

    def respond(request: ChatRequest) -> Reply:
        shown = shown_passages(request.messages)
        best = min(range(len(shown)), key=lambda p: _rank_of(shown[p]))
        if len(shown) > size:
            return _answer([best] * len(shown))
        return _answer(sorted(range(len(shown)), key=lambda p: _rank_of(shown[p])))

    return respond


@pytest.mark.parametrize(
    ("shown", "ranking", "defect"),
    [
        ((3, 1, 2, 0), (3, 1, 2, 0), "echo"),
        ((3, 1, 2, 0, 4), (3, 2, 0, 4), "echo"),  # a partial copy is still a copy
        ((3, 1, 2, 0), (0, 1, 2, 3), None),
        ((3, 1, 2), (3, 1, 2), None),  # three items in the order shown: by chance 1 in 6
        ((3, 1, 2, 0), (0, 2, 1, 3), "reversed"),  # the copy read backwards
        ((3, 1, 2, 0, 4), (4, 2, 1, 3), "reversed"),
        ((3, 1, 2), (2, 1, 3), None),
        ((0, 1, 2, 3, 4, 5), (4, 2), "sparse"),
        ((0, 1, 2, 3, 4, 5), (4, 2, 5), None),  # half the window is an answer
    ],
)
def test_the_one_rule_names_copies_and_sparse_answers(shown, ranking, defect) -> None:
    assert answer_defect(shown, ranking) == defect


def test_a_budget_over_echoing_answers_gets_the_consensus_of_the_others(
    scripted_server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_server(echoing(0.5))
    with caplog.at_level(logging.WARNING, "permsc_integrations"):
        with server.ranker(max_calls=12, top_k=10, window_size=10, seed=3) as ranker:
            result = ranker.rank("which item is best?", TEXTS)
    echoes = [s for s in result.samples if s.defect == "echo"]
    assert result.strategy == "frontier" and result.usage.calls == 12
    assert len(result.degenerate) == len(echoes) >= 4  # copies of a shuffled order
    sound = [s.ranking for s in result.samples if s.ok and s.defect is None]
    assert sorted(result.order[:10]) == list(range(10))
    assert _against(result.order, sound) == 0  # the answers that sorted decide alone
    assert any("echoed the order shown" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(rounds, "ECHO_SHARE", math.inf)  # the echoes read as answers
    with server.ranker(max_calls=12, top_k=10, window_size=10, seed=3) as ranker:
        echoed = ranker.rank("which item is best?", TEXTS)
    sound = [s.ranking for s in echoed.samples if s.ok and s.defect is None]
    assert _against(echoed.order, sound) > 0


def copying(reverse_share: float):
    """Copies the order shown, backwards in ``reverse_share`` of its prompts (the embedded
    1.5B model on DL19 windows: 14 echoes and one reversal of 15)."""

    def respond(request: ChatRequest) -> Reply:
        shown = list(range(len(shown_passages(request.messages))))
        return _answer(shown[::-1] if _coin(request) < reverse_share else shown)

    return respond


def test_a_budget_over_nothing_but_copies_keeps_the_first_stage_order(
    scripted_server, caplog: pytest.LogCaptureFixture
) -> None:
    """Every window shuffled, every answer a copy of it (some backwards): the answers say
    nothing, so the first-stage order stands, and the result says why."""
    server = scripted_server(copying(0.2))
    with caplog.at_level(logging.WARNING, "permsc_integrations"):
        with server.ranker(max_calls=12, top_k=10, window_size=10, seed=3) as ranker:
            result = ranker.rank("which item is best?", TEXTS)
    defects = [s.defect for s in result.samples if s.ok]
    assert (
        result.usage.calls == 12 and "reversed" in defects and set(defects) <= {"echo", "reversed"}
    )
    assert result.order[:10] == tuple(range(10))
    assert result.degenerate_note is not None and "reversed it" in result.degenerate_note
    assert any("reversed it" in r.getMessage() for r in caplog.records)


def _against(order: tuple[int, ...], answers: list[tuple[int, ...]]) -> int:
    """The pairs of the top 10 that ``order`` puts the other way from an answer."""
    place = {item: p for p, item in enumerate(order)}
    return sum(
        1
        for answer in answers
        for p, a in enumerate(answer)
        for b in answer[p + 1 :]
        if min(place[a], place[b]) < 10 and place[a] > place[b]
    )


def test_rare_echoes_are_not_warned_about(scripted_server, caplog) -> None:
    server = scripted_server(echoing(0.1))
    with caplog.at_level(logging.WARNING, "permsc_integrations"):
        with server.ranker(num_permutations=3, window_size=10, seed=1) as ranker:
            result = ranker.rank("which item is best?", TEXTS)
    answered = [s for s in result.samples if s.ok]
    assert 1 <= len(result.degenerate) < len(answered) / 3
    assert not [r for r in caplog.records if "degenerate" in r.getMessage()]


def test_a_window_answered_degenerately_shrinks_the_later_rounds(scripted_server, caplog) -> None:
    server = scripted_server(stuck_above(7))
    with caplog.at_level(logging.WARNING, "permsc_integrations"):
        with server.ranker(max_calls=10, top_k=5, window_size=10, seed=2) as ranker:
            result = ranker.rank("which item is best?", TEXTS)
    first, *later = result.windows
    assert {len(s.permutation) for s in first.samples} == {10}
    assert all(s.defect == "sparse" for s in first.samples)  # one item, named ten times
    sizes = {len(s.permutation) for w in later for s in w.samples}
    assert later and max(sizes) <= 7  # 10 -> 7: the model answers those
    assert all(s.defect is None for w in later for s in w.samples)
    assert result.order[:5] == (0, 1, 2, 3, 4)
    messages = [r.getMessage() for r in caplog.records]
    assert any("windows of 7" in m for m in messages)
    assert any("named fewer than half" in m for m in messages)


@pytest.mark.parametrize(
    ("unread", "sparse", "sound", "window"),
    [(0, 0, 4, 12), (2, 0, 4, 8), (0, 2, 4, 8), (1, 0, 4, 12), (4, 0, 0, 8)],
)
def test_unread_and_sparse_answers_shrink_the_window_by_a_third(unread, sparse, sound, window):
    """A third of the round's answered windows unreadable or sparse: 12 -> 8; fewer: as is.
    (A backend's errors are not the model's answers: the driver counts only unreadable ones.)"""
    policy = Frontier(60, Settings(k=5, window=12, budget=12))
    windows = policy.next_round()
    good = [Answer(w, tuple(sorted(w))) for w in windows[:sound]]
    thin = [Answer(w, w[:2]) for w in windows[:sparse]]
    policy.observe([*good, *thin], unread=unread)
    assert policy.window == window


def test_the_window_never_shrinks_below_four_nor_grows() -> None:
    policy = Frontier(60, Settings(k=5, window=5, budget=30))
    for _ in range(3):
        policy.next_round()
        policy.observe([], unread=3)
    assert policy.window == 4
    small = Frontier(60, Settings(k=2, window=3, budget=30))
    small.next_round()
    small.observe([], unread=3)
    assert small.window == 3


def test_the_same_answers_without_budget_rank_as_plain_psc(scripted_server) -> None:
    """Blocks (plain PSC) reads every answer, echoes too: the rule is the frontier's."""
    server = scripted_server(echoing(0.5))
    with server.ranker(num_permutations=2, window_size=10, seed=3) as ranker:
        result = ranker.rank("which item is best?", TEXTS)
    assert result.strategy == "blocks" and result.degenerate


def test_a_budget_shows_the_tail_where_the_input_order_tells_nothing(scripted_server) -> None:
    """35 items sent worst first, 5 calls of 10: the first round affords 30 (two calls kept
    for later), its answers show the input order tells nothing, so the last 5 (the best) are
    shown next rather than left in input order behind the head (issue 39)."""
    texts = TEXTS[:35][::-1]  # the best last: the first-stage order is no evidence
    server = scripted_server(oracle_responder(lambda text: -_rank_of(text)))
    with server.ranker(max_calls=5, top_k=5, window_size=10, seed=4) as ranker:
        result = ranker.rank("which item is best?", texts)
    assert result.usage.calls == 5 and result.head == 35
    assert [texts[i] for i in result.order[:3]] == ["item 0", "item 1", "item 2"]
    first = result.windows[0]
    assert max(i for s in first.samples for i in s.permutation) < 30  # the head, at first
