"""The llama.cpp backend: real generation when llama-cpp-python is installed, else the
missing-extra error (CI need not build it)."""

from __future__ import annotations

import anyio
import pytest

from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.backends.local.llamacpp import LlamaCppBackend
from permsc_integrations.errors import (
    ConfigurationError,
    ContextLengthError,
    MissingDependencyError,
)

try:
    import llama_cpp  # noqa: F401

    HAVE_LLAMA_CPP = True
except ImportError:
    HAVE_LLAMA_CPP = False

needs_llama_cpp = pytest.mark.skipif(not HAVE_LLAMA_CPP, reason="llama-cpp-python is not installed")
SHORT = GenerationSettings(max_tokens=8)
HELLO = [{"role": "user", "content": "Say hello."}]


@pytest.mark.skipif(HAVE_LLAMA_CPP, reason="llama-cpp-python is installed")
def test_without_llama_cpp_the_error_names_the_extra() -> None:
    with pytest.raises(
        MissingDependencyError, match=r"pip install 'permsc-integrations\[llamacpp\]'"
    ):
        LlamaCppBackend("/models/any.gguf")
    with pytest.raises(MissingDependencyError, match="llamacpp"):
        resolve_backend("llamacpp:/models/any.gguf")


@needs_llama_cpp
def test_a_missing_file_is_a_configuration_error(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="GGUF file not found"):
        LlamaCppBackend(tmp_path / "missing.gguf")


@needs_llama_cpp
@pytest.mark.slow
def test_real_generation_on_the_embedded_gguf_counts_usage() -> None:
    backend = resolve_backend("llamacpp")  # no path: the embedded SmolLM2 file
    first = anyio.run(backend.acomplete, HELLO, SHORT)
    again = anyio.run(backend.acomplete, HELLO, SHORT)
    assert first.text and first.text == again.text  # temperature 0
    assert first.usage.prompt_tokens > 0
    assert 0 < first.usage.completion_tokens <= SHORT.max_tokens
    assert first.finish_reason in ("stop", "length")


@needs_llama_cpp
@pytest.mark.slow
def test_a_prompt_over_n_ctx_is_a_context_length_error() -> None:
    backend = LlamaCppBackend(None, n_ctx=256)
    long = [{"role": "user", "content": "word " * 2000}]
    with pytest.raises(ContextLengthError, match="n_ctx"):
        anyio.run(backend.acomplete, long, SHORT)
