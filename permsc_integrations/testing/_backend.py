"""An in-process backend answering through the scripted server's responders (no HTTP).

As httpx's ``MockTransport`` does for a transport, :class:`ScriptedBackend` plays a model in
the caller's event loop: each call becomes a :class:`ChatRequest`, the responder's answer
becomes a :class:`Completion` or the typed error a real backend raises for that fault. A
responder may be async and await anything of the test's (an ``anyio.Event``, a condition),
which a server thread cannot share. Use :class:`~._server.ScriptedOpenAIServer` where the
wire matters (the ``openai`` client, headers, dropped connections, adapters).

Example:
    >>> import anyio
    >>> from permsc_integrations.backends.base import GenerationSettings
    >>> from permsc_integrations.testing import oracle_responder
    >>> backend = ScriptedBackend(oracle_responder(len))
    >>> messages = [{"role": "user", "content": "[1] a\\n[2] abc"}]
    >>> anyio.run(backend.acomplete, messages, GenerationSettings()).text
    '[2] > [1]'
    >>> backend.request_count, backend.records[0].outcome
    (1, 'ok')
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from permsc_integrations.backends import status_error
from permsc_integrations.backends.base import Completion, GenerationSettings, Message
from permsc_integrations.errors import BackendConnectionError, BackendError, ConfigurationError
from permsc_integrations.results import Usage
from permsc_integrations.testing._responders import (
    ChatRequest,
    Fault,
    Reply,
    RequestRecord,
    Responder,
)

__all__ = ["ScriptedBackend"]


@dataclass(frozen=True, slots=True)
class _Headers:
    """What :func:`status_error` reads ``Retry-After`` from: an object with ``headers``."""

    headers: dict[str, str]


class ScriptedBackend:
    """A :class:`~permsc_integrations.backends.base.Backend` whose answers ``responder`` gives.

    Recorded, as on the server: ``requests`` (in arrival order), ``records`` (in finishing
    order, with the outcome: ``"ok"``, ``"status 429"``, ``"drop"``, ``"raised"``,
    ``"cancelled"``), ``request_count``, ``in_flight``, ``max_in_flight``; ``closed`` once
    :meth:`aclose` ran. A responder that raises fails the call with its own exception (a
    backend bug, or a typed :class:`BackendError` it chose). ``Reply.fields`` play a
    misbehaving provider on the wire only, so they are refused here.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        name: str = "scripted",
        model: str = "scripted-model",
    ) -> None:
        self.responder: Responder = responder or (lambda request: "[1]")
        self.name, self.model = name, model
        self.requests: list[ChatRequest] = []
        self.records: list[RequestRecord] = []
        self.in_flight = self.max_in_flight = 0
        self.closed = False

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def _admit(self, messages: Sequence[Message], settings: GenerationSettings) -> ChatRequest:
        body = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": settings.temperature,
            "max_tokens": settings.max_tokens,
        }
        request = ChatRequest(
            len(self.requests),
            self.model,
            tuple(dict(m) for m in messages),
            settings.temperature,
            settings.max_tokens,
            body,
        )
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return request

    async def acomplete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        request = self._admit(messages, settings)
        start, outcome = time.perf_counter(), "raised"
        try:
            reply = self.responder(request)
            reply = await reply if inspect.isawaitable(reply) else reply
            if isinstance(reply, str):
                reply = Reply(reply)
            await anyio.sleep(getattr(reply, "delay", 0.0))
            outcome = _outcome(reply)
            return _completion(request, reply)
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        finally:
            self.in_flight -= 1
            self.records.append(RequestRecord(request, start, time.perf_counter(), outcome))

    async def aclose(self) -> None:
        self.closed = True


def _outcome(reply: object) -> str:
    if isinstance(reply, Fault):
        return "drop" if reply.kind == "drop" else f"status {reply.status_code}"
    return "ok"


def _completion(request: ChatRequest, reply: object) -> Completion:
    """The completion for a :class:`Reply`; the typed error a real backend raises for a
    :class:`Fault` (the same mapping as for an HTTP status)."""
    if isinstance(reply, Fault):
        if reply.kind == "drop":
            raise BackendConnectionError(
                "the scripted backend dropped the connection (Fault.drop); retried as a real "
                "dropped connection is"
            )
        detail = f"scripted backend answered {reply.status_code}: {reply.message}"
        raise status_error(
            reply.status_code, detail, code=reply.code, response=_Headers(dict(reply.headers))
        )
    if not isinstance(reply, Reply):
        raise BackendError(
            f"a responder must return str, Reply or Fault, not {type(reply).__name__}",
            retryable=False,
        )
    if reply.fields:
        raise ConfigurationError(
            "Reply.fields change the JSON on the wire: use ScriptedOpenAIServer for them"
        )
    prompt, completion = reply.tokens or (len(request.text.split()), len(reply.text.split()))
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion)
    return Completion(reply.text, usage, request.model, reply.finish_reason)
