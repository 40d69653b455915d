"""OpenAIBackend.afirst_token against a real loopback server: the first token's logprobs read
as label probabilities, the floor, the servers' variant shapes, and every failure typed."""

from __future__ import annotations

import math

import anyio
import pytest

from permsc_integrations.backends._logprobs import label_probabilities
from permsc_integrations.backends.base import (
    FirstTokenBackend,
    GenerationSettings,
    LabelProbabilities,
)
from permsc_integrations.backends.openai import OpenAIBackend
from permsc_integrations.errors import (
    AuthenticationError,
    BackendError,
    ConfigurationError,
    ContextLengthError,
    LogprobsUnavailableError,
    RateLimitError,
)
from permsc_integrations.testing import Fault, Reply, sequence

pytestmark = pytest.mark.timeout(30)

MESSAGES = [{"role": "user", "content": "[A] a passage\n[B] another\n[C] a third"}]
LABELS = ("A", "B", "C")


def first_token(
    backend: OpenAIBackend,
    labels=LABELS,
    settings: GenerationSettings | None = None,
) -> LabelProbabilities:
    async def run() -> LabelProbabilities:
        try:
            return await backend.afirst_token(MESSAGES, labels, settings or GenerationSettings())
        finally:
            await backend.aclose()

    return anyio.run(run)


def _choice(logprobs: object) -> dict:
    message = {"role": "assistant", "content": "B"}
    return {"index": 0, "message": message, "finish_reason": "length", "logprobs": logprobs}


def test_probabilities_are_read_summed_over_variants_and_renormalised(scripted_server):
    top = {"B": 0.5, " A": 0.2, "A": 0.1, "C\n": 0.1, "The": 0.05}
    server = scripted_server(lambda request: Reply.first_token(top))
    backend = OpenAIBackend("m1", base_url=server.base_url)
    assert isinstance(backend, FirstTokenBackend)
    got = first_token(backend, settings=GenerationSettings(temperature=0.7, max_tokens=50))
    # A = " A" + "A", C = "C\n": whitespace stripped; "The" is no label
    assert got.probabilities == pytest.approx((0.3 / 0.9, 0.5 / 0.9, 0.1 / 0.9))
    assert got.mass == pytest.approx(0.9) and got.model == "m1"
    body = server.requests[0].body
    assert (body["max_tokens"], body["temperature"]) == (1, 0.0)  # whatever the settings say
    assert body["logprobs"] is True and body["top_logprobs"] == 20


def test_usage_counts_the_prompt_and_the_one_token(scripted_server):
    server = scripted_server(lambda request: Reply.first_token({"A": 0.9, "B": 0.1}, delay=0.05))
    got = first_token(OpenAIBackend("m", base_url=server.base_url))
    assert got.usage.calls == 1 and got.usage.completion_tokens == 1
    assert got.usage.prompt_tokens == len(MESSAGES[0]["content"].split())
    assert 0.05 <= got.usage.latency_s < 5


def test_a_label_missing_from_the_top_list_gets_the_floor(scripted_server):
    # the server sends the 2 most likely of 4: C and "x" fall out of the list
    top = {"A": 0.6, "B": 0.3, "C": 0.06, "x": 0.04}
    server = scripted_server(lambda request: Reply.first_token(top))
    got = first_token(OpenAIBackend("m", base_url=server.base_url, top_logprobs=2))
    assert server.requests[0].body["top_logprobs"] == 2
    floor = min(0.3, 1 - 0.9)  # the smallest listed, capped by what the list leaves out
    assert got.probabilities == pytest.approx((0.6 / 1.0, 0.3 / 1.0, floor / 1.0))
    assert got.mass == pytest.approx(0.9)  # floors are estimates, not read


def test_the_floor_is_the_smallest_listed_probability_when_that_is_lower(scripted_server):
    top = {"A": 0.5, "B": 0.01, "x": 0.09}  # 0.4 left out, above the smallest (0.01)
    server = scripted_server(lambda request: Reply.first_token(top))
    got = first_token(OpenAIBackend("m", base_url=server.base_url))
    assert got.probabilities == pytest.approx((0.5 / 0.52, 0.01 / 0.52, 0.01 / 0.52))


def test_openai_s_unlikely_marker_reads_as_zero(scripted_server):
    # -9999.0 is OpenAI's "not among the likely tokens": probability 0, so a floor of 0
    top = [{"token": "A", "logprob": 0.0}, {"token": "B", "logprob": -9999.0}]
    logprobs = {"content": [{"token": "A", "logprob": 0.0, "top_logprobs": top}]}
    server = scripted_server(lambda request: Reply("A", fields={"choices": [_choice(logprobs)]}))
    got = first_token(OpenAIBackend("m", base_url=server.base_url))
    assert got.probabilities == (1.0, 0.0, 0.0) and got.mass == 1.0


def test_no_label_in_the_list_and_nothing_left_out_gives_uniform_probabilities():
    probabilities, mass = label_probabilities([("The", 0.7), ("It", 0.3)], ["A", "B"])
    assert probabilities == (0.5, 0.5) and mass == 0.0


@pytest.mark.parametrize(
    "server_options, reply",
    [
        ({"logprobs": False}, Reply.first_token({"A": 0.9, "B": 0.1})),  # drops them
        ({}, Reply("A")),  # answers "logprobs": null
        ({}, Reply("A", fields={"choices": [{"index": 0, "message": {"content": "A"}}]})),
        ({}, Reply.first_token({"A": 1.0}, delay=0.0)),  # asked, but the list is empty below
    ],
    ids=["dropped", "null", "absent", "empty-top-list"],
)
def test_a_server_without_logprobs_raises_the_typed_error(scripted_server, server_options, reply):
    server = scripted_server(lambda request: reply, **server_options)
    backend = OpenAIBackend("m", base_url=server.base_url, extra_body={"top_logprobs": 0})
    with pytest.raises(LogprobsUnavailableError, match='scoring="generate"') as caught:
        first_token(backend)
    assert not caught.value.retryable and caught.value.fatal
    assert isinstance(caught.value, BackendError) and "returns no logprobs" in str(caught.value)
    assert server.request_count == 1  # the backend never retries


LLAMA_CPP_POST_SAMPLING = {  # llama.cpp's server with "post_sampling_probs": true
    "content": [
        {
            "id": 33,
            "token": "B",
            "prob": 0.7,
            "bytes": [66],
            "top_probs": [
                {"id": 33, "token": "B", "prob": 0.7, "bytes": [66]},
                {"id": 32, "token": "A", "prob": 0.2, "bytes": [65]},
                {"id": 34, "token": " C", "prob": 0.1, "bytes": [32, 67]},
            ],
        }
    ]
}
LEGACY = {  # llama-cpp-python's server: the completions shape in a chat answer
    "tokens": ["B"],
    "text_offset": [0],
    "token_logprobs": [math.log(0.7)],
    "top_logprobs": [{"B": math.log(0.7), "A": math.log(0.2), " C": math.log(0.1)}],
}


@pytest.mark.parametrize("logprobs", [LLAMA_CPP_POST_SAMPLING, LEGACY], ids=["top_probs", "legacy"])
def test_the_servers_variant_shapes_are_read(scripted_server, logprobs):
    reply = Reply("B", fields={"choices": [_choice(logprobs)]})
    server = scripted_server(lambda request: reply)
    got = first_token(OpenAIBackend("m", base_url=server.base_url))
    assert got.probabilities == pytest.approx((0.2, 0.7, 0.1)) and got.mass == pytest.approx(1.0)


@pytest.mark.parametrize(
    "entry",
    [{"token": "A", "logprob": "-0.1"}, {"token": 5, "logprob": -0.1}, "A", {"token": "A"}],
)
def test_a_malformed_entry_fails_the_call_with_a_backend_error(scripted_server, entry):
    logprobs = {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": [entry]}]}
    server = scripted_server(lambda request: Reply("A", fields={"choices": [_choice(logprobs)]}))
    with pytest.raises(BackendError, match="not OpenAI's logprobs shape") as caught:
        first_token(OpenAIBackend("m", base_url=server.base_url))
    assert not caught.value.retryable and not isinstance(caught.value, LogprobsUnavailableError)


@pytest.mark.parametrize(
    "fault, error, retryable",
    [
        (Fault.status(429, retry_after=0.5), RateLimitError, True),
        (Fault.status(401), AuthenticationError, False),
        (Fault.context_length(), ContextLengthError, False),
        (Fault.status(503), BackendError, True),
    ],
)
def test_http_errors_are_mapped_as_for_generation(scripted_server, fault, error, retryable):
    server = scripted_server(sequence(fault, then=Reply.first_token({"A": 1.0})))
    with pytest.raises(error) as caught:
        first_token(OpenAIBackend("m", base_url=server.base_url))
    assert type(caught.value) is error and caught.value.retryable is retryable
    if isinstance(caught.value, RateLimitError):
        assert caught.value.retry_after == 0.5


def test_labels_are_checked_before_any_call(scripted_server):
    server = scripted_server(lambda request: Reply.first_token({"A": 1.0}))
    for labels in (["A", " A"], [], ["A", ""]):
        with pytest.raises(ConfigurationError, match="labels"):
            first_token(OpenAIBackend("m", base_url=server.base_url), labels=labels)
    assert server.request_count == 0


def test_top_logprobs_is_checked_and_keyed_only_when_changed():
    url = "http://127.0.0.1:1/v1"
    for bad in (0, True, 2.5):
        with pytest.raises(ConfigurationError, match="top_logprobs"):
            OpenAIBackend("m", base_url=url, top_logprobs=bad)
    default = OpenAIBackend("m", base_url=url).fingerprint
    assert "top_logprobs" not in default  # the cache keys of earlier answers hold
    assert OpenAIBackend("m", base_url=url, top_logprobs=50).fingerprint != default


def test_extra_body_wins_over_the_first_token_fields(scripted_server):
    server = scripted_server(lambda request: Reply.first_token({"A": 0.8, "B": 0.2}))
    backend = OpenAIBackend("m", base_url=server.base_url, extra_body={"top_logprobs": 1})
    got = first_token(backend)
    assert server.requests[0].body["top_logprobs"] == 1
    floor = min(0.8, 0.2)
    assert got.probabilities == pytest.approx((0.8 / (0.8 + 2 * floor), floor / 1.2, floor / 1.2))


@pytest.mark.parametrize(
    "message",
    [
        "Requested sample logprobs of 20, which is greater than max allowed: 5",  # vLLM's cap
        "logprobs is not supported with this model",
    ],
)
def test_a_400_that_refuses_logprobs_is_the_typed_error_with_what_to_do(scripted_server, message):
    server = scripted_server(lambda request: Fault.status(400, message=message))
    with pytest.raises(LogprobsUnavailableError, match="top_logprobs=20") as caught:
        first_token(OpenAIBackend("m", base_url=server.base_url))
    assert message in str(caught.value) and caught.value.fatal and caught.value.status_code == 400
    assert isinstance(caught.value.__cause__, BackendError)


def test_another_400_stays_as_mapped(scripted_server):
    server = scripted_server(
        lambda request: Fault.status(400, message="messages must not be empty")
    )
    with pytest.raises(BackendError) as caught:
        first_token(OpenAIBackend("m", base_url=server.base_url))
    assert type(caught.value) is BackendError and not caught.value.retryable
