"""The scripted OpenAI-compatible server itself (starlette under uvicorn, in a thread)."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

import anyio.to_thread

from permsc_integrations._ranker.ranker import PSCRanker
from permsc_integrations.errors import MissingDependencyError, PermscError
from permsc_integrations.testing._asgi import (
    drop,
    error_body,
    logprobs_of,
    send_json,
    with_transport,
)
from permsc_integrations.testing._responders import (
    ChatRequest,
    Fault,
    Reply,
    RequestRecord,
    Responder,
)

if TYPE_CHECKING:  # optional dependencies (the testing extra), imported where used
    from typing import Unpack  # Python 3.11

    import uvicorn
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

    from permsc_integrations._options.keywords import RankingKeywords

__all__ = ["ScriptedOpenAIServer"]

_PURPOSE = "ScriptedOpenAIServer"


class ChatBody(TypedDict, total=False):
    """A chat-completions request body, as far as the server reads it (unchecked JSON: a
    wrong shape is answered 400)."""

    model: str
    messages: list[Mapping[str, object]]
    temperature: float | None
    max_tokens: int | None
    logprobs: bool
    top_logprobs: int


def _as_reply(value: object) -> Reply | Fault:
    if isinstance(value, (Reply, Fault)):
        return value
    if isinstance(value, str):
        return Reply(value)
    raise TypeError(f"a responder must return str, Reply or Fault, not {type(value).__name__}")


def _tokens(text: str) -> int:
    return len(text.split())


class _ChatEndpoint:
    """The raw ASGI app behind ``POST /v1/chat/completions`` (raw, to be able to drop)."""

    def __init__(self, server: ScriptedOpenAIServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before its request was whole: nobody to answer
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            payload = json.loads(body or b"{}")
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            request = self.server.admit(payload, scope.get("path", ""), headers)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            await send_json(send, 400, error_body(f"bad request: {exc}", None))
            return
        start = time.perf_counter()
        finished: list[str] = []

        def done(outcome: str) -> None:  # recorded once, just before the answer goes out
            if not finished:
                finished.append(outcome)
                self.server.finish(request, start, outcome)

        try:
            await self._answer(request, scope, send, done)
        except asyncio.CancelledError:  # the server is stopping: abandon quietly
            done("abandoned")
        except OSError:  # the client cancelled and hung up (uvicorn's ClientDisconnected)
            done("client gone")

    async def _answer(
        self, request: ChatRequest, scope: Scope, send: Send, done: Callable[[str], None]
    ) -> None:
        try:
            reply = self.server.responder(request)
            reply = _as_reply(await reply if inspect.isawaitable(reply) else reply)
        except Exception as exc:  # the responder failed: tell the client, don't hang it
            done("responder error")
            await send_json(send, 500, error_body(f"responder raised {exc!r}", None))
            return
        await asyncio.sleep(reply.delay)
        if isinstance(reply, Reply):
            done("ok")
            await send_json(send, 200, self._completion(request, reply))
        elif reply.kind == "drop":
            done("drop")
            transport = scope.get("extensions", {}).get("permsc.transport")
            await drop(send, None if reply.status_code else transport)
        else:
            done(f"status {reply.status_code}")
            body = error_body(reply.message, reply.code)
            await send_json(send, reply.status_code, body, reply.headers)

    def _completion(self, request: ChatRequest, reply: Reply) -> dict[str, object]:
        prompt, completion = reply.tokens or (_tokens(request.text), _tokens(reply.text))
        if reply.top_tokens is not None:  # a one-token answer, whitespace or not
            completion = 1
        message = {"role": "assistant", "content": reply.text}
        logprobs = None
        if request.body.get("logprobs") and reply.top_tokens is not None and self.server.logprobs:
            logprobs = logprobs_of(reply, request.body.get("top_logprobs"))
        answer = self._standard(request, reply, message, logprobs, (prompt, completion))
        return {**answer, **reply.fields}

    def _standard(
        self,
        request: ChatRequest,
        reply: Reply,
        message: Mapping[str, str],
        logprobs: Mapping[str, object] | None,
        tokens: tuple[int, int],
    ) -> dict[str, object]:
        prompt, completion = tokens
        return {
            "id": f"chatcmpl-scripted-{request.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or self.server.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason,
                    "logprobs": logprobs,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _config(lib: ModuleType, app: ASGIApp, http: str) -> uvicorn.Config:
    """uvicorn's settings for the server: quiet, no lifespan, a deep backlog."""
    return lib.Config(
        app,
        loop="asyncio",
        http=http,
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        backlog=4096,
        timeout_keep_alive=30,
    )


def _bound_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1. proto=IPPROTO_TCP: only then does
    asyncio set TCP_NODELAY on accepted connections (without it every answer waits ~40 ms for
    a delayed ACK)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 (a free port), answering through ``responder``.

    Use as a context manager, sync or async; ``base_url`` ends in ``/v1``. Recorded:
    ``requests``, ``records``, ``request_count``, ``in_flight`` and ``max_in_flight``.
    ``logprobs=False`` plays a server that never returns logprobs, even for a reply that has
    them (:meth:`Reply.first_token`).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        model: str = "scripted-model",
        http: str = "h11",
        logprobs: bool = True,
    ) -> None:
        self.responder: Responder = responder or (lambda request: "[1]")
        self.model, self.http = model, http  # http: uvicorn's parser, "h11" or "httptools"
        self.logprobs = logprobs  # False: never answers logprobs, as some servers
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.reset()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def ranker(self, model: str = "m", **options: Unpack[RankingKeywords]) -> PSCRanker:
        """A :class:`~permsc_integrations.PSCRanker` of ``openai:<model>`` at this server
        (``options``: its options; ``backend_options`` are added to the ``base_url``).

        >>> from permsc_integrations.testing import oracle_responder
        >>> with ScriptedOpenAIServer(oracle_responder(len)) as server:  # longest first
        ...     with server.ranker(num_permutations=2) as ranker:
        ...         result = ranker.rank("which is longest?", ["a", "ccc", "bb"])
        >>> result.order, server.request_count
        ((1, 2, 0), 2)
        """
        options["backend_options"] = {
            "base_url": self.base_url,
            **options.get("backend_options", {}),
        }
        return PSCRanker(f"openai:{model}", **options)

    def reset(self) -> None:
        """Forget recorded requests; the server keeps running, calls in flight still count."""
        with self._lock:
            self.requests: list[ChatRequest] = []
            self.records: list[RequestRecord] = []
            self.in_flight = getattr(self, "in_flight", 0)
            self.max_in_flight = self.in_flight

    def admit(
        self, payload: ChatBody, path: str = "", headers: Mapping[str, str] | None = None
    ) -> ChatRequest:
        """Record a request as it arrives (its endpoint calls this), counted in flight."""
        messages = tuple(dict(m) for m in payload["messages"])
        with self._lock:
            request = ChatRequest(
                len(self.requests),
                str(payload.get("model", "")),
                messages,
                payload.get("temperature"),
                payload.get("max_tokens"),
                dict(payload),
                path,
                dict(headers or {}),
            )
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return request

    def finish(self, request: ChatRequest, start: float, outcome: str) -> None:
        """Record a request's ``outcome`` as it leaves (its endpoint calls this)."""
        with self._lock:
            self.in_flight -= 1
            self.records.append(RequestRecord(request, start, time.perf_counter(), outcome))

    def _app(self) -> ASGIApp:
        try:
            # lazy: optional dependency (the testing extra)
            from starlette.applications import Starlette
            from starlette.responses import JSONResponse
            from starlette.routing import Route
        except ImportError as exc:
            raise MissingDependencyError("starlette", "testing", purpose=_PURPOSE) from exc

        async def models(request: Request) -> Response:
            entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}
            return JSONResponse({"object": "list", "data": [entry]})

        return with_transport(
            Starlette(
                routes=[  # any prefix, so that endpoints may differ only by path
                    Route("/{prefix:path}/chat/completions", _ChatEndpoint(self), methods=["POST"]),
                    Route("/{prefix:path}/models", models, methods=["GET"]),
                ]
            )
        )

    def start(self) -> ScriptedOpenAIServer:
        """Start serving in a background thread; returns once the port accepts connections."""
        try:
            # lazy: optional dependency (the testing extra)
            import uvicorn
        except ImportError as exc:
            raise MissingDependencyError("uvicorn", "testing", purpose=_PURPOSE) from exc
        sock = _bound_socket()
        self.port = sock.getsockname()[1]
        config = _config(uvicorn, self._app(), self.http)
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])),
            name=f"scripted-openai-{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise PermscError(
                    "ScriptedOpenAIServer did not start within 10 s; "
                    "see the log of the 'uvicorn.error' logger"
                )
            time.sleep(0.001)
        return self

    def stop(self) -> None:
        """Stop at once: in-flight answers are abandoned, connections closed."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = self._server.force_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedOpenAIServer:

        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc: object) -> None:

        await anyio.to_thread.run_sync(self.stop)
