"""The one table from provider and transport errors to the error tree, and its context manager."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from permsc_integrations.backends._http_errors import map_error, mapped_errors
from permsc_integrations.errors import (
    AuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    RateLimitError,
)

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def _from(module: str, build: Callable[[Any], Exception], kind: type) -> Any:
    """A row whose error comes from an optional transport (skipped where it is not installed:
    the floors environment has neither aiohttp nor requests)."""
    try:
        found = importlib.import_module(module)
    except ImportError:
        return pytest.param(None, kind, True, marks=pytest.mark.skip(reason=f"no {module}"))
    return (build(found), kind, True)


def _status(code: int) -> openai.APIStatusError:
    response = httpx.Response(code, json={"message": "no"}, request=REQUEST)
    return openai.APIStatusError("no", response=response, body={"message": "no"})


@pytest.mark.parametrize(
    ("exc", "kind", "retryable"),
    [
        (TimeoutError(), BackendTimeoutError, True),
        (httpx.ReadTimeout("slow", request=REQUEST), BackendTimeoutError, True),
        _from("httpcore", lambda m: m.PoolTimeout("slow"), BackendTimeoutError),
        _from("requests", lambda m: m.exceptions.ReadTimeout("slow"), BackendTimeoutError),
        _from(
            "urllib3",
            lambda m: m.exceptions.ReadTimeoutError(None, "/", "slow"),
            BackendTimeoutError,
        ),
        (ConnectionRefusedError("no"), BackendConnectionError, True),
        (httpx.ConnectError("refused", request=REQUEST), BackendConnectionError, True),
        (httpx.RemoteProtocolError("closed", request=REQUEST), BackendConnectionError, True),
        _from("httpcore", lambda m: m.ConnectError("refused"), BackendConnectionError),
        _from(
            "requests", lambda m: m.exceptions.ConnectionError("refused"), BackendConnectionError
        ),
        _from("aiohttp", lambda m: m.ServerDisconnectedError(), BackendConnectionError),
        (openai.APITimeoutError(request=REQUEST), BackendTimeoutError, True),
        (openai.APIConnectionError(request=REQUEST), BackendConnectionError, True),
        (_status(429), RateLimitError, True),
        (_status(401), AuthenticationError, False),
        (_status(500), BackendError, True),
        (KeyError("odd"), BackendError, False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_each_row_maps_its_classes(exc: Exception, kind: type, retryable: bool) -> None:
    err = map_error(exc, "a model", 5.0)
    assert type(err) is kind
    assert err.retryable is retryable


def test_an_openai_error_names_the_server_it_spoke_to() -> None:
    err = map_error(openai.APIConnectionError(request=REQUEST), "a model", 5.0)
    assert "connection to http://127.0.0.1:9/v1/chat/completions failed" in str(err)
    assert "api.openai.com" in str(map_error(_status(500), "x", 1.0, base_url=""))


def test_a_class_is_mapped_by_what_it_is_not_by_its_name() -> None:
    # the old mapping sniffed "Timeout" in the class name: this one was retried as a timeout
    class NoTimeoutConfigured(Exception):
        pass

    err = map_error(NoTimeoutConfigured("set one"), "a model", 5.0)
    assert type(err) is BackendError and not err.retryable


def test_a_timeout_without_text_says_who_gave_no_answer() -> None:
    err = map_error(TimeoutError(), "langchain:fake", 2.0)
    assert str(err).startswith("no answer from langchain:fake within 2.0 s")


def test_the_context_manager_maps_chains_and_lets_typed_and_uncaught_errors_through() -> None:
    with pytest.raises(BackendConnectionError) as info:
        with mapped_errors("a model", 1.0):
            raise ConnectionResetError("reset")
    assert isinstance(info.value.__cause__, ConnectionResetError)
    typed = RateLimitError("slow down")
    with pytest.raises(RateLimitError) as raised:
        with mapped_errors("a model", 1.0):
            raise typed
    assert raised.value is typed
    with pytest.raises(KeyError):
        with mapped_errors("a model", 1.0, catch=(openai.APIError,)):
            raise KeyError("a bug, not a provider error")
