"""HTTP and model failures as the library's typed errors, shared by every backend.

:func:`status_error` turns an HTTP status into the right :class:`BackendError` (with
``retryable`` and ``retry_after`` set); :func:`map_model_error` does the same for whatever a
framework's model raised (a LangChain chat model, a LlamaIndex LLM): ``openai`` SDK errors
exactly as the core's openai backend maps them, other errors by their HTTP status, then
timeouts and dropped connections by kind; anything else is not retried.

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
import time
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ContextLengthError,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitError,
)
from ..redaction import redact_text, redact_url

__all__ = ["status_error", "retry_after", "map_model_error", "map_openai_error"]

_CONTEXT = re.compile(
    r"context.length|maximum context|context window|context size|too many tokens"
    r"|prompt is too long|exceeds? the (?:model'?s? )?(?:max|context)",
    re.I,
)


def retry_after(response: Any) -> float | None:
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
    status: int, detail: str, *, code: str | None = None, response: Any = None
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


def map_model_error(exc: Exception, source: str, timeout: float | None) -> BackendError:
    """The typed error for what a framework's model (named by ``source``) raised."""
    try:
        # lazy: optional dependency (the openai extra)
        import openai
    except ImportError:
        openai = None  # type: ignore[assignment]
    if openai is not None and isinstance(exc, openai.APIError):
        url = getattr(getattr(exc, "request", None), "url", None)
        return map_openai_error(exc, str(url) if url else None, timeout)
    what = f"{type(exc).__name__} from {source}: {exc}"
    status = _status_code(exc)
    if status is not None:
        return status_error(status, what, response=getattr(exc, "response", None))
    if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
        return BackendTimeoutError(f"{what}; raise timeout= or lower max_concurrency")
    if isinstance(exc, ConnectionError) or "Connection" in type(exc).__name__:
        return BackendConnectionError(f"{what}; check that the server is running and reachable")
    return BackendError(f"{what}; not retried, check the model's configuration", retryable=False)


def map_openai_error(
    exc: Exception,
    base_url: str | None,
    timeout: float | None,
    redact: Any = redact_text,
) -> BackendError:
    """The library's typed error for an ``openai`` SDK error, with ``retryable`` set; every
    text goes through ``redact`` (URLs and, from a backend, its key)."""
    # lazy: an optional dependency, installed whenever its errors reach here
    import openai

    where = redact_url(base_url) or "api.openai.com"
    dropped = _aiohttp_connection_error(exc)
    if isinstance(exc, openai.APITimeoutError) and dropped is None:
        return BackendTimeoutError(
            f"no answer from {where} within {timeout} s; raise timeout= or lower concurrency"
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = dropped or exc.__cause__ or exc
        return BackendConnectionError(
            redact(
                f"connection to {where} failed ({type(cause).__name__}: {cause}); "
                "check that the server is running and reachable, and that base_url is right"
            )
        )
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        said = body.get("message") if isinstance(body, dict) else None
        detail = redact(f"{where} answered {exc.status_code}: {said or exc.message}")
        code = getattr(exc, "code", None)
        return status_error(exc.status_code, detail, code=code, response=exc.response)
    return BackendError(redact(f"unexpected answer from {where}: {exc}"), retryable=False)


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
