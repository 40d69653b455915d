"""OpenAI-compatible chat completions: OpenAI, vLLM, llama.cpp's server, Ollama, any proxy.

Uses ``openai.AsyncOpenAI(max_retries=0)``: the engine owns retries, so SDK errors become
typed :class:`~permsc_integrations.errors.BackendError` subclasses with ``retryable`` set.
Works with the openai SDK 1.x-3.x, over whichever HTTP library that SDK is built on
(``httpx`` up to 2.x, ``httpx2`` from 3.0). Needs the ``openai`` extra.

Secrets: the API key and any credentials in ``base_url`` never appear in the name, the repr,
the fingerprint (cache keys) or an error message (:mod:`permsc_integrations.backends._redaction`).
The SDK never sees ``base_url``'s ``user:password@``: its HTTP client logs every request's
URL at INFO (``HTTP Request: POST ...``) into the application's log, so it gets the URL
without them and sends them as its basic auth, as it would have sent them from the URL.

Example:
    >>> from permsc_integrations.testing import ScriptedOpenAIServer
    >>> from permsc_integrations import GenerationSettings, resolve_backend
    >>> import anyio
    >>> with ScriptedOpenAIServer(lambda request: "[2] > [1]") as server:
    ...     backend = resolve_backend("openai:my-model", base_url=server.base_url)
    ...     async def ask():
    ...         try:
    ...             return await backend.acomplete(
    ...                 [{"role": "user", "content": "rank"}], GenerationSettings())
    ...         finally:
    ...             await backend.aclose()
    ...     answer = anyio.run(ask)
    >>> answer.text, answer.usage.calls
    ('[2] > [1]', 1)
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from permsc_integrations._checks import positive_int
from permsc_integrations.backends._http_errors import mapped_errors
from permsc_integrations.backends._logprobs import check_labels, refused_logprobs
from permsc_integrations.backends._redaction import (
    is_secret_name,
    redact_text,
    redact_url,
    refuse_masked,
    split_credentials,
)
from permsc_integrations.backends.base import (
    Completion,
    GenerationSettings,
    LabelProbabilities,
    Message,
)
from permsc_integrations.backends.openai._chat_json import (
    completion_from_json,
    first_token_from_json,
)
from permsc_integrations.backends.openai._client_per_loop import LoopClients, Shards
from permsc_integrations.errors import (
    BackendError,
    ConfigurationError,
    MissingDependencyError,
    first_failure,
)

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:  # optional dependency (the openai extra), imported where used
    import ssl

    from httpx import AsyncClient
    from openai import AsyncOpenAI

__all__ = ["OpenAIBackend", "completion_from_json"]

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a ``base_url`` given without a key (local servers ignore it; the SDK needs one)."""


def _openai() -> ModuleType:
    try:
        # lazy: optional dependency (the openai extra)
        import openai
    except ImportError as exc:
        raise MissingDependencyError("openai", "openai", purpose="the openai backend") from exc
    return openai


def _http() -> ModuleType:
    """The HTTP library the installed SDK is built on (``httpx`` or ``httpx2``)."""
    for cls in _openai().DefaultAsyncHttpxClient.__mro__:
        if cls.__name__ == "AsyncClient":
            return importlib.import_module(cls.__module__.partition(".")[0])
    raise MissingDependencyError("httpx", "openai", purpose="the openai SDK's HTTP client")


HTTP_CLIENTS = {"httpx": "DefaultAsyncHttpxClient", "aiohttp": "DefaultAioHttpClient"}
"""``http=`` names: the openai SDK's async HTTP client classes (``aiohttp``: its aiohttp transport,
from the ``aiohttp`` extra)."""


def _http_client_class(http: str) -> type[AsyncClient]:
    """The SDK's client class for ``http`` (a key of :data:`HTTP_CLIENTS`), checked usable."""
    if http not in HTTP_CLIENTS:
        raise ConfigurationError(f"http must be one of {sorted(HTTP_CLIENTS)}, got {http!r}")
    cls = getattr(_openai(), HTTP_CLIENTS[http], None)
    # without its transport the SDK defines a stand-in that raises when made
    if cls is None or (http == "aiohttp" and not _from_aiohttp(cls)):
        raise MissingDependencyError(
            "aiohttp", "aiohttp", purpose="the openai backend's http='aiohttp'"
        )
    return cls


def _from_aiohttp(cls: type) -> bool:
    return any("aiohttp" in base.__module__ for base in cls.__mro__)


def _checked_url(base_url: str | None) -> str | None:
    if base_url is None:
        return None
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"base_url must be an http(s) URL such as 'http://localhost:8000/v1', got "
            f"{redact_url(base_url)!r}"
        )
    return base_url


def _shard_factory(
    options: Mapping[str, object],
    credentials: tuple[str, str] | None,
    client_class: type[AsyncClient],
    max_connections: int,
    count: int,
) -> Callable[[], Shards[AsyncOpenAI]]:
    """What makes one loop's clients, from the client options alone: a factory holding the
    backend would keep it alive from its clients' finaliser (:mod:`._client_per_loop`). A
    closure, so that no repr shows the key it holds. ``credentials``, from ``base_url``, are
    the HTTP client's basic auth (the module docstring says why)."""
    per_shard = -(-max_connections // count)

    def new_client(verify: ssl.SSLContext | bool) -> AsyncOpenAI:
        limits = _http().Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        auth = {"auth": _http().BasicAuth(*credentials)} if credentials else {}
        http_client = client_class(limits=limits, verify=verify, **auth)
        return _openai().AsyncOpenAI(**options, max_retries=0, http_client=http_client)

    def new_shards() -> Shards[AsyncOpenAI]:
        # the loop's clients share one SSL context (making one costs about 25 ms)
        make_context = getattr(_http(), "create_ssl_context", None)
        verify = make_context() if make_context is not None else True
        return Shards(lambda: new_client(verify), count)

    return new_shards


def _base_url(given: str | None, client: AsyncOpenAI | None, http: str) -> str | None:
    """The endpoint: ``given``, else ``OPENAI_BASE_URL``, else a given client's; checked."""
    url = given or os.environ.get("OPENAI_BASE_URL") or None
    if client is not None and not url:
        url = str(getattr(client, "base_url", "")) or None
    refuse_masked("base_url", url)
    checked = _checked_url(url)
    if http == "aiohttp" and checked and urlsplit(checked).username is not None:
        raise ConfigurationError(
            "http='aiohttp' cannot send credentials in base_url beside the API key "
            f"({redact_url(checked)}); put them in default_headers or use http='httpx'"
        )
    return checked


def _api_key(given: str | None, client: AsyncOpenAI | None, base_url: str | None) -> str | None:
    """``given``, else ``OPENAI_API_KEY``; a placeholder for a ``base_url`` without one."""
    key = given or os.environ.get("OPENAI_API_KEY") or None
    refuse_masked("api_key", key)
    if key is None and client is None:
        if base_url is None:
            raise ConfigurationError(
                "no API key: set OPENAI_API_KEY or pass api_key=; for a local server "
                "pass base_url= (e.g. 'http://localhost:8000/v1') and no key is needed"
            )
        key = PLACEHOLDER_API_KEY
    return key


class OpenAIBackend:
    """A backend for any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``model``, ``base_url`` and ``api_key`` default to ``OPENAI_MODEL``, ``OPENAI_BASE_URL``
    and ``OPENAI_API_KEY``; a ``base_url`` with no key gets a placeholder key. Each running
    event loop gets up to ``client_shards`` ``AsyncOpenAI`` clients (one, then one more every
    16 calls), used in turn, each with its share of ``max_connections``, closed with that loop
    (:mod:`._client_per_loop`); a ``client`` you pass is used as is and left open by :meth:`aclose`.

    ``http``: the SDK's HTTP client, ``"httpx"`` (its default) or ``"aiohttp"`` (its aiohttp
    transport, the ``aiohttp`` extra): about half the client CPU per call, so the better
    choice for hundreds of calls at once (docs/benchmarks.md "client-shards"); one client a
    loop, no shards. It cannot send credentials embedded in ``base_url``.

    ``top_logprobs``: how many of the first token's most likely tokens :meth:`afirst_token`
    asks for (20, OpenAI's maximum; vLLM's default ``--max-logprobs`` is 20 too).

    >>> OpenAIBackend("llama3", base_url="http://localhost:11434/v1").name
    'openai:llama3@localhost:11434'
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        organization: str | None = None,
        extra_body: Mapping[str, object] | None = None,
        default_headers: Mapping[str, str] | None = None,
        max_connections: int = 1000,
        client_shards: int = 16,
        http: str = "httpx",
        top_logprobs: int = 20,
    ) -> None:
        # fail early, naming the extra, when the SDK or the transport is missing
        self._client_class = _http_client_class(http)
        self.http = http
        self.model = model or os.environ.get("OPENAI_MODEL") or ""
        if not self.model:
            raise ConfigurationError(
                "no model given: use a spec like 'openai:gpt-4o-mini', pass model=, "
                "or set OPENAI_MODEL"
            )
        self.base_url = _base_url(base_url, client, http)
        self._api_key = _api_key(api_key, client, self.base_url)
        self.organization = organization
        self.extra_body = dict(extra_body) if extra_body else None
        self.default_headers = dict(default_headers) if default_headers else None
        self.max_connections = max_connections
        positive_int("client_shards", client_shards)
        self.client_shards = client_shards if http == "httpx" else 1
        self.top_logprobs = positive_int("top_logprobs", top_logprobs)
        self._client = client
        sdk_url, credentials = split_credentials(self.base_url)
        self._clients = LoopClients(
            _shard_factory(
                {
                    "api_key": self._api_key,
                    "base_url": sdk_url,
                    "organization": self.organization,
                    "default_headers": self.default_headers,
                },
                credentials,
                self._client_class,
                self.max_connections,
                self.client_shards,
            )
        )
        self.name = f"openai:{self.model}@{self._host()}"

    def _host(self) -> str:
        if not self.base_url:
            return "api.openai.com"
        parts = urlsplit(self.base_url)
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)

    @property
    def fingerprint(self) -> str:
        """Everything that can change an answer, secrets excluded (part of cache keys)."""
        headers = {k: v for k, v in (self.default_headers or {}).items() if not is_secret_name(k)}
        extra = {k: v for k, v in (self.extra_body or {}).items() if not is_secret_name(k)}
        key: dict[str, object] = {
            "backend": "openai",
            "model": self.model,
            "endpoint": redact_url(self.base_url or "https://api.openai.com/v1"),
            "organization": self.organization,
            "extra_body": extra,
            "headers": headers,
        }
        if self.top_logprobs != 20:  # only then, so that the keys of earlier answers hold
            key["top_logprobs"] = self.top_logprobs
        return json.dumps(key, sort_keys=True, default=repr)

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.model!r}, base_url={redact_url(self.base_url) or None!r})"

    def _redact(self, text: str) -> str:
        return redact_text(text, [self._api_key if self._api_key != PLACEHOLDER_API_KEY else None])

    async def client(self) -> AsyncOpenAI:
        """The ``AsyncOpenAI`` client for the running event loop (made on first use): the one
        you passed, else the first of this loop's ``client_shards`` clients."""
        return self._client if self._client is not None else (await self._clients.get()).first

    async def _next_client(self) -> AsyncOpenAI:
        return self._client if self._client is not None else (await self._clients.get()).next()

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        """One chat completion; SDK errors are raised as typed, flagged BackendErrors.

        The request goes through the client's generic ``post`` (auth, base URL, typed SDK
        errors) with a plain JSON body and a raw response: the typed ``create()`` spends
        most of its CPU transforming the many-message RankGPT prompt and building response
        models (see docs/benchmarks.md, section "engine").
        """
        started = time.perf_counter()
        data = await self._post(self._body(messages, settings), settings.timeout)
        return completion_from_json(data, self.name, self.model, time.perf_counter() - started)

    async def afirst_token(
        self, messages: Sequence[Message], labels: Sequence[str], settings: GenerationSettings
    ) -> LabelProbabilities:
        """The first answer token's probabilities over ``labels``, from the server's logprobs:
        one token at temperature 0 with the ``top_logprobs`` most likely, read by the rule of
        :mod:`.backends._logprobs`. No logprobs in the answer: ``LogprobsUnavailableError``."""
        check_labels(labels)
        one_token = replace(settings, temperature=0.0, max_tokens=1, stop=())
        asked = {"logprobs": True, "top_logprobs": self.top_logprobs}
        # the caller's extra_body wins, as for generation
        body = {**self._body(messages, one_token), **asked, **(self.extra_body or {})}
        started = time.perf_counter()
        try:
            data = await self._post(body, settings.timeout)
        except BackendError as exc:
            refused = refused_logprobs(exc, body.get("top_logprobs"))
            if refused is None:
                raise
            raise refused from exc
        latency = time.perf_counter() - started
        return first_token_from_json(data, labels, self.name, self.model, latency)

    async def _post(self, body: dict[str, object], timeout: float | None) -> object:
        """POST ``body`` to ``/chat/completions``; the parsed JSON answer, or a typed error."""
        client = await self._next_client()
        try:
            with self._mapped(timeout):
                response = await client.post(
                    "/chat/completions",
                    body=body,
                    cast_to=_http().Response,
                    options={"timeout": timeout},
                )
            return response.json()
        except ValueError as exc:  # not JSON
            raise BackendError(f"{self.name} answered with no JSON: {exc}", retryable=True) from exc

    def _body(self, messages: Sequence[Message], settings: GenerationSettings) -> dict[str, object]:
        body: dict[str, object] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": settings.temperature,
        }
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.seed is not None:
            body["seed"] = settings.seed
        if settings.stop:
            body["stop"] = list(settings.stop)
        if self.extra_body:
            body.update(self.extra_body)
        return body

    async def awarmup(self, connections: int = 1) -> None:
        """Open ``connections`` keep-alive connections now (``GET /models`` each, at once),
        so the first PSC window does not pay for connection set-up."""
        clients = [await self._next_client() for _ in range(connections)]
        try:
            async with anyio.create_task_group() as group:
                for client in clients:
                    group.start_soon(self._ping, client)
        except BaseExceptionGroup as errors:  # one unreachable server: its error, once
            raise first_failure(errors, "connection(s)") from None

    async def _ping(self, client: AsyncOpenAI) -> None:
        with self._mapped(None):
            await client.get("/models", cast_to=_http().Response)

    def _mapped(self, timeout: float | None) -> AbstractContextManager[None]:
        """The ``openai`` SDK's errors as the library's typed errors (http_errors' table)."""
        return mapped_errors(
            self.name,
            timeout,
            catch=(_openai().APIError,),
            base_url=self.base_url or "",  # "": api.openai.com, not the request's URL
            redact=self._redact,
        )

    async def aclose(self) -> None:
        """Close the clients this backend made (on their own loops, when still running)."""
        await self._clients.aclose()
