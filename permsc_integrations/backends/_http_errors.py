"""HTTP and model failures as the library's typed errors, shared by every backend.

:func:`status_error` turns an HTTP status into the right :class:`BackendError` (with
``retryable`` and ``retry_after`` set). :data:`ERROR_TABLE` maps everything else, one row
per kind: ``openai`` SDK errors first, then any error with an HTTP status, then timeouts and
dropped connections of the usual transports (asyncio, httpx, httpcore, requests, urllib3,
aiohttp); anything else is not retried. :func:`mapped_errors` is the one context manager
that applies it (the openai backend and both adapters' model backends).

Example:
    >>> err = status_error(503, "server answered 503")
    >>> type(err).__name__, err.retryable
    ('BackendError', True)
    >>> type(status_error(401, "bad key")).__name__, status_error(401, "bad key").fatal
    ('AuthenticationError', True)
    >>> status_error(400, "maximum context length is 4096 tokens").__class__.__name__
    'ContextLengthError'
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from permsc_integrations._registry import publish
from permsc_integrations.backends._redaction import redact_text, redact_url
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ContextLengthError,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitError,
)

__all__ = [
    "status_error",
    "retry_after",
    "ERROR_TABLE",
    "map_error",
    "mapped_errors",
    "map_model_error",
    "map_openai_error",
]

_CONTEXT = re.compile(
    r"context.length|maximum context|context window|context size|too many tokens"
    r"|prompt is too long|exceeds? the (?:model'?s? )?(?:max|context)",
    re.I,
)


def retry_after(response: object) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    headers = getattr(response, "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def status_error(
    status: int, detail: str, *, code: str | None = None, response: object = None
) -> BackendError:
    """The typed error for an HTTP ``status``; ``detail`` says who answered what."""
    if status == 429:
        if code == "insufficient_quota" or "insufficient_quota" in detail:
            return QuotaExceededError(
                f"{detail}; the account is out of credit: add credit (retrying cannot help)",
                status_code=status,
            )
        return RateLimitError(detail, status_code=status, retry_after=retry_after(response))
    if status in (401, 403):
        return AuthenticationError(
            f"{detail}; check api_key / OPENAI_API_KEY and the key's access to the model",
            status_code=status,
        )
    if status in (400, 413, 422) and (code == "context_length_exceeded" or _CONTEXT.search(detail)):
        return ContextLengthError(
            f"{detail}; the prompt does not fit the model's context: use a smaller "
            "window_size, a lower max_words, or a model with a longer context",
            status_code=status,
        )
    if status == 404:
        return ModelNotFoundError(
            f"{detail}; check the model name and that base_url ends in /v1",
            status_code=status,
        )
    retryable = status >= 500 or status in (408, 409)
    return BackendError(
        detail,
        retryable=retryable,
        status_code=status,
        retry_after=retry_after(response) if retryable else None,
    )


def _status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if code is None:
        code = getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) else None


@dataclass(frozen=True, slots=True)
class _Origin:
    """Who raised: ``source`` names a framework's model, ``base_url`` an openai server."""

    source: str
    timeout: float | None
    base_url: str | None
    redact: Callable[[str], str]

    @property
    def where(self) -> str:
        return redact_url(self.base_url) or "api.openai.com"

    def what(self, exc: BaseException) -> str:
        return f"{type(exc).__name__} from {self.source}: {exc}"


def _openai_timeout(exc: BaseException, o: _Origin) -> BackendError:
    if _aiohttp_connection_error(exc) is not None:  # a dropped connection, reported as a timeout
        return _openai_connection(exc, o)
    return BackendTimeoutError(
        f"no answer from {o.where} within {o.timeout} s; raise timeout= or lower concurrency"
    )


def _openai_connection(exc: BaseException, o: _Origin) -> BackendError:
    cause = _aiohttp_connection_error(exc) or exc.__cause__ or exc
    return BackendConnectionError(
        o.redact(
            f"connection to {o.where} failed ({type(cause).__name__}: {cause}); "
            "check that the server is running and reachable, and that base_url is right"
        )
    )


def _openai_status(exc: Any, o: _Origin) -> BackendError:  # an openai.APIStatusError
    body = exc.body
    said = body.get("message") if isinstance(body, dict) else None
    detail = o.redact(f"{o.where} answered {exc.status_code}: {said or exc.message}")
    code = getattr(exc, "code", None)
    return status_error(exc.status_code, detail, code=code, response=exc.response)


def _openai_other(exc: BaseException, o: _Origin) -> BackendError:
    return BackendError(o.redact(f"unexpected answer from {o.where}: {exc}"), retryable=False)


def _by_status(exc: BaseException, o: _Origin) -> BackendError:
    status = _status_code(exc)
    assert status is not None  # the row matched on it
    return status_error(status, o.what(exc), response=getattr(exc, "response", None))


def _timeout(exc: BaseException, o: _Origin) -> BackendError:
    said = o.what(exc) if str(exc) else f"no answer from {o.source} within {o.timeout} s"
    return BackendTimeoutError(f"{said}; raise timeout= or lower max_concurrency")


def _connection(exc: BaseException, o: _Origin) -> BackendError:
    return BackendConnectionError(f"{o.what(exc)}; check that the server is running and reachable")


def _other(exc: BaseException, o: _Origin) -> BackendError:
    return BackendError(
        f"{o.what(exc)}; not retried, check the model's configuration", retryable=False
    )


def _is(*paths: str) -> Callable[[BaseException], bool]:
    """Whether an exception is one of the classes named ``module:Class``. A module that is not
    imported cannot have raised, so nothing is imported here."""

    def matches(exc: BaseException) -> bool:
        for path in paths:
            module, _, name = path.partition(":")
            cls = getattr(sys.modules.get(module), name, None)
            if isinstance(cls, type) and isinstance(exc, cls):
                return True
        return False

    return matches


def _has_status(exc: BaseException) -> bool:
    return _status_code(exc) is not None


ERROR_TABLE: tuple[
    tuple[Callable[[BaseException], bool], Callable[[Any, _Origin], BackendError]], ...
] = (
    (_is("openai:APITimeoutError"), _openai_timeout),
    (_is("openai:APIConnectionError"), _openai_connection),
    (_is("openai:APIStatusError"), _openai_status),
    (_is("openai:APIError"), _openai_other),
    (_has_status, _by_status),
    (
        _is(
            "builtins:TimeoutError",
            "httpx:TimeoutException",
            "httpcore:TimeoutException",
            "requests.exceptions:Timeout",
            "urllib3.exceptions:TimeoutError",
            "aiohttp:ServerTimeoutError",
        ),
        _timeout,
    ),
    (
        _is(
            "builtins:ConnectionError",
            "httpx:TransportError",
            "httpcore:NetworkError",
            "httpcore:RemoteProtocolError",
            "requests.exceptions:ConnectionError",
            "urllib3.exceptions:ProtocolError",
            "aiohttp:ClientConnectionError",
        ),
        _connection,
    ),
)
"""Provider and transport errors -> the error tree: the first row whose test matches builds
the error; anything else is a :class:`BackendError` that is not retried."""


def map_error(
    exc: BaseException,
    source: str,
    timeout: float | None,
    *,
    base_url: str | None = None,
    redact: Callable[[str], str] = redact_text,
) -> BackendError:
    """The typed error for ``exc``, by :data:`ERROR_TABLE`; ``source`` names who raised,
    ``base_url`` the server an ``openai`` client spoke to (``None``: the URL of the error's
    request, if any), and ``redact`` cleans the texts of openai errors (URLs and, from a
    backend, its key)."""
    if base_url is None:
        url = getattr(getattr(exc, "request", None), "url", None)
        base_url = str(url) if url else None
    origin = _Origin(source, timeout, base_url, redact)
    for matches, build in ERROR_TABLE:
        if matches(exc):
            return build(exc, origin)
    return _other(exc, origin)


@contextmanager
def mapped_errors(
    source: str,
    timeout: float | None,
    *,
    catch: tuple[type[BaseException], ...] = (Exception,),
    base_url: str | None = None,
    redact: Callable[[str], str] = redact_text,
) -> Iterator[None]:
    """Raise what the block raises as the library's typed error (``from`` the original);
    errors already typed, and those not in ``catch``, pass unchanged.

    >>> with mapped_errors("a model", 5.0):
    ...     raise ConnectionRefusedError("refused")
    Traceback (most recent call last):
    ...
    permsc_integrations.errors.BackendConnectionError: ConnectionRefusedError from a model: \
refused; check that the server is running and reachable
    """
    try:
        yield
    except BackendError:
        raise
    except catch as exc:
        raise map_error(exc, source, timeout, base_url=base_url, redact=redact) from exc


def map_model_error(exc: Exception, source: str, timeout: float | None) -> BackendError:
    """The typed error for what a framework's model (named by ``source``) raised."""
    return map_error(exc, source, timeout)


def map_openai_error(
    exc: Exception,
    base_url: str | None,
    timeout: float | None,
    redact: Callable[[str], str] = redact_text,
) -> BackendError:
    """The library's typed error for an ``openai`` SDK error, with ``retryable`` set; every
    text goes through ``redact`` (URLs and, from a backend, its key)."""
    return map_error(exc, "the openai client", timeout, base_url=base_url or "", redact=redact)


def _aiohttp_connection_error(exc: BaseException) -> BaseException | None:
    """The aiohttp connection error (not a timeout) behind ``exc``, if any. The aiohttp
    transport reports a refused or dropped connection as a connect *timeout*; this tells
    the two apart."""
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.startswith("aiohttp") and not isinstance(
            seen, (TimeoutError, asyncio.TimeoutError)
        ):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


# the adapters' declared API (permsc_integrations.integration) names these; they live here
publish("permsc_integrations.backends", mapped_errors)
