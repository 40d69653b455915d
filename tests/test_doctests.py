"""Every docstring example in the core package runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import permsc_integrations
from permsc_integrations._registry import origin

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(permsc_integrations.__path__, "permsc_integrations.")
    if ".cli" not in m.name
)
# Modules that import fine without their extra but whose examples run it.
NEEDS = {
    "permsc_integrations.backends.local.transformers": ("torch", "transformers"),
    "permsc_integrations.backends.local._logits": ("torch",),
    "permsc_integrations.backends.local._loading": ("torch",),
}


class DefinedHere(doctest.DocTestFinder):
    """A published object (``__module__`` its public path) keeps its examples in the module
    that defines it, with that module's globals; doctest.testmod would look for them in the
    public module (whose namespace they do not run in) and skip them where they are."""

    def _from_module(self, module: ModuleType | None, obj: object) -> bool:
        if module is not None and (inspect.isclass(obj) or inspect.isfunction(obj)):
            return origin(obj) == module.__name__
        return bool(super()._from_module(module, obj))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra that is not installed (e.g. llama-cpp-python)
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    for dependency in NEEDS.get(name, ()):
        pytest.importorskip(dependency)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in DefinedHere().find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
