"""The one declaration of the ranking options: validation at construction, unknown names
refused, the same options behind PSCRanker and the command line, no secret in a repr."""

from __future__ import annotations

import dataclasses

import pytest

from permsc_integrations import PSCRanker, RankingOptions, RetryPolicy
from permsc_integrations.cli import build_parser
from permsc_integrations.cli._common import cli_options
from permsc_integrations.errors import ConfigurationError, UnknownNameError

BAD = [
    ("num_permutations", 2.5),
    ("num_permutations", 0),
    ("num_permutations", True),
    ("max_words", 0),
    ("seed", "abc"),
    ("seed", 1.0),
    ("temperature", "hot"),
    ("temperature", -1),
    ("temperature", float("nan")),
    ("timeout", 0),
    ("timeout", "60"),
    ("window_size", 1),
    ("top_k", 0),
    ("max_tokens", 0),
    ("max_concurrency", 0),
    ("request_concurrency", 0),
    ("reasks", -1),
    ("min_successful", 0),
    ("include_identity", "yes"),
    ("retry", {"max_attempts": 0}),
    ("retry", "fast"),
    ("cache", "cache.sqlite"),
    ("backend_options", ["base_url"]),
    ("prompt", 42),
    ("aggregator", 42),
]


class Answers:
    """A backend that counts its calls and always answers the identity ranking."""

    name = "answers"

    def __init__(self) -> None:
        self.calls = 0

    async def acomplete(self, messages, settings):
        from permsc_integrations import Completion

        self.calls += 1
        n = sum(1 for m in messages if m["role"] == "user") - 2
        return Completion(text=" > ".join(f"[{i + 1}]" for i in range(n)))

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(("name", "value"), BAD, ids=[f"{n}={v!r}" for n, v in BAD])
def test_a_bad_value_is_refused_at_construction_naming_the_option(name, value) -> None:
    with pytest.raises(ConfigurationError, match=name):
        RankingOptions(**{name: value})
    backend = Answers()
    with pytest.raises(ConfigurationError, match=name):
        PSCRanker(backend, **{name: value})
    assert backend.calls == 0


def test_cross_option_rules() -> None:
    with pytest.raises(ConfigurationError, match="step"):
        RankingOptions(window_size=10, step=10, strategy="sliding")
    # only the sliding windows read step: blocks take window_size=10 with the default step
    assert RankingOptions(window_size=10).step == 10
    with pytest.raises(ConfigurationError, match="min_successful"):
        RankingOptions(num_permutations=4, min_successful=5)


def test_a_cross_option_rule_has_one_message_wherever_it_is_checked() -> None:
    """The options, the window plan (callable with raw values) and the ranker share the rule's
    check (_checks.py): one message, naming the bound and why."""
    from permsc_integrations.strategies._window_plan import plan_windows
    from permsc_integrations.testing import ScriptedBackend

    step = (
        "step must be in 1..window_size-1 (9) so that sliding windows overlap and carry the "
        "best items forward, got 10"
    )
    for make in (
        lambda: RankingOptions(window_size=10, step=10, strategy="sliding"),
        lambda: plan_windows(30, window_size=10, step=10),
    ):
        with pytest.raises(ConfigurationError) as info:
            make()
        assert str(info.value) == step
    needed = "min_successful must be in 1..num_permutations (4), got 5"
    for make in (
        lambda: RankingOptions(num_permutations=4, min_successful=5),
        lambda: PSCRanker(ScriptedBackend(), num_permutations=4, min_successful=5),
    ):
        with pytest.raises(ConfigurationError) as info:
            make()
        assert str(info.value) == needed


def test_unknown_names_are_refused_with_a_suggestion() -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        PSCRanker(Answers(), num_permutation=5)
    with pytest.raises(ConfigurationError, match="unknown option 'backend_kwargs'"):
        PSCRanker("openai:m", backend_kwargs={"base_url": "http://127.0.0.1:9/v1"})
    with pytest.raises(UnknownNameError, match="kemeney"):
        PSCRanker(Answers(), aggregator="kemeney")


def test_options_object_and_keywords_combine() -> None:
    base = RankingOptions(num_permutations=4, seed=7)
    ranker = PSCRanker(Answers(), options=base, seed=8)
    assert ranker.options == dataclasses.replace(base, seed=8)
    assert ranker._engine.options.num_permutations == 4
    with pytest.raises(ConfigurationError, match="RankingOptions"):
        PSCRanker(Answers(), options={"num_permutations": 4})


def test_values_are_normalised() -> None:
    options = RankingOptions(temperature=1, timeout=5, retry=None, backend_options=None)
    assert options.temperature == 1.0 and isinstance(options.temperature, float)
    assert options.retry == RetryPolicy() and options.backend_options == {}
    assert options.generation.timeout == 5.0


@pytest.mark.parametrize("query", [None, 123, b"bytes", ["q"]])
async def test_a_query_that_is_not_a_string_is_refused_before_any_call(query) -> None:
    backend = Answers()
    ranker = PSCRanker(backend, num_permutations=2)
    with pytest.raises(ConfigurationError, match="query must be a str"):
        await ranker.arank(query, ["a", "b", "c"])
    assert backend.calls == 0


def test_backend_options_need_a_spec_string() -> None:
    with pytest.raises(ConfigurationError, match="spec-string backend only"):
        PSCRanker(Answers(), backend_options={"base_url": "http://127.0.0.1:9/v1"})


def test_repr_names_backend_options_but_never_their_values() -> None:
    secret = "sk-very-secret-key"
    options = RankingOptions(
        num_permutations=5, backend_options={"api_key": secret, "base_url": "http://u:pw@h/v1"}
    )
    text = repr(options)
    assert "num_permutations=5" in text and "api_key" in text and "base_url" in text
    assert secret not in text and "pw" not in text


def test_every_option_is_described_and_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text()
    infos = list(RankingOptions.describe())
    assert [i.name for i in infos] == list(RankingOptions.names())
    for info in infos:
        assert info.help and info.applies
        assert f"`{info.name}`" in doc, f"{info.name} missing from docs/options.md"


def test_the_command_line_derives_its_flags_and_defaults_from_the_declaration() -> None:
    parser = build_parser()
    args = parser.parse_args(["rank", "-i", "x.jsonl"])
    assert cli_options(args) == RankingOptions()  # nothing given: the declared defaults
    args = parser.parse_args(
        ["rank", "-i", "x.jsonl", "-m", "6", "--max-concurrency", "3", "--temperature", "0.5"]
    )
    given = cli_options(args)
    assert (given.num_permutations, given.max_concurrency, given.temperature) == (6, 3, 0.5)
    assert parser.parse_args(["rank", "-i", "x", "--concurrency", "4"]).max_concurrency == 4
    local = cli_options(parser.parse_args(["rank", "-i", "x", "--window-size", "12"]), "embedded")
    assert local.timeout is None and local.max_tokens == 8 + 6 * 12


def test_a_bad_flag_value_fails_with_the_options_message(capsys) -> None:
    from permsc_integrations.cli import main

    assert main(["estimate", "-i", "missing.jsonl", "--max-words", "0"]) == 2
    assert "max_words must be an int >= 1" in capsys.readouterr().err


def test_the_rankers_typed_keywords_are_the_declarations_options_in_order() -> None:
    from permsc_integrations._ranker.ranker import RankingKeywords

    assert tuple(RankingKeywords.__annotations__) == RankingOptions.names()
    assert not RankingKeywords.__required_keys__  # every keyword is optional


def test_a_built_ranker_refuses_writes_it_would_ignore_and_says_what_to_do() -> None:
    backend = Answers()
    ranker = PSCRanker(backend, num_permutations=4)
    with pytest.raises(ConfigurationError, match=r"options\.replace\(num_permutations=\.\.\.\)"):
        ranker.num_permutations = 2
    with pytest.raises(ConfigurationError, match="did you mean 'num_permutations'"):
        ranker.num_permutation = 3
    with pytest.raises(ConfigurationError, match="'aggregator' would be ignored"):
        ranker.aggregator = "kemeni"
    for name in ("options", "backend"):
        with pytest.raises(ConfigurationError, match=f"PSCRanker.{name} is fixed"):
            setattr(ranker, name, None)
    events: list[object] = []
    ranker.on_event = events.append  # read on every request: honoured
    assert ranker.rank("q", ["a", "b", "c"]).usage.calls == 4 == backend.calls
    assert events and ranker.options.num_permutations == 4
    assert not hasattr(ranker, "num_permutations") and not hasattr(ranker, "num_permutation")
    rebuilt = PSCRanker(backend, options=ranker.options.replace(num_permutations=2))
    assert rebuilt.rank("q", ["a", "b", "c"]).usage.calls == 2


def test_every_option_with_a_flag_type_is_a_flag_of_every_ranking_command() -> None:
    """A new option declared with ``cli=`` is a flag of ``permsc rank``, ``estimate`` and
    ``serve`` by being declared (``serve`` also takes the service's own, breaker_cooldown)."""
    import argparse

    from permsc_integrations.cli._common import BACKEND_FLAGS, SERVICE_FLAGS

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flagged = {info.name for info in RankingOptions.describe() if info.cli_type is not None}
    assert {"num_permutations", "adaptive", "request_cap", "timeout"} <= flagged
    left_out = {"rank": SERVICE_FLAGS, "serve": (), "estimate": (*SERVICE_FLAGS, *BACKEND_FLAGS)}
    for command, absent in left_out.items():  # estimate sends no call: no backend flags
        dests = {action.dest for action in commands.choices[command]._actions}
        assert flagged - dests == set(absent), command
