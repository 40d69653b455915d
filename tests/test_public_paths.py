"""Public objects show the path users import (issue 37): ``PSCRanker.__module__`` is
``"permsc_integrations"``, not the private module that defines it; pickles (Ray ships values to
its actors), dataclass reprs, ``typing.get_type_hints`` and docs still work."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pydoc
import subprocess
import sys
import typing

import pytest

import permsc_integrations
from permsc_integrations import mcp_server, prompts, serve, strategies, testing
from permsc_integrations._registry import origin
from tests.test_public_api import PUBLIC

MODULES = ["permsc_integrations", *(f"permsc_integrations.{name}" for name in sorted(PUBLIC))]


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _published() -> list[tuple[str, str, object]]:
    """Every class and function of this package named in a pinned ``__all__``."""
    found = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            try:
                value = getattr(module, name)
            except permsc_integrations.MissingDependencyError:  # behind an extra not installed
                continue
            defined = origin(value)
            if (inspect.isclass(value) or inspect.isfunction(value)) and str(defined).startswith(
                "permsc_integrations"
            ):
                found.append((module_name, name, value))
    return found


def test_the_top_level_names_show_the_top_level() -> None:
    for name in (
        "PSCRanker",
        "RankRequest",
        "RankingOptions",
        "RetryPolicy",
        "MemoryCache",
        "SQLiteCache",
        "SpendingCap",
        "Prices",
        "Event",
    ):
        assert getattr(permsc_integrations, name).__module__ == "permsc_integrations", name
    assert repr(permsc_integrations.PSCRanker) == "<class 'permsc_integrations.PSCRanker'>"


@pytest.mark.parametrize(("module_name", "name", "value"), _published())
def test_every_public_name_shows_a_public_path_that_gives_it_back(
    module_name: str, name: str, value: object
) -> None:
    shown = value.__module__  # type: ignore[attr-defined]
    assert not _is_private(shown), f"{module_name}.{name} shows {shown}"
    assert getattr(importlib.import_module(shown), value.__qualname__) is value  # type: ignore[attr-defined]
    if _is_private(str(origin(value))) and origin(value).startswith(module_name + "."):  # type: ignore[union-attr]
        assert shown == module_name  # defined inside the package that exports it: that package


def test_the_public_path_does_not_wait_for_the_public_import() -> None:
    # imported by its private path first (as the core does), it already shows the public one
    code = (
        "from permsc_integrations._ranker.ranker import PSCRanker\n"
        "from permsc_integrations._options.options import RankingOptions\n"
        "from permsc_integrations.prompts._rankgpt import RankGPTPrompt\n"
        "from permsc_integrations.strategies._blocks import Blocks\n"
        "from permsc_integrations.aggregators._kemeny import KemenySolution\n"
        "print(PSCRanker.__module__, RankingOptions.__module__, RankGPTPrompt.__module__,"
        " Blocks.__module__, KemenySolution.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "permsc_integrations",
        "permsc_integrations",
        "permsc_integrations.prompts",
        "permsc_integrations.strategies",
        "permsc_integrations.aggregators.kemeny",
    ]


VALUES = [
    permsc_integrations.RankingOptions(),
    permsc_integrations.RankingOptions.from_kwargs(num_permutations=5, top_k=3),
    permsc_integrations.RetryPolicy(max_attempts=2),
    permsc_integrations.SpendingCap(calls=10, cost=0.5),
    permsc_integrations.Prices(prompt=1.0, completion=2.0),
    permsc_integrations.RankRequest("q", ["a", "b"], id="r1"),
    serve.Limits(),
    serve.ServeConfig(models=(serve.ModelConfig("psc", "openai:gpt-4o-mini"),)),
    mcp_server.Budget("fast", "few calls"),
    testing.Reply("[1] > [2]", delay=0.1),
    testing.Fault("status", status_code=429),
    testing.JudgeParams(noise=0.1),
    strategies.Blocks(),
    prompts.RankGPTPrompt(),
    prompts.TemplatePrompt("Rank for {query}:\n{items}"),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_values_round_trip_through_pickle_and_cloudpickle(value: object) -> None:
    cloudpickle = pytest.importorskip("cloudpickle")  # what Ray ships with (the ray extra)
    for dumps in (pickle.dumps, cloudpickle.dumps):
        back = pickle.loads(dumps(value))
        assert back == value
        assert type(back) is type(value)  # by reference, under the public path
        assert repr(back) == repr(value)
    assert pickle.loads(cloudpickle.dumps(type(value))) is type(value)


def test_reprs_name_the_class_as_before() -> None:
    assert repr(permsc_integrations.SpendingCap(calls=3)).startswith("SpendingCap(calls=3")
    assert repr(serve.Limits()).startswith("Limits(")


@pytest.mark.parametrize(("module_name", "name", "value"), _published())
def test_type_hints_still_resolve(module_name: str, name: str, value: object) -> None:
    if not inspect.isclass(value) or issubclass(value, BaseException):
        return  # errors.py names Usage for type checkers only: get_type_hints never ran there
    hints = typing.get_type_hints(value)
    assert set(hints) == set(typing.get_type_hints(value, include_extras=True))
    own = value.__dict__.get("__annotations__", {})
    assert set(own) <= set(hints)


def test_the_options_hints_are_the_modules_own() -> None:
    from permsc_integrations._options import options as defined

    hints = typing.get_type_hints(permsc_integrations.RankingOptions)
    assert (
        hints["prompt"]
        == typing.get_type_hints(permsc_integrations.RankingOptions, globalns=vars(defined))[
            "prompt"
        ]
    )


def test_docs_render_under_the_public_path() -> None:
    page = pydoc.render_doc(permsc_integrations.PSCRanker, renderer=pydoc.plaintext)
    assert "permsc_integrations.PSCRanker" in page or "class PSCRanker" in page
    assert inspect.getdoc(permsc_integrations.PSCRanker)
    assert "query" in str(inspect.signature(permsc_integrations.PSCRanker.rank))
    assert origin(permsc_integrations.PSCRanker) == "permsc_integrations._ranker.ranker"
