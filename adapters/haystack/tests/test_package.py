"""The distribution: pinned public names, the namespace layout Haystack's integrations use,
metadata, docstring examples, and the import staying light."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import haystack_integrations.components.rankers.permsc as package
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
MODULES = [
    "haystack_integrations.components.rankers.permsc",
    "haystack_integrations.components.rankers.permsc.ranker",
    "haystack_integrations.components.rankers.permsc.chat_backend",
    "haystack_integrations.components.rankers.permsc.tool",
    "haystack_integrations.components.rankers.permsc._serialization",
]


def test_public_names_are_pinned():
    assert package.__all__ == ["PSCRanker", "HaystackChatBackend", "ranker_tool", "META_KEY"]
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_namespace_packages_sit_beside_other_integrations():
    for folder in (
        "haystack_integrations",
        "haystack_integrations/components",
        "haystack_integrations/components/rankers",
    ):
        assert not (ROOT / folder / "__init__.py").exists(), folder
    assert (ROOT / "haystack_integrations/components/rankers/permsc/py.typed").is_file()
    assert Path(package.__file__).is_relative_to(ROOT)


def test_pyproject_metadata():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "permsc-haystack"
    assert "haystack-ai>=3.0.0,<4" in project["dependencies"]
    assert any(d.startswith("permsc-integrations>=") for d in project["dependencies"])


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_import_loads_no_sdk_and_no_engine_until_used():
    """The component's import adds no SDK, no solver and not Haystack's tools module (the
    agent tool loads it on first use); benchmarks/haystack_overhead.py times the import."""
    code = (
        "import sys, haystack; before = set(sys.modules)\n"
        "import haystack_integrations.components.rankers.permsc\n"
        "added = set(sys.modules) - before\n"
        "print(','.join(sorted(m for m in added if m.startswith(('openai', 'torch', "
        "'haystack.tools', 'permsc_integrations.backends.openai', 'highspy')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout
