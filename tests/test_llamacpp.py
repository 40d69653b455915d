"""The llama.cpp backend: real generation when llama-cpp-python is installed, else the
missing-extra error (CI need not build it)."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends._logprobs import label_probabilities_from_logits
from permsc_integrations.backends.base import FirstTokenBackend, GenerationSettings
from permsc_integrations.backends.local._llamacpp import LlamaCppBackend
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


QUESTION = [
    {"role": "system", "content": "Answer with one letter only."},
    {"role": "user", "content": "Which letter comes first in the alphabet: B, A or C?"},
]


def test_label_probabilities_are_the_softmax_over_the_whole_vocabulary() -> None:
    logits = np.array([3.0, 1.0, 0.5, 0.5, -1.0])
    softmax = np.exp(logits) / np.exp(logits).sum()
    raw = [softmax[1], softmax[2] + softmax[3], softmax[4]]  # label 2 reads as two tokens
    probabilities, mass = label_probabilities_from_logits(logits, [[1], [2, 3], [4]])
    assert probabilities == pytest.approx([r / sum(raw) for r in raw])
    assert mass == pytest.approx(sum(raw)) and mass < 1 - softmax[0] + 1e-12
    big = label_probabilities_from_logits(np.array([1000.0, 999.0]), [[0], [1]])[0]
    assert big == pytest.approx((1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1))))


@needs_llama_cpp
@pytest.mark.slow
def test_first_token_on_the_embedded_gguf_reads_its_logits() -> None:
    backend = resolve_backend("llamacpp")
    assert isinstance(backend, FirstTokenBackend)
    labels = ["A", "B", "C"]
    got = anyio.run(backend.afirst_token, QUESTION, labels, GenerationSettings())
    again = anyio.run(backend.afirst_token, QUESTION, labels, GenerationSettings())
    assert sum(got.probabilities) == pytest.approx(1.0) and 0 < got.mass <= 1
    assert got.probabilities == pytest.approx(again.probabilities)
    assert got.usage.prompt_tokens > 0 and (got.usage.completion_tokens, got.usage.calls) == (1, 1)
    # greedy generation's first token, when it is a label, is the most likely label
    answer = anyio.run(backend.acomplete, QUESTION, GenerationSettings(max_tokens=1))
    if answer.text.strip() in labels:
        best = max(range(3), key=lambda i: got.probabilities[i])
        assert labels[best] == answer.text.strip()


@needs_llama_cpp
@pytest.mark.slow
def test_first_token_refuses_a_label_of_several_tokens() -> None:
    backend = resolve_backend("llamacpp")
    with pytest.raises(ConfigurationError, match="single-token labels"):
        anyio.run(backend.afirst_token, QUESTION, ["A", "zebra-crossing"], GenerationSettings())


@needs_llama_cpp
@pytest.mark.slow
def test_first_token_over_n_ctx_is_a_context_length_error() -> None:
    backend = LlamaCppBackend(None, n_ctx=256)
    long = [{"role": "user", "content": "word " * 2000}]
    with pytest.raises(ContextLengthError, match="n_ctx"):
        anyio.run(backend.afirst_token, long, ["A", "B"], GenerationSettings())
