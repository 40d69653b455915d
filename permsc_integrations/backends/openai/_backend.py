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

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
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
from permsc_integrations.backends.openai._config import (
    PLACEHOLDER_API_KEY,
    checked_key,
    endpoint,
    http_client_class,
    http_library,
    openai_sdk,
)
from permsc_integrations.errors import (
    BackendError,
    ConfigurationError,
    first_failure,
)

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:  # optional dependency (the openai extra), imported where used
    import ssl

    from httpx import AsyncClient
    from openai import AsyncOpenAI

__all__ = ["OpenAIBackend", "completion_from_json"]


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
        http = http_library()
        limits = http.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        auth = {"auth": http.BasicAuth(*credentials)} if credentials else {}
        http_client = client_class(limits=limits, verify=verify, **auth)
        return openai_sdk().AsyncOpenAI(**options, max_retries=0, http_client=http_client)

    def new_shards() -> Shards[AsyncOpenAI]:
        # the loop's clients share one SSL context (making one costs about 25 ms)
        make_context = getattr(http_library(), "create_ssl_context", None)
        verify = make_context() if make_context is not None else True
        return Shards(lambda: new_client(verify), count)

    return new_shards


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
        self._client_class = http_client_class(http)
        self.http = http
        self.model = model or os.environ.get("OPENAI_MODEL") or ""
        if not self.model:
            raise ConfigurationError(
                "no model given: use a spec like 'openai:gpt-4o-mini', pass model=, "
                "or set OPENAI_MODEL"
            )
        self.base_url = endpoint(base_url, client, http)
        self._api_key = checked_key(api_key, client, self.base_url)
        self.organization = organization
        self.extra_body = dict(extra_body) if extra_body else None
        self.default_headers = dict(default_headers) if default_headers else None
        self.max_connections = max_connections
        positive_int("client_shards", client_shards)
        self.client_shards = client_shards if http == "httpx" else 1
        self.top_logprobs = positive_int("top_logprobs", top_logprobs)
        self._client = client
        self._clients = LoopClients(self._shards())
        self.name = f"openai:{self.model}@{self._host()}"

    def _shards(self) -> Callable[[], Shards[AsyncOpenAI]]:
        sdk_url, credentials = split_credentials(self.base_url)
        options = {
            "api_key": self._api_key,
            "base_url": sdk_url,
            "organization": self.organization,
            "default_headers": self.default_headers,
        }
        return _shard_factory(
            options, credentials, self._client_class, self.max_connections, self.client_shards
        )

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
                    cast_to=http_library().Response,
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
            await client.get("/models", cast_to=http_library().Response)

    def _mapped(self, timeout: float | None) -> AbstractContextManager[None]:
        """The ``openai`` SDK's errors as the library's typed errors (http_errors' table)."""
        return mapped_errors(
            self.name,
            timeout,
            catch=(openai_sdk().APIError,),
            base_url=self.base_url or "",  # "": api.openai.com, not the request's URL
            redact=self._redact,
        )

    async def aclose(self) -> None:
        """Close the clients this backend made (on their own loops, when still running)."""
        await self._clients.aclose()
