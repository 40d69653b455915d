"""The raw ASGI pieces of :class:`~permsc_integrations.testing.ScriptedOpenAIServer`: JSON
answers and OpenAI's error body, the ``logprobs`` of a one-token reply, a dropped connection,
and uvicorn's transport put where a fault can drop it.

Example:
    >>> error_body("slow down", "rate_limit_exceeded")["error"]["code"]
    'rate_limit_exceeded'
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from permsc_integrations.testing._responders import Reply

if TYPE_CHECKING:  # optional dependency (the testing extra), imported where used
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["logprobs_of", "error_body", "send_json", "drop", "with_transport"]


def logprobs_of(reply: Reply, top_logprobs: object) -> dict[str, object]:
    """OpenAI's ``choices[0].logprobs`` for a one-token reply: its token, with the
    ``top_logprobs`` most likely candidates (none when the request did not say how many)."""

    def entry(token: str, probability: float) -> dict[str, object]:
        logprob = math.log(probability) if probability > 0 else -9999.0  # OpenAI's "unlikely"
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    top = reply.top_tokens or ()
    chosen = entry(reply.text, next((p for t, p in top if t == reply.text), 0.0))
    count = top_logprobs if isinstance(top_logprobs, int) else 0
    chosen["top_logprobs"] = [entry(t, p) for t, p in top[:count]]
    return {"content": [chosen], "refusal": None}


def error_body(message: str, code: str | None) -> dict[str, object]:
    return {"error": {"message": message, "type": "scripted_error", "param": None, "code": code}}


async def send_json(
    send: Send, status: int, body: object, headers: Sequence[tuple[str, str]] = ()
) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


async def drop(send: Send, transport: asyncio.BaseTransport | None) -> None:
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


def with_transport(app: ASGIApp) -> ASGIApp:
    """Put uvicorn's transport into ``scope["extensions"]`` so a fault can drop it."""

    async def outer(scope: Scope, receive: Receive, send: Send) -> None:
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        scope.setdefault("extensions", {})["permsc.transport"] = transport
        await app(scope, receive, send)

    return outer
