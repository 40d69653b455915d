"""The distribution: pinned public names, namespace layout, metadata, dependency floor."""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import version
from pathlib import Path

import llama_index.postprocessor.permsc as package
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_public_names_are_pinned():
    assert package.__all__ == [
        "PSCRerank",
        "LlamaIndexLLMBackend",
        "DEFAULT_RERANK_PROMPT_TMPL",
        "default_rerank_prompt",
        "to_core_prompt",
    ]
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_namespace_package_sits_beside_llama_index_core():
    assert not (ROOT / "llama_index" / "__init__.py").exists()
    assert not (ROOT / "llama_index" / "postprocessor" / "__init__.py").exists()
    assert (ROOT / "llama_index" / "postprocessor" / "permsc" / "__init__.py").is_file()
    core = importlib.import_module("llama_index.core")
    assert Path(core.__file__).parent.parent != Path(package.__file__).parent.parent.parent
    assert Path(package.__file__).is_relative_to(ROOT)


def test_pyproject_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == "llama-index-postprocessor-permsc"
    deps = project["dependencies"]
    assert any(d.startswith("permsc-integrations") for d in deps)
    assert "llama-index-core>=0.12.52,<0.15" in deps
    hub = meta["tool"]["llamahub"]
    assert hub["import_path"] == "llama_index.postprocessor.permsc"
    assert list(hub["class_authors"]) == ["PSCRerank"]
    assert meta["build-system"]["build-backend"] == "hatchling.build"


def test_installed_core_has_the_async_hook_the_floor_promises():
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    assert inspect.iscoroutinefunction(BaseNodePostprocessor._apostprocess_nodes)
    major, minor, patch = (int(p) for p in version("llama-index-core").split(".")[:3])
    assert (major, minor, patch) >= (0, 12, 31)
