"""Shared fixtures: real loopback OpenAI-compatible servers for any test that needs one, and
``until``, to wait for the state a test asserts instead of for a time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest


@pytest.fixture
def until() -> Callable[..., Awaitable[None]]:
    """``await until(condition)``: return once ``condition()`` holds (checked each millisecond:
    for state another thread changes, such as a server's request log). Past ``timeout``
    seconds, fail the test naming the condition, rather than hang."""

    async def wait(condition: Callable[[], bool], *, timeout: float = 10.0) -> None:
        with anyio.move_on_after(timeout):
            while not condition():
                await anyio.sleep(0.001)
            return
        pytest.fail(f"still false after {timeout} s: {condition.__doc__ or condition}")

    return wait


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., Any]]:
    """A factory: ``scripted_server(responder, **options)`` starts a ScriptedOpenAIServer on
    127.0.0.1 and returns it; every server it started is stopped after the test."""
    from permsc_integrations.testing import ScriptedOpenAIServer

    started: list[ScriptedOpenAIServer] = []

    def start(responder: Any = None, **options: Any) -> ScriptedOpenAIServer:
        server = ScriptedOpenAIServer(responder, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
