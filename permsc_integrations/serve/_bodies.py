"""A request body read within its limits: refused with 413 as soon as it passes
``max_body_bytes`` (never read whole), and with 408 if it has not all come within
``body_timeout`` seconds of its head (``permsc serve`` and ``permsc mcp --transport http``).

Example:
    >>> from permsc_integrations.serve._config import Limits
    >>> Limits().body_timeout
    30.0
"""

from __future__ import annotations

import anyio
from starlette.requests import Request

from permsc_integrations.serve._config import Limits
from permsc_integrations.serve._schemas import BadRequest

__all__ = ["read_body"]


async def read_body(request: Request, limits: Limits) -> bytes:
    """``request``'s whole body; :class:`BadRequest` (413, 408) past a limit, and starlette's
    ``ClientDisconnect`` when the client leaves first."""
    limit, seconds = limits.max_body_bytes, limits.body_timeout
    too_large = BadRequest(f"request body too large: over the limit of {limit} bytes", 413)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    with anyio.move_on_after(seconds):
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise too_large
        return bytes(body)
    raise BadRequest(f"request body not received within {seconds:g} s", 408)
