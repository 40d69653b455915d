"""Shared fixtures: real loopback OpenAI-compatible servers for any test that needs one,
``until`` (async) and ``wait_until`` (sync), to wait for the state a test asserts instead of
for a time, ``closed_port``, where nothing listens, and ``permsc serve`` processes with what
their tests send (``serve_case``)."""

from __future__ import annotations

import os

# The list model's fit (_frontier/) is small dense algebra: on these shared 2-core machines a
# multi-threaded OpenBLAS spins for its threads and runs it up to 16x slower (docs/strategies.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
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
        _timed_out(condition, timeout)

    return wait


@pytest.fixture
def wait_until() -> Callable[..., None]:
    """:func:`until` for sync tests (threads, server processes): ``wait_until(condition)``
    blocks until ``condition()`` holds, checked every ``every`` seconds; past ``timeout``
    seconds, the test fails naming ``what`` (or the condition)."""

    def wait(
        condition: Callable[[], bool],
        what: str | None = None,
        *,
        timeout: float = 10.0,
        every: float = 0.001,
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                _timed_out(condition, timeout, what)
            time.sleep(every)

    return wait


def _timed_out(condition: Callable[[], bool], timeout: float, what: str | None = None) -> None:
    pytest.fail(f"still false after {timeout} s: {what or condition.__doc__ or condition}")


@pytest.fixture
def models_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test loads local models into a cache of its own, dropped after it: the models the
    process had loaded (the 1.5B one, about 20 s to load here) are there again for the next."""
    from permsc_integrations.backends.local import transformers as local

    monkeypatch.setattr(local, "_MODELS", {})


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


class ServeProcess:
    """A real ``permsc serve`` subprocess on a free port; its stderr is kept in ``log``;
    ``nofile``: its open-file limit (``ulimit -n``)."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        nofile: int | None = None,
        command: str = "serve",
    ) -> None:
        import resource
        import subprocess
        import sys
        import threading

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.log: list[str] = []
        self._ready = threading.Event()
        self.port = 0
        cmd = [sys.executable, "-m", "permsc_integrations.cli", command, "--port", "0", *args]
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit if nofile is not None else None,
        )
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._ready.wait(60) or not self.port:
            self.stop()
            raise RuntimeError(f"permsc {command} did not start:\n" + "".join(self.log))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if "listening on" in line and not self.port:
                self.port = int(line.rsplit(":", 1)[1])
                self._ready.set()
        self._ready.set()  # exited: stop waiting

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        """SIGTERM, then wait (kill after 30 s); returns the exit status."""
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def _serve_processes() -> Iterator[Callable[..., ServeProcess]]:
    import os

    started: list[ServeProcess] = []

    def start(
        *args: str,
        env: dict[str, str] | None = None,
        nofile: int | None = None,
        command: str = "serve",
    ) -> ServeProcess:
        full = {k: v for k, v in os.environ.items() if k not in ("PERMSC_API_KEYS",)}
        full["OPENAI_API_KEY"] = "sk-test-upstream"
        full.update(env or {})
        process = ServeProcess(list(args), full, nofile, command)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def serve_process() -> Iterator[Callable[..., ServeProcess]]:
    """A factory: ``serve_process(*flags, env={...}, nofile=None, command="serve")`` starts
    ``permsc serve`` (the upstream key is OPENAI_API_KEY=sk-test-upstream; ``nofile``: its
    ``ulimit -n``; ``command="mcp"``: ``permsc mcp``, whose flags are serve's); every process
    is stopped after the test."""
    yield from _serve_processes()


@pytest.fixture(scope="module")
def module_serve_process() -> Iterator[Callable[..., ServeProcess]]:
    """:func:`serve_process` whose processes live until the module's tests are done."""
    yield from _serve_processes()


@dataclass(frozen=True)
class ServeCase:
    """What the ``permsc serve`` tests send and what their scripted upstream answers: two client
    keys, a query, eight documents of which those naming goldfish are relevant (the more often,
    the more), and a noisy, position-biased model that ranks them so."""

    key: str = "client-key-alpha"
    other_key: str = "client-key-beta"
    query: str = "goldfish growth"
    docs: tuple[str, ...] = (
        "Goldfish need a filtered tank.",
        "Cats purr when content.",
        "Goldfish goldfish goldfish: growth depends on the tank.",
        "The stock market fell today.",
        "A goldfish can live for decades.",
        "Mountains are tall.",
        "Goldfish goldfish grow with their tank.",
        "Paris is in France.",
    )

    @property
    def auth(self) -> dict[str, str]:
        """The headers of a request with ``key``."""
        return {"Authorization": f"Bearer {self.key}"}

    @staticmethod
    def relevance(text: str) -> float:
        return text.lower().count("goldfish")

    @property
    def responder(self) -> Any:
        """The upstream model (seeded by the prompt: the same answer to the same prompt)."""
        from permsc_integrations.testing import noisy_responder

        return noisy_responder(self.relevance, keep=0.4, position_bias=0.5, seed=3)

    @staticmethod
    def flags(upstream: Any, *extra: str) -> list[str]:
        """``permsc serve`` flags that serve the scripted ``upstream`` as ``permsc``."""
        return ["--backend", "openai:scripted", "--base-url", upstream.base_url, *extra]

    def direct_order(
        self, upstream: Any, docs: Any = None, query: str | None = None, **options: Any
    ) -> tuple[int, ...]:
        """The order ``PSCRanker`` gives (the query and documents by default) against the same
        upstream, with ``options``."""
        from permsc_integrations import PSCRanker

        backend_options = {"base_url": upstream.base_url, "api_key": "sk-test-upstream"}
        with PSCRanker("openai:scripted", backend_options=backend_options, **options) as ranker:
            return ranker.rank(query or self.query, list(docs or self.docs)).order


@pytest.fixture(scope="session")
def serve_case() -> ServeCase:
    """:class:`ServeCase`: the data the serve tests share."""
    return ServeCase()
