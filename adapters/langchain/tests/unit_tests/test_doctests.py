"""The examples in langchain_permsc's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["__init__", "chat_backend", "ranking", "rerankers", "retrievers"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    suffix = "" if name == "__init__" else f".{name}"
    module = importlib.import_module("langchain_permsc" + suffix)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
