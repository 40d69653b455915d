"""Shared fixtures: real loopback OpenAI-compatible servers for any test that needs one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


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
