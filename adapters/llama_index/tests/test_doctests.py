"""Every docstring example in the adapter runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "llama_index.postprocessor.permsc",
    "llama_index.postprocessor.permsc.base",
    "llama_index.postprocessor.permsc.llm_backend",
    "llama_index.postprocessor.permsc.prompts",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
