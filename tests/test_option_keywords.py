"""The typed views of the options (_options/keywords.py) are generated from the one declaration
and in step with it: the file is what the script writes today, each type is what the option's
check accepts, and a new option reaches both views by being declared."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

from permsc_integrations import Prices, RetryPolicy, SpendingCap
from permsc_integrations._checks import at_least
from permsc_integrations._options import options as declaration
from permsc_integrations._options.keywords import OptionFields, RankingKeywords
from permsc_integrations._options.options import RankingOptions, _option
from permsc_integrations._ranker.ranker import RankingKeywords as ranker_keywords
from permsc_integrations.strategies._adaptive import Adaptive

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "generate_option_keywords.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_option_keywords", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_written_file_is_what_the_declaration_generates_today(generator: ModuleType) -> None:
    written = (ROOT / "permsc_integrations" / "_options" / "keywords.py").read_text()
    assert written == generator.render(RankingOptions, declaration), (
        "permsc_integrations/_options/keywords.py is stale: run "
        "python scripts/generate_option_keywords.py"
    )
    assert generator.main(["--check"]) == 0


def test_both_views_hold_every_option_in_order_with_what_it_accepts() -> None:
    keywords = typing.get_type_hints(RankingKeywords)
    assert tuple(keywords) == RankingOptions.names() == tuple(OptionFields.__annotations__)
    assert typing.get_type_hints(OptionFields) == keywords
    assert ranker_keywords is RankingKeywords and not RankingKeywords.__required_keys__
    kept = typing.get_type_hints(RankingOptions)
    for field in dataclasses.fields(RankingOptions):
        accepts = field.metadata["accepts"]
        assert keywords[field.name] == (kept[field.name] if accepts is None else accepts)
    # where a caller gives more than is kept, the view takes it and the check normalises it
    assert keywords["adaptive"] == bool | str | Adaptive | Mapping[str, object] | None
    assert kept["adaptive"] == Adaptive | None
    given = {"adaptive": "5,5", "request_cap": "calls=9", "prices": "1,2", "retry": None}
    options = RankingOptions(**given)
    assert isinstance(options.adaptive, Adaptive) and options.retry == RetryPolicy()
    assert options.request_cap == SpendingCap(calls=9) and options.prices == Prices(1.0, 2.0)


def test_a_new_option_reaches_both_views_by_being_declared(generator: ModuleType) -> None:
    """A new option (``max_seconds``), declared on a copy of the declaration: the script writes
    it into both views (the adapters' fields and the CLI flags read the declaration itself)."""
    extended = dataclasses.make_dataclass(
        "Extended",
        [("max_seconds", "int | None", _option(None, "seconds per request", at_least(1), cli=int))],
        bases=(RankingOptions,),
        frozen=True,
    )
    source = generator.render(extended, declaration)
    assert source.count("    max_seconds: int | None\n") == 1  # RankingKeywords
    assert source.count("    max_seconds: int | None = _DECLARED\n") == 1  # OptionFields
    module = ModuleType("permsc_integrations._probe")
    module.__package__ = "permsc_integrations"
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, "keywords.py", "exec"), vars(module))
    finally:
        del sys.modules[module.__name__]
    for view in (module.RankingKeywords, module.OptionFields):  # the written source runs
        assert list(view.__annotations__)[-1] == "max_seconds"


def test_an_accepted_type_must_be_named_in_the_declaration(generator: ModuleType) -> None:
    anonymous = dataclasses.make_dataclass(
        "Anonymous",
        [("odd", "int", _option(1, "odd", at_least(1), accepts=int | bytes))],
        bases=(RankingOptions,),
        frozen=True,
    )
    named = "odd: accepts= must be a type named in _options/options.py"
    with pytest.raises(SystemExit, match=named):
        generator.render(anonymous, declaration)
