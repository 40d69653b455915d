"""Every docstring example in the core package runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import permsc_integrations

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(permsc_integrations.__path__, "permsc_integrations.")
    if ".cli" not in m.name
)
# Modules that import fine without their extra but whose examples run it.
NEEDS = {
    "permsc_integrations.backends.local.transformers": ("torch", "transformers"),
    "permsc_integrations.backends.local._logits": ("torch",),
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed (e.g. llama-cpp-python)
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    for dependency in NEEDS.get(name, ()):
        pytest.importorskip(dependency)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
