"""Sorting datasets, their quirks, the tie-aware tau and the generators."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from scipy.stats import kendalltau

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.eval import generate_mathsort, kendall_tau_b, load_sorting
from permsc_integrations.eval._datasets import (
    SortingExample,
    default_data_dir,
    load_gsm8ksort,
    load_mathsort,
    load_wordsort,
    split_sentences,
)
from permsc_integrations.eval._generators import generate_wordsort

DATA = default_data_dir()
needs_data = pytest.mark.skipif(not (DATA / "mathsort.tsv").is_file(), reason="perm-sc data absent")


@needs_data
def test_mathsort_counts_its_ties_and_repeats() -> None:
    ds = load_mathsort()
    assert len(ds) == 100 and all(len(e.items) == 10 for e in ds)
    assert ds.stats["lists_with_ties"] == 38 and ds.stats["tied_pairs"] == 47
    assert ds.stats["lists_with_duplicate_items"] == 6
    group7 = next(e for e in ds if e.id == "mathsort-7")
    assert group7.items.count("9 + 1") == 2
    for example in ds:  # the truth really sorts by value
        values = [example.keys[i] for i in example.truth]
        assert values == sorted(values)


@needs_data
def test_wordsort_and_gsm8ksort_loaders() -> None:
    words = load_wordsort()
    assert len(words) == 100 and words.stats["tied_pairs"] == 0
    first = words.examples[0]
    assert [first.items[i] for i in first.truth] == sorted(first.items)
    gsm = load_sorting("gsm8ksort")
    assert gsm.stats["questions"] == 100
    assert len(gsm) == gsm.stats["examples"] == 100 - gsm.stats["dropped"]
    assert 5 <= len(gsm) <= 20  # the 5-10 sentence filter leaves few (11 with this splitter)
    assert all(5 <= len(e.items) <= 10 and e.truth == tuple(range(len(e.items))) for e in gsm)


def test_missing_file_and_unknown_task_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="mathsort.tsv"):
        load_mathsort(tmp_path)
    with pytest.raises(ConfigurationError, match="unknown sorting task"):
        load_sorting("numbersort")


def test_gsm8k_sentence_filter_bounds(tmp_path: Path) -> None:
    (tmp_path / "gsm8ksort.jsonl").write_text(
        '{"question": "A b. C d. E f. G h. I j?", "answer": "1"}\n'
        '{"question": "Too short. Really?", "answer": "2"}\n',
        encoding="utf-8",
    )
    ds = load_gsm8ksort(tmp_path)
    assert ds.stats["examples"] == 1 and ds.stats["dropped"] == 1
    assert split_sentences("It is $2.50 each. Why? Yes!") == ["It is $2.50 each.", "Why?", "Yes!"]


def test_tau_matches_scipy_without_ties_and_forgives_tied_pairs() -> None:
    keys = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    for order in itertools.islice(itertools.permutations(range(6)), 0, 720, 37):
        ranks = [order.index(i) for i in range(6)]
        assert kendall_tau_b(order, keys) == pytest.approx(kendalltau(ranks, keys)[0])
    tied = [2.0, 1.0, 1.0]
    assert kendall_tau_b((1, 2, 0), tied) == kendall_tau_b((2, 1, 0), tied) == 1.0
    assert kendall_tau_b((0, 1, 2), tied) == -1.0
    assert kendall_tau_b((), [1, 2, 3]) == 0.0  # nothing answered scores like chance
    assert kendall_tau_b((0,), [1, 2, 3]) == pytest.approx(2 / 3)  # missing items share last place
    example = SortingExample("x", ("a", "b", "c"), tied, "mathsort")
    assert example.tied_pairs == 1 and example.truth == (1, 2, 0)


def test_generated_mathsort_has_unique_values_and_is_deterministic() -> None:
    ds = generate_mathsort(30, seed=5)
    assert ds == generate_mathsort(30, seed=5) and ds != generate_mathsort(30, seed=6)
    for example in ds:
        assert len(set(example.keys)) == 10 and len(set(example.items)) == 10
        for expr, value in zip(example.items, example.keys, strict=True):
            a, op, b = expr.split()
            assert 1 <= int(a) <= 9 and 1 <= int(b) <= 9 and op in "+-*/"
            assert eval(expr) == pytest.approx(value)  # noqa: S307 (our own digits)
    assert ds.stats["tied_pairs"] == 0


def test_generated_wordsort_mixes_five_consecutive_words_with_five_random() -> None:
    vocab = sorted(f"{a}{b}{c}" for a in "abcdefghij" for b in "klmnop" for c in "qrstu")
    ds = generate_wordsort(20, seed=1, words=vocab)
    for example in ds:
        assert len(set(example.items)) == 10
        positions = sorted(vocab.index(w) for w in example.items)
        runs = [positions[k : k + 5] for k in range(6)]
        assert any(r == list(range(r[0], r[0] + 5)) for r in runs)  # five neighbours in the list


def test_default_word_list_is_offline_and_large() -> None:
    pytest.importorskip("english_words")
    ds = generate_wordsort(3, seed=0)
    assert all(len(e.items) == 10 and all(w.isalpha() and w.islower() for w in e.items) for e in ds)
