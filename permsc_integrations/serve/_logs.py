"""The server's log: one line per refused or failed request, never a key, a query or a
document, and bounded when clients misbehave (docs/serve.md, docs/security.md).

- Every line is redacted as it is written, whoever wrote it (tracebacks included): URL
  credentials (``user:password@``), secret query values (``?api-key=``) and every key the
  server knows are masked (:func:`~permsc_integrations.backends._redaction.redact_text`).
- The HTTP and SDK libraries (:data:`LIBRARIES`: httpx, httpx2, httpcore, openai, urllib3,
  aiohttp, ...) log each upstream call at INFO, and at DEBUG its URL, headers and body (the
  query and the documents): they are held at WARNING whatever the server's level.
- A line from outside this package that repeats (same logger, same message) is written at
  most ``burst`` times in ``window`` seconds; the next one written says how many were dropped.

Example:
    >>> import io, logging
    >>> stream = io.StringIO()
    >>> handler = configure_logging("INFO", ["sk-secret-1"], stream, fmt="%(message)s")
    >>> logging.getLogger("httpx2").info("HTTP Request: POST http://u:p@host/v1")
    >>> logging.getLogger("permsc_integrations.serve").warning("upstream said sk-secret-1")
    >>> stream.getvalue()
    'upstream said ***\\n'
    >>> logging.getLogger().removeHandler(handler)
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable
from typing import IO

from permsc_integrations.backends import redact_text

__all__ = ["configure_logging", "LIBRARIES", "RedactingFormatter", "Repeats"]

LIBRARIES = (
    "httpx",
    "httpx2",  # openai 3.x's HTTP client
    "httpcore",
    "httpcore2",
    "openai",
    "urllib3",
    "aiohttp",
    "httpx_aiohttp",
    "h11",
    "h2",
    "hpack",
    "uvicorn.access",  # off anyway: it would log each path and query string
)
FORMAT = "%(asctime)s %(name)s %(message)s"


class RedactingFormatter(logging.Formatter):
    """A formatter whose every line (message and traceback) is redacted."""

    def __init__(self, fmt: str, secrets: Iterable[str | None]) -> None:
        super().__init__(fmt)
        self.secrets = tuple(s for s in secrets if s)

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record), self.secrets)


class Repeats(logging.Filter):
    """Drops a line from outside ``own`` past ``burst`` of its kind in ``window`` seconds."""

    def __init__(self, burst: int = 5, window: float = 10.0, own: str = "permsc_integrations"):
        super().__init__()
        self.burst, self.window, self.own = burst, window, own
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(self.own):
            return True
        key, now = (record.name, str(record.msg)), time.monotonic()
        began, count = self._seen.get(key, (now, 0))
        if now - began >= self.window:
            if count > self.burst:
                record.msg = (
                    f"{record.getMessage()} [{count - self.burst} more like it were dropped "
                    f"in {self.window:g} s]"
                )
                record.args = None
            began, count = now, 0
        self._seen[key] = (began, count + 1)
        return count < self.burst


def configure_logging(
    level: str,
    secrets: Iterable[str | None],
    stream: IO[str] | None = None,
    *,
    fmt: str = FORMAT,
) -> logging.Handler:
    """Log at ``level`` to ``stream`` (stderr) through a redacting, repeat-bounded handler on
    the root logger (returned); the :data:`LIBRARIES` stay at WARNING."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(RedactingFormatter(fmt, secrets))
    handler.addFilter(Repeats())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    return handler
