"""One mapping from HTTP statuses and framework model failures to the typed error tree."""

from __future__ import annotations

import httpx
import pytest

from permsc_integrations.backends._http_errors import map_model_error, status_error
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


def http_error(status: int, text: str = "", **headers: str) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx.Response(status, headers=headers, text=text, request=request)
    return httpx.HTTPStatusError(f"{status} {text}", request=request, response=response)


@pytest.mark.parametrize(
    ("status", "text", "kind", "retryable"),
    [
        (429, "slow down", RateLimitError, True),
        (503, "busy", BackendError, True),
        (408, "timeout", BackendError, True),
        (401, "who are you", AuthenticationError, False),
        (403, "not yours", AuthenticationError, False),
        (404, "no such model", ModelNotFoundError, False),
        (400, "maximum context length is 2048 tokens", ContextLengthError, False),
        (400, "bad request", BackendError, False),
    ],
)
def test_a_status_bearing_error_from_any_model_maps_by_status(
    status: int, text: str, kind: type[BackendError], retryable: bool
) -> None:
    err = map_model_error(http_error(status, text, **{"retry-after": "2"}), "a model", 5.0)
    assert type(err) is kind
    assert err.retryable is retryable and err.status_code == status
    assert err.retry_after == (2.0 if retryable else None)
    assert "a model" in str(err)


def test_timeouts_and_connections_map_by_kind() -> None:
    assert isinstance(map_model_error(TimeoutError("late"), "m", 1.0), BackendTimeoutError)
    assert isinstance(
        map_model_error(ConnectionRefusedError("no"), "m", 1.0), BackendConnectionError
    )
    other = map_model_error(KeyError("odd"), "m", 1.0)
    assert type(other) is BackendError and not other.retryable


def test_insufficient_quota_is_a_rate_limit_that_is_not_retried() -> None:
    err = status_error(429, "quota", code="insufficient_quota")
    assert isinstance(err, QuotaExceededError) and isinstance(err, RateLimitError)
    assert not err.retryable and err.fatal and err.trips_breaker


def test_which_errors_are_fatal_and_which_trip_the_breaker() -> None:
    fatal = {401: True, 403: True, 404: True, 500: False, 429: False, 400: False}
    for status, expected in fatal.items():
        err = status_error(status, "x")
        assert err.fatal is expected and err.trips_breaker is expected, status
    context = status_error(400, "maximum context length exceeded")
    assert context.fatal and not context.trips_breaker  # another prompt may fit
