"""OpenAI-compatible chat completions: OpenAI, vLLM, llama.cpp's server, Ollama, any proxy.

Uses ``openai.AsyncOpenAI(max_retries=0)``: the engine owns retries, so SDK errors become
typed :class:`~permsc_integrations.errors.BackendError` subclasses with ``retryable`` set.
Needs the ``openai`` extra.

Example:
    >>> from permsc_integrations.testing import ScriptedOpenAIServer
    >>> from permsc_integrations.backends import GenerationSettings, resolve_backend
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

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from ..errors import (
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ConfigurationError,
    MissingDependencyError,
)
from ..results import Usage
from .base import Completion, GenerationSettings, Message
from .http_errors import status_error

__all__ = ["OpenAIBackend", "map_openai_error"]

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a ``base_url`` given without a key (local servers ignore it; the SDK needs one)."""


def _httpx() -> Any:
    import httpx  # a dependency of openai

    return httpx


def _openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError("openai", "openai", purpose="the openai backend") from exc
    return openai


class OpenAIBackend:
    """A backend for any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``model``, ``base_url`` and ``api_key`` default to ``OPENAI_MODEL``, ``OPENAI_BASE_URL``
    and ``OPENAI_API_KEY``; a ``base_url`` with no key gets a placeholder key. One
    ``AsyncOpenAI`` client is made per running event loop (an httpx client must not cross
    loops); a ``client`` you pass is used as is and left open by :meth:`aclose`.

    >>> OpenAIBackend("llama3", base_url="http://localhost:11434/v1").name
    'openai:llama3@localhost:11434'
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        organization: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        default_headers: Mapping[str, str] | None = None,
        max_connections: int = 1000,
    ) -> None:
        _openai()  # fail early, naming the extra, when the SDK is missing
        self.model = model or os.environ.get("OPENAI_MODEL") or ""
        if not self.model:
            raise ConfigurationError(
                "no model given: use a spec like 'openai:gpt-4o-mini', pass model=, "
                "or set OPENAI_MODEL"
            )
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if client is not None and not self.base_url:
            self.base_url = str(getattr(client, "base_url", "")) or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if self.api_key is None and client is None:
            if self.base_url is None:
                raise ConfigurationError(
                    "no API key: set OPENAI_API_KEY or pass api_key=; for a local server "
                    "pass base_url= (e.g. 'http://localhost:8000/v1') and no key is needed"
                )
            self.api_key = PLACEHOLDER_API_KEY
        self.organization = organization
        self.extra_body = dict(extra_body) if extra_body else None
        self.default_headers = dict(default_headers) if default_headers else None
        self.max_connections = max_connections
        self._client = client
        self._clients: dict[int, tuple[Any, Any]] = {}  # id(loop) -> (loop, AsyncOpenAI)
        host = urlparse(self.base_url).netloc if self.base_url else "api.openai.com"
        self.name = f"openai:{self.model}@{host}"

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.model!r}, base_url={self.base_url!r})"

    def client(self) -> Any:
        """The ``AsyncOpenAI`` client for the running event loop (made on first use)."""
        if self._client is not None:
            return self._client
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            self._clients = {k: v for k, v in self._clients.items() if not v[0].is_closed()}
            entry = (loop, self._new_client())
            self._clients[id(loop)] = entry
        return entry[1]

    def _new_client(self) -> Any:
        openai, httpx = _openai(), _httpx()
        limits = httpx.Limits(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )
        return openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            organization=self.organization,
            default_headers=self.default_headers,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits),
        )

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        """One chat completion; SDK errors are raised as typed, flagged BackendErrors.

        The request goes through the client's generic ``post`` (auth, base URL, typed SDK
        errors) with a plain JSON body and a raw response: the typed ``create()`` spends
        most of its CPU transforming the many-message RankGPT prompt and building response
        models (see docs/benchmarks.md, section "engine").
        """
        client, openai = self.client(), _openai()
        started = time.perf_counter()
        try:
            response = await client.post(
                "/chat/completions",
                body=self._body(messages, settings),
                cast_to=_httpx().Response,
                options={"timeout": settings.timeout},
            )
            data = response.json()
        except openai.APIError as exc:
            raise map_openai_error(exc, self.base_url, settings.timeout) from exc
        except ValueError as exc:  # not JSON
            raise BackendError(f"{self.name} answered with no JSON: {exc}", retryable=True) from exc
        return self._completion(data, time.perf_counter() - started)

    def _body(self, messages: Sequence[Message], settings: GenerationSettings) -> dict[str, Any]:
        body: dict[str, Any] = {
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

    def _completion(self, data: Any, latency: float) -> Completion:
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise BackendError(
                f"{self.name} answered without choices[0].message: {str(data)[:200]}",
                retryable=True,
            ) from None
        usage = data.get("usage") or {}
        return Completion(
            text=text,
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                calls=1,
                latency_s=latency,
            ),
            model=data.get("model") or self.model,
            finish_reason=choice.get("finish_reason"),
        )

    async def awarmup(self, connections: int = 1) -> None:
        """Open ``connections`` keep-alive connections now (``GET /models`` each, at once),
        so the first PSC window does not pay for connection set-up."""
        client = self.client()
        await asyncio.gather(*(self._ping(client) for _ in range(connections)))

    async def _ping(self, client: Any) -> None:
        openai = _openai()
        try:
            await client.get("/models", cast_to=_httpx().Response)
        except openai.APIError as exc:
            raise map_openai_error(exc, self.base_url, None) from exc

    async def aclose(self) -> None:
        """Close the clients this backend made (on their own loops, when still running)."""
        clients, self._clients = self._clients, {}
        current = asyncio.get_running_loop()
        for loop, client in clients.values():
            if loop is current:
                await client.close()
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(client.close(), loop)


def map_openai_error(exc: Exception, base_url: str | None, timeout: float | None) -> BackendError:
    """The library's typed error for an ``openai`` SDK error, with ``retryable`` set."""
    openai, where = _openai(), base_url or "api.openai.com"
    if isinstance(exc, openai.APITimeoutError):
        return BackendTimeoutError(
            f"no answer from {where} within {timeout} s; raise timeout= or lower concurrency"
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return BackendConnectionError(
            f"connection to {where} failed ({type(cause).__name__}: {cause}); "
            "check that the server is running and reachable, and that base_url is right"
        )
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, where)
    return BackendError(f"unexpected answer from {where}: {exc}", retryable=False)


def _status_error(exc: Any, where: str) -> BackendError:
    body = exc.body
    said = body.get("message") if isinstance(body, dict) else None
    detail = f"{where} answered {exc.status_code}: {said or exc.message}"
    return status_error(
        exc.status_code, detail, code=getattr(exc, "code", None), response=exc.response
    )
