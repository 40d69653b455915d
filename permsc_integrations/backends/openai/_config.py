"""What an :class:`~permsc_integrations.backends.openai.OpenAIBackend` is made from, checked:
the openai SDK and its HTTP library, the HTTP client class (``http=``), the endpoint and the key.

Example:
    >>> checked_url("http://localhost:8000/v1")
    'http://localhost:8000/v1'
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from permsc_integrations.backends._redaction import redact_url, refuse_masked
from permsc_integrations.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:  # optional dependency (the openai extra), imported where used
    from httpx import AsyncClient
    from openai import AsyncOpenAI

__all__ = [
    "PLACEHOLDER_API_KEY",
    "HTTP_CLIENTS",
    "openai_sdk",
    "http_library",
    "http_client_class",
    "checked_url",
    "endpoint",
    "checked_key",
]

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to a ``base_url`` given without a key (local servers ignore it; the SDK needs one)."""


def openai_sdk() -> ModuleType:
    try:
        # lazy: optional dependency (the openai extra)
        import openai
    except ImportError as exc:
        raise MissingDependencyError("openai", "openai", purpose="the openai backend") from exc
    return openai


def http_library() -> ModuleType:
    """The HTTP library the installed SDK is built on (``httpx`` or ``httpx2``)."""
    for cls in openai_sdk().DefaultAsyncHttpxClient.__mro__:
        if cls.__name__ == "AsyncClient":
            return importlib.import_module(cls.__module__.partition(".")[0])
    raise MissingDependencyError("httpx", "openai", purpose="the openai SDK's HTTP client")


HTTP_CLIENTS = {"httpx": "DefaultAsyncHttpxClient", "aiohttp": "DefaultAioHttpClient"}
"""``http=`` names: the openai SDK's async HTTP client classes (``aiohttp``: its aiohttp transport,
from the ``aiohttp`` extra)."""


def http_client_class(http: str) -> type[AsyncClient]:
    """The SDK's client class for ``http`` (a key of :data:`HTTP_CLIENTS`), checked usable."""
    if http not in HTTP_CLIENTS:
        raise ConfigurationError(f"http must be one of {sorted(HTTP_CLIENTS)}, got {http!r}")
    cls = getattr(openai_sdk(), HTTP_CLIENTS[http], None)
    # without its transport the SDK defines a stand-in that raises when made
    if cls is None or (http == "aiohttp" and not _from_aiohttp(cls)):
        raise MissingDependencyError(
            "aiohttp", "aiohttp", purpose="the openai backend's http='aiohttp'"
        )
    return cls


def _from_aiohttp(cls: type) -> bool:
    return any("aiohttp" in base.__module__ for base in cls.__mro__)


def checked_url(base_url: str | None) -> str | None:
    if base_url is None:
        return None
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"base_url must be an http(s) URL such as 'http://localhost:8000/v1', got "
            f"{redact_url(base_url)!r}"
        )
    return base_url


def endpoint(given: str | None, client: AsyncOpenAI | None, http: str) -> str | None:
    """The endpoint: ``given``, else ``OPENAI_BASE_URL``, else a given client's; checked."""
    url = given or os.environ.get("OPENAI_BASE_URL") or None
    if client is not None and not url:
        url = str(getattr(client, "base_url", "")) or None
    refuse_masked("base_url", url)
    checked = checked_url(url)
    if http == "aiohttp" and checked and urlsplit(checked).username is not None:
        raise ConfigurationError(
            "http='aiohttp' cannot send credentials in base_url beside the API key "
            f"({redact_url(checked)}); put them in default_headers or use http='httpx'"
        )
    return checked


def checked_key(given: str | None, client: AsyncOpenAI | None, base_url: str | None) -> str | None:
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
