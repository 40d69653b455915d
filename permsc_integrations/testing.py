"""A real OpenAI-compatible HTTP server on 127.0.0.1, scripted per request, for tests.

:class:`ScriptedOpenAIServer` runs a starlette app under uvicorn in a background thread and
serves ``POST /v1/chat/completions`` (non-streaming, OpenAI's schema, with usage) and
``GET /v1/models``. A *responder* decides every answer: it receives the parsed
:class:`ChatRequest` and returns text, a :class:`Reply` (text after a delay) or a
:class:`Fault` (an HTTP error, a dropped connection). Every request is recorded, with
timestamps and the peak number in flight, so tests can assert concurrency and retries.
Needs the ``test`` extra (uvicorn, starlette).

Example:
    >>> from openai import OpenAI
    >>> with ScriptedOpenAIServer(lambda request: "[2] > [1]") as server:
    ...     client = OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    ...     answer = client.chat.completions.create(
    ...         model="m", messages=[{"role": "user", "content": "rank"}])
    ...     client.close()
    >>> answer.choices[0].message.content, server.request_count
    ('[2] > [1]', 1)
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import MissingDependencyError, PermscError

__all__ = [
    "ChatRequest",
    "Reply",
    "Fault",
    "RequestRecord",
    "Responder",
    "ScriptedOpenAIServer",
    "shown_passages",
    "sequence",
    "oracle_responder",
    "noisy_responder",
]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One parsed chat-completions request; ``index`` counts requests from 0 in arrival order."""

    index: int
    model: str
    messages: tuple[Mapping[str, Any], ...]
    temperature: float | None = None
    max_tokens: int | None = None
    body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """All message contents joined by newlines."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful answer, sent after ``delay`` seconds (a delay past the client's timeout
    makes a slow answer)."""

    text: str
    delay: float = 0.0
    finish_reason: str = "stop"


@dataclass(frozen=True, slots=True)
class Fault:
    """A scripted failure: an HTTP error status or a dropped connection.

    >>> Fault.status(429, retry_after=1.0).headers
    (('retry-after', '1.0'),)
    """

    kind: str  # "status" | "drop"
    status_code: int = 0
    message: str = ""
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0

    @classmethod
    def status(
        cls,
        status_code: int,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        message: str | None = None,
        code: str | None = None,
        delay: float = 0.0,
    ) -> Fault:
        """An HTTP error with OpenAI's error body; optional ``Retry-After`` headers."""
        headers: list[tuple[str, str]] = []
        if retry_after is not None:
            headers.append(("retry-after", str(retry_after)))
        if retry_after_ms is not None:
            headers.append(("retry-after-ms", str(retry_after_ms)))
        text = message or f"scripted error {status_code}"
        return cls("status", status_code, text, code, tuple(headers), delay)

    @classmethod
    def context_length(cls) -> Fault:
        """The 400 an OpenAI server gives for a prompt longer than the context window."""
        return cls.status(
            400,
            code="context_length_exceeded",
            message="This model's maximum context length is 128 tokens. "
            "However, your messages resulted in 4096 tokens.",
        )

    @classmethod
    def drop(cls, *, delay: float = 0.0, after_headers: bool = False) -> Fault:
        """Close the connection without an answer (``after_headers``: mid-response)."""
        return cls("drop", 200 if after_headers else 0, delay=delay)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """When a request arrived and finished (``time.perf_counter`` seconds) and its outcome."""

    request: ChatRequest
    start: float
    end: float
    outcome: str  # "ok", "status 429", "drop", ...


ReplyLike = str | Reply | Fault
Responder = Callable[[ChatRequest], ReplyLike | Awaitable[ReplyLike]]

_PURPOSE = "ScriptedOpenAIServer"
_MARKER = re.compile(r"^\[(\d+)\][ \t]*(?!>)(.*)$", re.M)


def shown_passages(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """Passage texts in prompt order from RankGPT-style ``[i] text`` lines of user messages.

    >>> shown_passages([{"role": "user", "content": "[1] a\\n[2] b"},
    ...                 {"role": "user", "content": "answer like [1] > [2]"}])
    ['a', 'b']
    """
    found: dict[int, str] = {}
    for message in messages:
        if message.get("role") != "user":
            continue
        for match in _MARKER.finditer(str(message.get("content") or "")):
            found.setdefault(int(match.group(1)), match.group(2).strip())
    return [found[i] for i in sorted(found)]


def sequence(*replies: ReplyLike, then: ReplyLike | Responder | None = None) -> Responder:
    """A responder giving ``replies`` in arrival order, then ``then`` (a reply or responder).

    >>> r = sequence(Fault.status(500), then="[1] > [2]")
    >>> [r(ChatRequest(i, "m", ())) for i in range(2)][1]
    '[1] > [2]'
    """
    lock, queue = threading.Lock(), list(replies)

    def respond(request: ChatRequest) -> ReplyLike | Awaitable[ReplyLike]:
        with lock:
            if queue:
                return queue.pop(0)
        if then is None:
            raise LookupError(f"script exhausted at request {request.index}")
        return then(request) if callable(then) else then

    return respond


def _rng(seed: int, request: ChatRequest) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{request.text}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _format(order: Sequence[int]) -> str:
    return " > ".join(f"[{p + 1}]" for p in order)


def oracle_responder(relevance: Callable[[str], float], *, delay: float = 0.0) -> Responder:
    """Answer ranking prompts perfectly: shown passages sorted by ``relevance(text)``, high first.

    >>> r = oracle_responder(len)
    >>> r(ChatRequest(0, "m", ({"role": "user", "content": "[1] a\\n[2] abc"},))).text
    '[2] > [1]'
    """

    def respond(request: ChatRequest) -> Reply:
        shown = shown_passages(request.messages)
        order = sorted(range(len(shown)), key=lambda p: -relevance(shown[p]))
        return Reply(_format(order), delay=delay)

    return respond


def noisy_responder(
    relevance: Callable[[str], float],
    *,
    keep: float = 0.5,
    position_bias: float = 0.0,
    seed: int = 0,
    delay: float = 0.0,
) -> Responder:
    """The paper's noise model: the true order, a random concordant subset kept in place
    (each item with probability ``keep``), the rest shuffled into the free slots.

    ``position_bias`` > 0 adds "lost in the middle": shuffled items shown first or last
    tend to take the better free slots. Seeded by ``seed`` and the prompt text, so an
    answer does not depend on arrival order.

    >>> r = noisy_responder(len, keep=1.0)
    >>> r(ChatRequest(0, "m", ({"role": "user", "content": "[1] a\\n[2] abc"},))).text
    '[2] > [1]'
    """

    def respond(request: ChatRequest) -> Reply:
        shown = shown_passages(request.messages)
        rng, n = _rng(seed, request), len(shown)
        truth = sorted(range(n), key=lambda p: -relevance(shown[p]))
        kept = [rng.random() < keep for _ in truth]
        loose = [p for p, k in zip(truth, kept, strict=True) if not k]
        centre = (n - 1) / 2 or 1.0
        loose.sort(key=lambda p: rng.random() - position_bias * abs(p - centre) / centre)
        it = iter(loose)
        order = [p if k else next(it) for p, k in zip(truth, kept, strict=True)]
        return Reply(_format(order), delay=delay)

    return respond


def _as_reply(value: Any) -> Reply | Fault:
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

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            payload = json.loads(body or b"{}")
            request = self.server._admit(payload)
        except (ValueError, TypeError, AttributeError) as exc:
            await _send_json(send, 400, _error_body(f"bad request: {exc}", None))
            return
        start, finished = time.perf_counter(), []

        def done(outcome: str) -> None:  # recorded once, just before the answer goes out
            if not finished:
                finished.append(outcome)
                self.server._finish(request, start, outcome)

        try:
            await self._answer(request, scope, send, done)
        except asyncio.CancelledError:  # the server is stopping: abandon quietly
            done("abandoned")

    async def _answer(self, request: ChatRequest, scope: Any, send: Any, done: Any) -> None:
        try:
            reply = self.server.responder(request)
            reply = _as_reply(await reply if inspect.isawaitable(reply) else reply)
        except Exception as exc:  # the responder failed: tell the client, don't hang it
            done("responder error")
            await _send_json(send, 500, _error_body(f"responder raised {exc!r}", None))
            return
        await asyncio.sleep(reply.delay)
        if isinstance(reply, Reply):
            done("ok")
            await _send_json(send, 200, self._completion(request, reply))
        elif reply.kind == "drop":
            done("drop")
            transport = scope.get("extensions", {}).get("permsc.transport")
            await _drop(send, None if reply.status_code else transport)
        else:
            done(f"status {reply.status_code}")
            body = _error_body(reply.message, reply.code)
            await _send_json(send, reply.status_code, body, reply.headers)

    def _completion(self, request: ChatRequest, reply: Reply) -> dict[str, Any]:
        prompt, completion = _tokens(request.text), _tokens(reply.text)
        message = {"role": "assistant", "content": reply.text}
        return {
            "id": f"chatcmpl-scripted-{request.index}", "object": "chat.completion",
            "created": int(time.time()), "model": request.model or self.server.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason,
                         "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }


def _error_body(message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "scripted_error", "param": None, "code": code}}


async def _send_json(
    send: Any, status: int, body: Any, headers: Sequence[tuple[str, str]] = ()
) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


async def _drop(send: Any, transport: Any) -> None:
    """Close the connection with no answer (through uvicorn's transport), or, with no
    transport, half-way through an answer."""
    if transport is not None:
        transport.close()
        await asyncio.sleep(0.01)  # let uvicorn see the connection lost before we return
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-', "more_body": True})
    # returning now leaves the response incomplete: uvicorn closes the connection


def _with_transport(app: Any) -> Any:
    """Put uvicorn's transport into ``scope["extensions"]`` so a fault can drop it."""

    async def outer(scope: Any, receive: Any, send: Any) -> None:
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        scope.setdefault("extensions", {})["permsc.transport"] = transport
        await app(scope, receive, send)

    return outer


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 (a free port), answering through ``responder``.

    Use as a context manager, sync or async; ``base_url`` ends in ``/v1``. Recorded:
    ``requests``, ``records``, ``request_count``, ``in_flight`` and ``max_in_flight``.
    """

    def __init__(
        self, responder: Responder | None = None, *, model: str = "scripted-model",
        http: str = "h11",
    ) -> None:
        self.responder: Responder = responder or (lambda request: "[1]")
        self.model, self.http = model, http  # http: uvicorn's parser, "h11" or "httptools"
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.reset()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def reset(self) -> None:
        """Forget recorded requests; the server keeps running, calls in flight still count."""
        with self._lock:
            self.requests: list[ChatRequest] = []
            self.records: list[RequestRecord] = []
            self.in_flight = getattr(self, "in_flight", 0)
            self.max_in_flight = self.in_flight

    def _admit(self, payload: Mapping[str, Any]) -> ChatRequest:
        messages = tuple(dict(m) for m in payload["messages"])
        with self._lock:
            request = ChatRequest(
                len(self.requests), str(payload.get("model", "")), messages,
                payload.get("temperature"), payload.get("max_tokens"), dict(payload),
            )
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return request

    def _finish(self, request: ChatRequest, start: float, outcome: str) -> None:
        with self._lock:
            self.in_flight -= 1
            self.records.append(RequestRecord(request, start, time.perf_counter(), outcome))

    def _app(self) -> Any:
        try:
            from starlette.applications import Starlette
            from starlette.responses import JSONResponse
            from starlette.routing import Route
        except ImportError as exc:
            raise MissingDependencyError("starlette", "test", purpose=_PURPOSE) from exc

        async def models(request: Any) -> Any:
            entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}
            return JSONResponse({"object": "list", "data": [entry]})

        return _with_transport(Starlette(routes=[
            Route("/v1/chat/completions", _ChatEndpoint(self), methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]))

    def start(self) -> ScriptedOpenAIServer:
        """Start serving in a background thread; returns once the port accepts connections."""
        try:
            import uvicorn
        except ImportError as exc:
            raise MissingDependencyError("uvicorn", "test", purpose=_PURPOSE) from exc
        # proto=IPPROTO_TCP: only then does asyncio set TCP_NODELAY on accepted connections
        # (without it every answer waits ~40 ms for a delayed ACK)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(), loop="asyncio", http=self.http, lifespan="off", log_config=None,
            log_level="warning", access_log=False, proxy_headers=False, backlog=4096,
            timeout_keep_alive=30,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[sock])),
            name=f"scripted-openai-{self.port}", daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise PermscError("ScriptedOpenAIServer did not start within 10 s; "
                                  "see the log of the 'uvicorn.error' logger")
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
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc: object) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.stop)
