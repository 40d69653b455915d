"""testing.ScriptedBackend: the scripted server's responders, played in process."""

from __future__ import annotations

import anyio
import pytest

from permsc_integrations import PSCRanker
from permsc_integrations._calls.retry import RetryPolicy
from permsc_integrations.backends.base import Backend, GenerationSettings
from permsc_integrations.errors import (
    BackendConnectionError,
    BackendError,
    ConfigurationError,
    ContextLengthError,
    RateLimitError,
)
from permsc_integrations.testing import (
    ChatRequest,
    Fault,
    Reply,
    ScriptedBackend,
    oracle_responder,
    sequence,
)

MESSAGES = [{"role": "system", "content": "rank"}, {"role": "user", "content": "[1] a\n[2] abc"}]
SETTINGS = GenerationSettings(temperature=0.5, max_tokens=7)


async def test_answers_and_records_like_the_server() -> None:
    backend = ScriptedBackend(oracle_responder(len), model="m")
    completion = await backend.acomplete(MESSAGES, SETTINGS)
    assert isinstance(backend, Backend)
    assert (completion.text, completion.model, completion.finish_reason) == (
        "[2] > [1]",
        "m",
        "stop",
    )
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 3)
    (request,) = backend.requests
    assert (request.index, request.temperature, request.max_tokens) == (0, 0.5, 7)
    assert request.messages == tuple(MESSAGES) and request.body["max_tokens"] == 7
    assert [r.outcome for r in backend.records] == ["ok"] and backend.in_flight == 0
    await backend.aclose()
    assert backend.closed


@pytest.mark.parametrize(
    "fault,error,retryable",
    [
        (Fault.status(429, retry_after=2.5), RateLimitError, True),
        (Fault.status(503), BackendError, True),
        (Fault.status(400, message="bad"), BackendError, False),
        (Fault.context_length(), ContextLengthError, False),
        (Fault.drop(), BackendConnectionError, True),
        (Fault.drop(after_headers=True), BackendConnectionError, True),
    ],
)
async def test_faults_raise_what_a_real_backend_raises(fault, error, retryable) -> None:
    backend = ScriptedBackend(lambda request: fault)
    with pytest.raises(error) as caught:
        await backend.acomplete(MESSAGES, SETTINGS)
    assert type(caught.value) is error and caught.value.retryable is retryable
    if isinstance(caught.value, RateLimitError):
        assert caught.value.retry_after == 2.5
    expected = "drop" if fault.kind == "drop" else f"status {fault.status_code}"
    assert [r.outcome for r in backend.records] == [expected] and backend.in_flight == 0


async def test_an_async_responder_may_wait_for_the_test() -> None:
    go = anyio.Event()

    async def when_told(request: ChatRequest) -> Reply:
        await go.wait()
        return Reply("[1]", delay=0.0)

    backend = ScriptedBackend(when_told)
    async with anyio.create_task_group() as group:
        group.start_soon(backend.acomplete, MESSAGES, SETTINGS)
        await anyio.wait_all_tasks_blocked()
        assert (backend.in_flight, backend.records) == (1, [])  # it waits, as told
        go.set()
    assert backend.in_flight == 0 and [r.outcome for r in backend.records] == ["ok"]


async def test_cancelled_calls_and_raising_responders_are_recorded() -> None:
    def bug(request: ChatRequest) -> str:
        raise ZeroDivisionError("responder bug")

    backend = ScriptedBackend(bug)
    with pytest.raises(ZeroDivisionError):  # as MockTransport does: the handler's own error
        await backend.acomplete(MESSAGES, SETTINGS)
    hanging = ScriptedBackend(lambda request: Reply("[1]", delay=60))
    async with anyio.create_task_group() as group:
        group.start_soon(hanging.acomplete, MESSAGES, SETTINGS)
        await anyio.wait_all_tasks_blocked()
        group.cancel_scope.cancel()
    assert [r.outcome for r in backend.records] == ["raised"]
    assert [r.outcome for r in hanging.records] == ["cancelled"] and hanging.in_flight == 0


async def test_wire_only_replies_and_wrong_types_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="ScriptedOpenAIServer"):
        await ScriptedBackend(lambda r: Reply("[1]", fields={"usage": "ten"})).acomplete(
            MESSAGES, SETTINGS
        )
    with pytest.raises(BackendError, match="not int"):
        await ScriptedBackend(lambda r: 3).acomplete(MESSAGES, SETTINGS)


def test_the_ranker_retries_scripted_faults_as_it_does_over_http() -> None:
    responder = sequence(
        Fault.status(429, retry_after=0.001), Fault.drop(), then=oracle_responder(len)
    )
    backend = ScriptedBackend(responder)
    ranker = PSCRanker(
        backend,
        num_permutations=3,
        retry=RetryPolicy(max_attempts=3, initial_backoff=0.001, jitter=0.0),
    )
    items = ["bb", "a", "dddd", "ccc"]
    result = ranker.rank("longest?", items)
    assert list(result.order) == [2, 3, 0, 1] and result.usage.retries == 2
    assert backend.request_count == 5 == result.usage.calls
    assert sorted(r.outcome for r in backend.records) == ["drop", "ok", "ok", "ok", "status 429"]
