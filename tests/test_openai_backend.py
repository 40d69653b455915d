"""OpenAIBackend against a real loopback server: answers, usage, and every fault's typed error."""

from __future__ import annotations

import asyncio
import base64
import gc
import io
import logging
import sys
import time
import weakref
from email.utils import formatdate
from typing import Any

import anyio
import httpx
import pytest

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations.backends import resolve_backend
from permsc_integrations.backends._http_errors import retry_after
from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.backends.openai import OpenAIBackend
from permsc_integrations.backends.openai._client_per_loop import LoopClients
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ConfigurationError,
    ContextLengthError,
    MissingDependencyError,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitError,
)
from permsc_integrations.testing import Fault, Reply, sequence

pytestmark = pytest.mark.timeout(30)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "[1] a\n[2] b"}]


def _has_aiohttp() -> bool:
    try:
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1", http="aiohttp")
    except MissingDependencyError:
        return False
    return True


HTTP = [
    "httpx",
    pytest.param(
        "aiohttp",
        marks=pytest.mark.skipif(not _has_aiohttp(), reason="the aiohttp extra is not installed"),
    ),
]
"""Both of the SDK's HTTP clients must behave alike from the outside."""


def complete(backend: OpenAIBackend, settings: GenerationSettings | None = None):
    settings = settings or GenerationSettings()

    async def run():
        try:
            return await backend.acomplete(MESSAGES, settings)
        finally:
            await backend.aclose()

    return anyio.run(run)


@pytest.mark.parametrize("http", HTTP)
def test_answer_usage_and_settings_reach_the_server(scripted_server, http):
    server = scripted_server(lambda request: Reply("[2] > [1]", delay=0.05))
    backend = OpenAIBackend("m1", base_url=server.base_url, extra_body={"top_k": 1}, http=http)
    settings = GenerationSettings(temperature=0.2, max_tokens=30, seed=7, stop=("\n\n",))
    started = time.perf_counter()
    answer = complete(backend, settings)
    wall = time.perf_counter() - started
    assert answer.text == "[2] > [1]" and answer.model == "m1" and answer.finish_reason == "stop"
    assert answer.usage.prompt_tokens == 6 and answer.usage.completion_tokens == 3
    assert answer.usage.calls == 1 and 0.05 <= answer.usage.latency_s <= wall
    body = server.requests[0].body
    assert body["model"] == "m1" and body["messages"] == MESSAGES
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.2, 30, 7)
    assert body["stop"] == ["\n\n"] and body["top_k"] == 1


def test_resolve_backend_and_name(scripted_server):
    server = scripted_server()
    backend = resolve_backend("openai:gpt-x", base_url=server.base_url)
    assert isinstance(backend, OpenAIBackend)
    assert backend.name == f"openai:gpt-x@127.0.0.1:{server.port}"
    assert backend._api_key == "not-needed"  # a local server needs no key
    assert OpenAIBackend("gpt-x", api_key="sk").name == "openai:gpt-x@api.openai.com"


def test_configuration_from_the_environment(scripted_server, monkeypatch):
    server = scripted_server(lambda request: request.model)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    backend = resolve_backend("openai")
    assert (backend.model, backend.base_url, backend._api_key) == (
        "env-model",
        server.base_url,
        "sk-env",
    )
    assert complete(backend).text == "env-model"


def test_missing_configuration_says_what_to_set(monkeypatch):
    for name in ("OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_MODEL"):
        OpenAIBackend()
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIBackend("gpt-x")


@pytest.mark.parametrize(
    "url", ["localhost:8000/v1", "ftp://host/v1", "http:///v1", "//user:hunter2@host/v1"]
)
def test_a_base_url_without_scheme_or_host_is_refused_without_its_secret(url):
    """Without this check the SDK would send the documents to a path on the public endpoint."""
    with pytest.raises(ConfigurationError, match="base_url must be an http") as caught:
        OpenAIBackend("m", base_url=url)
    assert "hunter2" not in str(caught.value)


FAULTS = [
    (Fault.status(429, retry_after=1.5), RateLimitError, True, 1.5),
    (Fault.status(429, retry_after_ms=250), RateLimitError, True, 0.25),
    (Fault.status(429, code="insufficient_quota"), QuotaExceededError, False, None),
    (Fault.status(500), BackendError, True, None),
    (Fault.status(503, retry_after=2), BackendError, True, 2.0),
    (Fault.status(408), BackendError, True, None),
    (Fault.context_length(), ContextLengthError, False, None),
    (
        Fault.status(400, message="the request exceeds the available context size"),
        ContextLengthError,
        False,
        None,
    ),
    (Fault.status(400, message="temperature must be <= 2"), BackendError, False, None),
    (Fault.status(401), AuthenticationError, False, None),
    (Fault.status(403), AuthenticationError, False, None),
    (Fault.status(404), ModelNotFoundError, False, None),
    (Fault.drop(), BackendConnectionError, True, None),
    (Fault.drop(after_headers=True), BackendConnectionError, True, None),
]


@pytest.mark.parametrize("http", HTTP)
@pytest.mark.parametrize(("fault", "error", "retryable", "wait"), FAULTS)
def test_each_fault_maps_to_a_typed_error(scripted_server, fault, error, retryable, wait, http):
    server = scripted_server(sequence(fault))
    with pytest.raises(error) as caught:
        complete(OpenAIBackend("m", base_url=server.base_url, http=http))
    assert type(caught.value) is error
    assert caught.value.retryable is retryable
    assert caught.value.retry_after == wait
    if fault.kind == "status":
        assert caught.value.status_code == fault.status_code
    assert server.request_count == 1  # the SDK did not retry on its own


def test_error_messages_say_what_to_do(scripted_server):
    hints = {
        Fault.context_length(): "window_size",
        Fault.status(401): "OPENAI_API_KEY",
        Fault.status(404): "base_url",
        Fault.status(429, code="insufficient_quota"): "credit",
    }
    server = scripted_server(sequence(*hints))
    for hint in hints.values():
        with pytest.raises(BackendError, match=hint):
            complete(OpenAIBackend("m", base_url=server.base_url))


@pytest.mark.parametrize("http", HTTP)
def test_slow_answer_times_out_at_the_settings_timeout(scripted_server, http):
    server = scripted_server(lambda request: Reply("late", delay=5))
    backend = OpenAIBackend("m", base_url=server.base_url, http=http)
    with pytest.raises(BackendTimeoutError, match="0.3 s") as caught:  # not a 5 s wait
        complete(backend, GenerationSettings(timeout=0.3))
    assert caught.value.retryable


@pytest.mark.parametrize("http", HTTP)
def test_unreachable_server_fails_fast_with_a_connection_error(http, closed_port):
    backend = OpenAIBackend("m", base_url=f"http://127.0.0.1:{closed_port}/v1", http=http)
    # named by the transport's own error (aiohttp's transport calls it a connect timeout)
    cause = {"httpx": "ConnectError", "aiohttp": "ClientConnectorError"}[http]
    with pytest.raises(BackendConnectionError, match=cause) as caught:
        complete(backend)
    assert caught.value.retryable


@pytest.mark.skipif(not _has_aiohttp(), reason="the aiohttp extra is not installed")
def test_aiohttp_is_one_client_a_loop_and_refuses_credentials_in_the_url(scripted_server):
    server = scripted_server(lambda request: "ok")
    backend = OpenAIBackend("m", base_url=server.base_url, http="aiohttp")

    async def run():
        answers = await asyncio.gather(
            *(backend.acomplete(MESSAGES, GenerationSettings()) for _ in range(40))
        )
        clients = (await backend._clients.get()).clients
        await backend.aclose()
        return answers, clients

    answers, clients = anyio.run(run)
    assert [a.text for a in answers] == ["ok"] * 40 and server.request_count == 40
    assert len(clients) == 1 and clients[0].is_closed()
    url = server.base_url.replace("http://", "http://user:hunter2@")
    with pytest.raises(ConfigurationError, match="default_headers") as caught:
        OpenAIBackend("m", base_url=url, http="aiohttp")
    assert "hunter2" not in str(caught.value)


def test_a_password_in_base_url_never_reaches_the_applications_log(scripted_server):
    """The SDK's HTTP client logs every request's URL at INFO: a library user's own log
    handler (root logger, DEBUG) must see neither the password nor the user, on an answer or
    on an error; the server still gets them as basic auth, decoded, as before."""
    server = scripted_server(sequence("[2] > [1]", Fault.status(401, message="no")))
    url = server.base_url.replace("http://", "http://alice:hunter2%40pw@")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.DEBUG)
    root, level = logging.getLogger(), logging.getLogger().level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    # as an application's logger stands (a CLI test earlier in the process quietened httpx)
    sdk = logging.getLogger("httpx")
    was = (sdk.level, sdk.disabled)
    sdk.setLevel(logging.NOTSET)
    sdk.disabled = False
    try:
        backend = OpenAIBackend("m", base_url=url, api_key="sk-test-key")
        assert complete(backend).text == "[2] > [1]"
        with pytest.raises(AuthenticationError) as caught:
            complete(OpenAIBackend("m", base_url=url, api_key="sk-test-key"))
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        sdk.setLevel(was[0])
        sdk.disabled = was[1]
    logged = stream.getvalue()
    assert "hunter2" not in logged and "alice" not in logged, logged
    assert f"HTTP Request: POST {server.base_url}/chat/completions" in logged  # it did log
    assert "hunter2" not in str(caught.value)
    sent = base64.b64encode(b"alice:hunter2@pw").decode()
    assert [r.headers.get("authorization") for r in server.requests] == [f"Basic {sent}"] * 2


def test_an_unknown_or_missing_http_client_says_what_to_do(monkeypatch):
    with pytest.raises(ConfigurationError, match="aiohttp"):
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1", http="requests")
    import openai

    class Missing:  # what the SDK defines when its aiohttp transport is not installed
        def __init__(self, **kwargs):
            raise RuntimeError("install the aiohttp extra")

    monkeypatch.setattr(openai, "DefaultAioHttpClient", Missing, raising=False)  # old SDKs: none
    with pytest.raises(MissingDependencyError, match=r"permsc-integrations\[aiohttp\]"):
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1", http="aiohttp")


def test_one_client_per_event_loop_and_aclose_closes_it(scripted_server):
    server = scripted_server(lambda request: "ok")
    backend = OpenAIBackend("m", base_url=server.base_url)
    seen = []

    async def twice():
        for _ in range(2):
            await backend.acomplete(MESSAGES, GenerationSettings())
            seen.append(await backend.client())

    anyio.run(twice)  # the loop closes without aclose: its client must not be reused
    anyio.run(twice)
    assert seen[0] is seen[1] and seen[2] is seen[3] and seen[0] is not seen[2]

    assert seen[0].is_closed() and seen[2].is_closed()  # closed as their loops shut down

    async def close():
        client = await backend.client()
        await backend.aclose()
        return client

    assert anyio.run(close).is_closed()
    assert server.request_count == 4


def test_a_dropped_backend_is_freed_at_once_and_its_client_closed_on_its_loop(
    scripted_server, until
):
    """No reference cycle through the backend: dropped without aclose, it goes at once (no
    wait for the cycle collector) and its client is closed on the loop that owns it."""
    server = scripted_server(lambda request: "ok")
    backend = OpenAIBackend("m", base_url=server.base_url)
    run_sync(backend.acomplete, MESSAGES, GenerationSettings())  # an idle keep-alive connection
    client, gone = run_sync(backend.client), weakref.ref(backend)
    gc.disable()
    try:
        del backend
        assert gone() is None
    finally:
        gc.enable()
    anyio.run(until, client.is_closed)
    fresh = OpenAIBackend("m", base_url=server.base_url)  # the loop still connects
    assert run_sync(fresh.acomplete, MESSAGES, GenerationSettings()).text == "ok"


def test_clients_dropped_in_a_cycle_are_closed_on_their_loop_not_by_the_collector(until):
    """Finalisers run in whichever thread collects: with clients collected in a cycle, a new
    connection's pending connect was found unregistered from the loop (its file descriptor
    reused) and never finished: a ranking that hung. What a collected LoopClients made is
    closed on its loop instead, never the collector's garbage."""

    class Client:
        closed = False

        async def close(self) -> None:
            self.closed = True

    holder: dict[str, Any] = {"clients": LoopClients(Client)}
    holder["itself"] = holder
    client = run_sync(holder["clients"].get)
    kept = {id(entry.keeper) for entry in holder["clients"]._entries.values()}
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable stays in gc.garbage
    try:
        del holder
        gc.collect()
        collected = [o for o in gc.garbage if id(o) in kept]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert collected == []
    anyio.run(until, lambda: client.closed)


def test_calls_take_turns_over_small_client_pools_that_all_close(scripted_server):
    """One big connection pool costs ~30 ms of CPU a call at 200 in flight (docs/scale.md);
    a client is added every 16 calls, up to client_shards."""
    server = scripted_server(lambda request: "ok")
    backend = OpenAIBackend("m", base_url=server.base_url, client_shards=3)

    async def run():
        used = [id(await backend._next_client()) for _ in range(400)]
        answers = await asyncio.gather(
            *(backend.acomplete(MESSAGES, GenerationSettings()) for _ in range(6))
        )
        return used, (await backend._clients.get()).clients, answers

    used, clients, answers = anyio.run(run)
    assert len(set(used[:15])) == 1  # a light user makes one client
    assert len(set(used)) == len(clients) == 3  # then up to client_shards, in turn
    assert set(used[-3:]) == set(used)
    assert [a.text for a in answers] == ["ok"] * 6
    assert all(c.is_closed() for c in clients)  # closed with their loop
    with pytest.raises(ConfigurationError, match="client_shards"):
        OpenAIBackend("m", base_url=server.base_url, client_shards=0)


def test_a_given_client_is_used_and_left_open(scripted_server):
    import openai

    server = scripted_server(lambda request: "mine")

    async def run():
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k") as client:
            backend = OpenAIBackend("m", client=client)
            answer = await backend.acomplete(MESSAGES, GenerationSettings())
            await backend.aclose()
            return answer, backend, client.is_closed()

    answer, backend, closed = anyio.run(run)
    assert answer.text == "mine" and not closed
    assert backend.name == f"openai:m@127.0.0.1:{server.port}"


def test_awarmup_opens_connections_and_reports_unreachable(scripted_server, closed_port):
    server = scripted_server(lambda request: "ok")
    backend = OpenAIBackend("m", base_url=server.base_url)

    async def warm():
        await backend.awarmup(4)
        await backend.aclose()

    anyio.run(warm)
    bad = OpenAIBackend("m", base_url=f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(BackendConnectionError):
        anyio.run(bad.awarmup)


def test_retry_after_reads_seconds_milliseconds_and_dates():
    def response(**headers):
        return httpx.Response(429, headers=headers)

    assert retry_after(response(**{"retry-after": "3"})) == 3.0
    assert retry_after(response(**{"retry-after-ms": "20", "retry-after": "3"})) == 0.02
    assert 8 < retry_after(response(**{"retry-after": formatdate(time.time() + 10)})) <= 10
    assert retry_after(response(**{"retry-after": "soon"})) is None
    assert retry_after(response()) is None


def test_missing_openai_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(MissingDependencyError, match=r"permsc-integrations\[openai\]"):
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1")
