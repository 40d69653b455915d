"""Cutting local answers caught in a loop (backends/loops.py)."""

from __future__ import annotations

import pytest

from permsc_integrations.backends.local._repetition import LoopStop, repeats_itself

WORDS = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]  # ten one-token "words", no repeats
NEWLINE = 2


def lines(*words: int) -> list[int]:
    return [t for w in words for t in (w, NEWLINE)]


def test_a_ranking_without_repeats_is_not_a_loop() -> None:
    assert not repeats_itself(lines(*WORDS))
    assert not repeats_itself([])


def test_one_word_said_over_and_over_is_a_loop_once_it_fills_the_span() -> None:
    answer = lines(11, 12) + lines(*[13] * 15)  # 30 tokens of "13\n"
    assert not repeats_itself(answer)
    assert repeats_itself(answer + lines(13))  # 32 tokens


def test_the_same_lines_again_and_again_are_a_loop_after_two_turns() -> None:
    cycle = lines(13, 14, 15, 16, 17, 18, 19, 20)  # 16 tokens
    assert not repeats_itself([11, 3] + cycle + cycle[:-1])  # one token short of two turns
    assert repeats_itself([11, 3] + cycle + cycle)


def test_a_short_repeat_a_list_may_legitimately_hold_is_not_a_loop() -> None:
    # "1 + 1" twice in a MathSort list: named twice, one after the other
    assert not repeats_itself(lines(11, 12) + [5, 6, 5, NEWLINE] * 2 + lines(13))
    assert not repeats_itself([5, 6, 5, NEWLINE] * 7)  # 28 tokens: under the span


def test_the_limits_are_arguments() -> None:
    assert repeats_itself([7, 7, 7, 7], min_span=4)
    assert not repeats_itself([1, 2, 3, 1, 2, 3], max_period=2, min_span=4)


def test_the_criterion_stops_looping_rows_only_and_remembers_where() -> None:
    torch = pytest.importorskip("torch")
    prompt = [[1, 1, 1], [0, 1, 1], [1, 1, 1]]  # padded prompts: width 3
    eos = 99
    generated = [
        lines(*WORDS, *WORDS[:7]),  # a long answer, no loop
        lines(11) + [13, NEWLINE] * 16,  # looping
        lines(11, 12) + [eos] * 30,  # ended, then padding (pad = eos)
    ]
    criterion = LoopStop(torch, width=3, eos=[eos])
    ids = torch.tensor([p + g[:30] for p, g in zip(prompt, generated, strict=True)])
    assert criterion(ids, None).tolist() == [False, False, False]
    ids = torch.tensor([p + g[:34] for p, g in zip(prompt, generated, strict=True)])
    assert criterion(ids, None).tolist() == [False, True, False]
    assert criterion.cut == {1: 34}
    later = torch.tensor([p + g[:34] + [0, 0] for p, g in zip(prompt, generated, strict=True)])
    assert criterion(later, None).tolist() == [False, True, False]
    assert criterion.cut == {1: 34}  # where the loop was seen first
