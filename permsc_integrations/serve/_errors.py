"""What a failed ranking becomes over HTTP: a status, a message in Cohere's shape, headers.

The caller is blamed (4xx) only for what the caller sent; the upstream model's failures are
5xx that name the upstream, except its rate limits, passed on as 429 with ``Retry-After``.
Every message goes through :func:`~permsc_integrations.backends._redaction.redact_text` with every
known secret, so no key reaches a response or a log line.

Example:
    >>> from permsc_integrations.errors import AuthenticationError
    >>> answer = http_error(AuthenticationError("bad key sk-123456", status_code=401), "openai:m")
    >>> answer.status
    502
    >>> answer.redacted(["sk-123456"]).message
    "upstream openai:m refused the request (HTTP 401): bad key ***; the server's operator ..."
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from permsc_integrations.backends import redact_text
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    ConfigurationError,
    ContextLengthError,
    InsufficientSamplesError,
    InvalidRankingError,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitError,
    SpendingCapError,
)

__all__ = ["HttpError", "http_error"]

_FIX = "the server's operator must fix its upstream configuration"


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str
    headers: tuple[tuple[str, str], ...] = ()

    def redacted(self, secrets: Iterable[str | None]) -> HttpError:
        return HttpError(self.status, redact_text(self.message, secrets), self.headers)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _retry_after(errors: Iterable[BaseException]) -> str:
    waits = [e.retry_after for e in errors if isinstance(e, RateLimitError) and e.retry_after]
    return str(max(1, math.ceil(max(waits, default=1.0))))


def _rate_limited(errors: list[BaseException]) -> list[BaseException]:
    return [
        e for e in errors if isinstance(e, RateLimitError) and not isinstance(e, QuotaExceededError)
    ]


def _backend(exc: BackendError, upstream: str) -> HttpError:
    code = f" (HTTP {exc.status_code})" if exc.status_code else ""
    text = f"{_first_line(exc)}; {_FIX}"
    if isinstance(exc, (AuthenticationError, ModelNotFoundError, QuotaExceededError)):
        # a quota refused by the open breaker says when its probe may go
        retry = (("retry-after", _retry_after([exc])),) if exc.retry_after else ()
        return HttpError(502, f"upstream {upstream} refused the request{code}: {text}", retry)
    if isinstance(exc, ContextLengthError):
        return HttpError(
            400,
            f"the documents do not fit upstream {upstream}'s context window; "
            "send shorter documents or a lower max_tokens_per_doc",
        )
    if isinstance(exc, RateLimitError):
        retry = (("retry-after", _retry_after([exc])),)
        return HttpError(429, f"upstream {upstream} is rate limited; retry later", retry)
    if isinstance(exc, BackendTimeoutError):
        return HttpError(504, f"upstream {upstream} timed out: {_first_line(exc)}")
    if isinstance(exc, BackendConnectionError):
        return HttpError(502, f"upstream {upstream} unreachable: {_first_line(exc)}")
    return HttpError(502, f"upstream {upstream} failed{code}: {_first_line(exc)}")


def _spent(exc: SpendingCapError) -> HttpError:
    """A spending cap: the server's (``ranker_cap``, spent for good: 503) or the request's
    (``request_cap``: the request is too large for it, 413), never a 500."""
    cap = f"{exc.scope}_cap {exc.limit}={exc.cap:g}"
    if exc.scope == "ranker":
        return HttpError(
            503,
            f"this server's spending cap ({cap}) is spent: no further ranking can be paid for; "
            "the server's operator must raise it and restart the server",
        )
    need = f" (its plan needs {exc.needed:g} {exc.limit})" if exc.needed is not None else ""
    return HttpError(
        413,
        f"this request needs more than the server's per-request cap ({cap}) allows{need}: "
        "send fewer or shorter documents",
    )


def http_error(exc: BaseException, upstream: str) -> HttpError:
    """The HTTP answer for an exception raised by ``PSCRanker.arank``."""
    if isinstance(exc, SpendingCapError):
        return _spent(exc)
    if isinstance(exc, BackendError):
        return _backend(exc, upstream)
    if isinstance(exc, InsufficientSamplesError):
        failures = list(exc.failures)
        limited = _rate_limited(failures)
        if limited and len(limited) * 2 >= len(failures):
            retry = (("retry-after", _retry_after(limited)),)
            return HttpError(429, f"upstream {upstream} is rate limited; retry later", retry)
        fatal = [f for f in failures if isinstance(f, BackendError) and f.fatal]
        if fatal:
            return _backend(fatal[0], upstream)
        return HttpError(
            502,
            f"upstream {upstream} gave too few usable answers ({exc.successful} of "
            f"{exc.required} needed): {_first_line(failures[0]) if failures else ''}",
        )
    if isinstance(exc, (ConfigurationError, InvalidRankingError)):
        return HttpError(400, _first_line(exc))
    return HttpError(500, f"internal error ({type(exc).__name__}); see the server's log")
