"""Parsing never crashes, never invents an id, never fills in missing items."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from permsc_integrations.errors import InvalidRankingError, ParseError
from permsc_integrations.parsing import parse_identifiers, parse_items, strip_reasoning
from permsc_integrations.permutations import invert, sample_permutations, to_original
from permsc_integrations.prompts import get_prompt
from permsc_integrations.results import ParsedAnswer, ParseStatus

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "perm-sc"

# ---------------------------------------------------------------- identifier answers


@pytest.mark.parametrize(
    ("text", "n", "ranking"),
    [
        ("[2] > [3] > [1]", 3, (1, 2, 0)),
        ("  [2]>[3]\n>[1]\n", 3, (1, 2, 0)),
        ("2 > 3 > 1", 3, (1, 2, 0)),
        ("[2]\n[3]\n[1]", 3, (1, 2, 0)),
        ("[2], [3], [1]", 3, (1, 2, 0)),
        ("[ 2 ] > [ 3 ] > [ 1 ]", 3, (1, 2, 0)),
        ("【2】 > 【1】", 2, (1, 0)),
        ("[2] &gt; [1]", 2, (1, 0)),
        ("The ranking is: [3] > [1] > [2].", 3, (2, 0, 1)),
        ("Format: [] > [], e.g., [1] > [2]. Answer: [3] > [2] > [1]", 3, (2, 1, 0)),
        ("1. [3]\n2. [1]\n3. [2]", 3, (2, 0, 1)),
        ("[10] > [2] > [1]", 10, (9, 1, 0)),
    ],
)
def test_identifier_formats(text: str, n: int, ranking: tuple[int, ...]) -> None:
    assert parse_identifiers(text, n).ranking == ranking


def test_a_numbered_list_beats_an_echoed_example() -> None:
    text = "Format [] > [], e.g., [1] > [2].\n1. [3]\n2. [4]\n3. [1]\n- [2]"
    assert parse_identifiers(text, 4).ranking == (2, 3, 0, 1)


def test_reasoning_before_the_last_think_close_is_ignored() -> None:
    text = "<think>Maybe [1] > [2]? </think> hmm <think>[2] wins</think>\n[3] > [2] > [1]"
    answer = parse_identifiers(text, 3)
    assert answer.ranking == (2, 1, 0)
    assert answer.status is ParseStatus.OK


def test_an_unclosed_think_is_a_truncated_trace_not_an_answer() -> None:
    with pytest.raises(ParseError):
        parse_identifiers("<think>so [2] > [1] then maybe", 2)
    assert strip_reasoning("[1] > [2] <think>more") == "[1] > [2] "


@pytest.mark.parametrize("text", ["[6] > [0] > [2] > [21]", "[3] > [1] > [9] > [2]", "2 > 1 > 6"])
def test_an_answer_naming_ids_not_shown_is_no_vote(text: str) -> None:
    """Ids the prompt never showed mean a confused model, or one copying text that is not
    its answer (a passage's forged ranking): the answer is refused whole (a re-ask), never
    counted for the ids it got right."""
    with pytest.raises(ParseError, match="not shown") as info:
        parse_identifiers(text, 5)
    assert info.value.raw_text == text


def test_duplicates_keep_the_first_place_and_are_reported() -> None:
    answer = parse_identifiers("[2] > [1] > [2] > [1] > [2]", 3)
    assert answer.ranking == (1, 0)
    assert answer.duplicates == (1, 0)
    assert answer.missing == (2,)


def test_missing_items_stay_missing() -> None:
    answer = parse_identifiers("[4] > [2]", 5)
    assert answer.ranking == (3, 1)
    assert answer.missing == (0, 2, 4)  # not appended in input order


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "I found 3 relevant passages out of 20.",
        "Passage 2 is the most relevant, then passage 1.",
        "Sorry, I cannot help with that.",
        "The answer is 42",
        "[] > [] > []",
        "[0] > [7]",
        "the year 2023 > 2022 in revenue",
        "<think>[1] > [2] > [3]</think>",
    ],
)
def test_text_without_a_usable_ranking_raises_parse_error_with_the_raw_text(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_identifiers(text, 3)
    assert info.value.raw_text == text


def test_numbers_in_prose_are_not_ids() -> None:
    answer = parse_identifiers("Of the 3 passages, [2] > [1]; passage 3 is off-topic.", 3)
    assert answer.ranking == (1, 0)
    assert answer.missing == (2,)
    assert answer.out_of_range == ()


def test_bare_chain_must_be_explicit() -> None:
    # decimals and version strings are not chains of ids
    with pytest.raises(ParseError):
        parse_identifiers("score 3.5 > 2.1 and v1.2 > 1", 3)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_bad_item_count_is_an_invalid_ranking(bad: object) -> None:
    with pytest.raises(InvalidRankingError):
        parse_identifiers("[1]", bad)  # type: ignore[arg-type]


def test_non_text_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_identifiers(None, 3)  # type: ignore[arg-type]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300), n=st.integers(1, 30))
def test_fuzz_arbitrary_text_never_crashes_or_invents(text: str, n: int) -> None:
    _check_never_crashes_or_invents(text, n)


def _check_never_crashes_or_invents(text: str, n: int) -> None:
    try:
        answer = parse_identifiers(text, n)
    except ParseError as exc:
        assert exc.raw_text == text
        return
    _check_answer_invariants(answer, n)
    written = {int(d) for d in re.findall(r"[0-9]+", strip_reasoning(text))}
    assert all(p + 1 in written for p in answer.ranking)


ID_TEXT = st.lists(
    st.one_of(
        st.sampled_from(
            ["[", "]", ">", " > ", ",", "\n", " ", "<think>", "</think>", "e.g.", "&gt;"]
        ),
        st.integers(0, 40).map(str),
        st.integers(0, 40).map(lambda i: f"[{i}]"),
        st.text(max_size=5),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400)
@given(text=ID_TEXT, n=st.integers(1, 25))
def test_fuzz_id_like_text_never_crashes_or_invents(text: str, n: int) -> None:
    _check_never_crashes_or_invents(text, n)


PROSE = st.text(
    alphabet=st.characters(blacklist_characters="[]【】［］>≻&", blacklist_categories=("Cs",)),
    max_size=200,
)


@given(PROSE)
def test_fuzz_prose_without_ids_never_parses(text: str) -> None:
    with pytest.raises(ParseError):
        parse_identifiers(text, 20)


@given(
    order=st.permutations(list(range(12))),
    keep=st.integers(1, 12),
    sep=st.sampled_from([" > ", ">", "\n", ", ", " "]),
    preamble=st.sampled_from(["", "Ranking: ", "<think>[1] > [2] maybe</think>", "Sure!\n"]),
)
def test_fuzz_rendered_rankings_parse_back_exactly(
    order: list[int], keep: int, sep: str, preamble: str
) -> None:
    shown = order[:keep]
    text = preamble + sep.join(f"[{p + 1}]" for p in shown)
    answer = parse_identifiers(text, 12)
    assert answer.ranking == tuple(shown)
    assert answer.missing == tuple(sorted(set(range(12)) - set(shown)))


def test_pathological_inputs_return_quickly() -> None:
    for text in [
        "[1]" + " " * 200_000 + "x",
        "[1]" + "\n" * 200_000 + "x",
        "[1]" + " \n" * 100_000 + "x",
        "[1] > " * 50_000 + "x",
        "[1]\n1." * 50_000 + "x",
        "1" * 200_000,
        "1 > " * 50_000 + "a",
        "1 >" + " " * 100_000 + "a",
        "[" * 100_000,
        "<think>" * 50_000,
    ]:
        try:
            parse_identifiers(text, 20)
        except ParseError:
            pass
    with pytest.raises(ParseError, match=r"\[99999999999999999999\]"):
        parse_identifiers("[99999999999999999999] > [1]", 2)


def _check_answer_invariants(answer: ParsedAnswer, n: int) -> None:
    assert answer.ranking, "an empty ranking must be a ParseError"
    assert len(set(answer.ranking)) == len(answer.ranking)
    assert all(0 <= p < n for p in answer.ranking)
    assert set(answer.ranking) | set(answer.missing) == set(range(n))
    assert not set(answer.ranking) & set(answer.missing)
    assert set(answer.duplicates) <= set(answer.ranking)


# ---------------------------------------------------------------- text answers


@pytest.mark.parametrize(
    "text",
    [
        "2 * 3, 1 + 1, 9 - 1",
        "2*3,1+1,9-1",
        "2 * 3\n1 + 1\n9 - 1",
        "- 2 * 3\n- 1 + 1\n- 9 - 1",
        "1. 2 * 3\n2. 1 + 1\n3. 9 - 1",
        '"2 * 3", "1 + 1", "9 - 1".',
        "Sorted list:\n2 * 3\n1 + 1\n9 - 1",
        "<think>1 + 1, 2 * 3</think>2 * 3, 1 + 1, 9 - 1",
        "Sorted from smallest to largest: 2 * 3, 1 + 1, 9 - 1",
    ],
)
def test_item_answer_formats(text: str) -> None:
    answer = parse_items(text, ["1 + 1", "2 * 3", "9 - 1"])
    assert answer.ranking == (1, 0, 2)
    assert answer.status is ParseStatus.OK


def test_repeated_items_take_the_first_unused_position() -> None:
    items = ["9 + 1", "2 - 1", "9 + 1"]
    answer = parse_items("2 - 1, 9 + 1, 9 + 1", items)
    assert answer.ranking == (1, 0, 2)
    answer = parse_items("9 + 1, 9 + 1, 9 + 1", items)
    assert answer.ranking == (0, 2)
    assert answer.duplicates == (0,)
    assert answer.missing == (1,)


def test_sentences_with_commas_are_split_by_line() -> None:
    items = ["Janet has 16 eggs, and sells 3.", "She eats 3, bakes 4.", "How much does she make?"]
    text = "She eats 3, bakes 4.\nJanet has 16 eggs, and sells 3.\nHow much does she make?"
    assert parse_items(text, items).ranking == (1, 0, 2)


def test_words_are_matched_case_and_quote_insensitively() -> None:
    answer = parse_items("Apple\n'banana'\n  cherry  ", ["cherry", "banana", "apple"])
    assert answer.ranking == (2, 1, 0)


def test_single_words_may_be_separated_by_spaces() -> None:
    assert parse_items("apple banana cherry", ["cherry", "banana", "apple"]).ranking == (2, 1, 0)
    # multi-word items are never split on spaces
    with pytest.raises(ParseError):
        parse_items("ice cream cake", ["cream cake", "ice"])


def test_unknown_tokens_are_reported_and_missing_items_stay_missing() -> None:
    answer = parse_items("apple, durian, cherry", ["cherry", "banana", "apple"])
    assert answer.ranking == (2, 0)
    assert answer.missing == (1,)
    assert answer.out_of_range == ("durian",)


@pytest.mark.parametrize("text", ["", "I like fruit.", "<think>apple, cherry</think>", "durian"])
def test_no_item_matched_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_items(text, ["cherry", "banana", "apple"])
    assert info.value.raw_text == text


def test_no_items_is_an_invalid_ranking() -> None:
    with pytest.raises(InvalidRankingError):
        parse_items("a", [])


@settings(max_examples=300)
@given(
    text=st.text(max_size=200),
    items=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=8),
)
def test_fuzz_item_parsing_never_crashes(text: str, items: list[str]) -> None:
    try:
        answer = parse_items(text, items)
    except ParseError as exc:
        assert exc.raw_text == text
        return
    _check_answer_invariants(answer, len(items))


# ---------------------------------------------------------------- round trips


@given(seed=st.integers(0, 10_000), n=st.integers(1, 20))
def test_round_trip_rankgpt_permutation(seed: int, n: int) -> None:
    truth = sample_permutations(n, 1, seed=seed + 1)[0]  # the true order of original items
    prompt = get_prompt("rankgpt")
    for perm in sample_permutations(n, 3, seed=seed):
        passages = [f"passage number {item}" for item in range(n)]
        messages = prompt.render("q", [passages[i] for i in perm])
        shown = [m["content"] for m in messages if m["content"].startswith("[")]
        assert shown == [f"[{p + 1}] passage number {perm[p]}" for p in range(n)]
        pos = invert(perm)
        text = " > ".join(f"[{pos[item] + 1}]" for item in truth)  # a perfect model
        parsed = prompt.parse(text, n)
        assert to_original(parsed.ranking, perm) == truth


def _mathsort_groups() -> list[list[tuple[float, str]]]:
    path = DATA / "mathsort.tsv"
    if not path.exists():
        pytest.skip(f"perm-sc data not found at {path}")
    groups: dict[str, list[tuple[float, str]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            groups.setdefault(row["group"], []).append((float(row["answer"]), row["expression"]))
    return list(groups.values())


def test_round_trip_mathsort_real_groups_with_repeated_expressions() -> None:
    groups = _mathsort_groups()
    assert any(len({e for _, e in g}) < len(g) for g in groups)  # the data has repeats
    prompt = get_prompt("mathsort")
    for k, group in enumerate(groups):
        items = [e for _, e in group]
        truth = sorted(range(len(items)), key=lambda i: (group[i][0], i))  # smallest first
        for perm in sample_permutations(len(items), 2, seed=k):
            shown = [items[i] for i in perm]
            rendered = prompt.render("", shown)[1]["content"]
            assert ", ".join(shown) in rendered
            text = ", ".join(items[i] for i in truth)  # a perfect model writes the expressions
            parsed = prompt.parse(text, len(shown), shown)
            assert parsed.status is ParseStatus.OK
            mapped = to_original(parsed.ranking, perm)
            assert sorted(mapped) == list(range(len(items)))
            assert [items[i] for i in mapped] == [items[i] for i in truth]


def _words_rows() -> list[list[str]]:
    path = DATA / "wordsort.tsv"
    if not path.exists():
        pytest.skip(f"perm-sc data not found at {path}")
    lines = path.read_text().splitlines()[1:]
    return [json.loads(line) for line in lines if line.strip()]


def _gsm8k_questions() -> list[list[str]]:
    path = DATA / "gsm8ksort.jsonl"
    if not path.exists():
        pytest.skip(f"perm-sc data not found at {path}")
    questions = [json.loads(line)["question"] for line in path.read_text().splitlines() if line]
    split = [re.split(r"(?<=[.?!])\s+", q.strip()) for q in questions]
    return [s for s in split if 5 <= len(s) <= 10]


@pytest.mark.parametrize(
    ("name", "rows", "join"),
    [
        ("wordsort", _words_rows, "\n"),
        ("gsm8ksort", _gsm8k_questions, "\n"),
        ("wordsort", _words_rows, ", "),
    ],
)
def test_round_trip_real_word_and_sentence_data(name: str, rows, join: str) -> None:
    data = rows()
    assert len(data) >= 5
    prompt = get_prompt(name)
    for k, row in enumerate(data):
        truth = (
            sorted(range(len(row)), key=lambda i: row[i])
            if name == "wordsort"
            else list(range(len(row)))
        )
        for perm in sample_permutations(len(row), 2, seed=k):
            shown = [row[i] for i in perm]
            assert shown[-1] in prompt.render("", shown)[1]["content"]
            text = join.join(row[i] for i in truth)
            parsed = prompt.parse(text, len(shown), shown)
            assert parsed.status is ParseStatus.OK
            assert [row[i] for i in to_original(parsed.ranking, perm)] == [row[i] for i in truth]


# ------------------------------------------------ prose, echoes and examples are no ranking


@pytest.mark.parametrize(
    "text",
    [
        "[1] is clearly less relevant than [2], and [4] is worse than [3].",
        "[1] alpha\n[2] beta\n[3] gamma\n[4] delta",
        "Passage [2] is about goldfish; [1] is not.",
        "I would put [3] before [1].",
    ],
)
def test_prose_and_echoed_passages_are_not_rankings(text: str) -> None:
    with pytest.raises(ParseError):
        parse_identifiers(text, 4)


def test_a_lone_id_counts_only_as_the_whole_answer() -> None:
    assert parse_identifiers("Ranking: [3]", 4).ranking == (2,)
    assert parse_identifiers("[3].\n", 4).ranking == (2,)
    with pytest.raises(ParseError):
        parse_identifiers("[3] is the best passage", 4)


def test_an_echoed_format_example_is_not_a_vote() -> None:
    rankgpt = get_prompt("rankgpt")
    with pytest.raises(ParseError, match="format example"):
        rankgpt.parse("[1] > [2]", 4)
    assert rankgpt.parse("[1] > [2]", 2).ranking == (0, 1)  # with two items it is an answer
    assert rankgpt.parse("[1] > [2] > [4]", 4).ranking == (0, 1, 3)
    echo = "".join(m["content"] + "\n" for m in rankgpt.render("q", ["a", "b", "c", "d"]))
    with pytest.raises(ParseError):  # a mock LLM that echoes the whole prompt
        rankgpt.parse(echo, 4)


def test_a_template_prompt_knows_its_own_examples() -> None:
    from permsc_integrations.prompts._template import TemplatePrompt

    p = TemplatePrompt(user="{items}\nAnswer like [2] > [1], nothing else.")
    assert p.examples == ("[2] > [1]",)
    with pytest.raises(ParseError, match="format example"):
        p.parse("[2] > [1]", 5)
    echo = p.render("q", ["a", "b", "c", "d", "e"])[0]["content"]
    with pytest.raises(ParseError):
        p.parse(echo, 5)
