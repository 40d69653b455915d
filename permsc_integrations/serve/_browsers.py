"""What a web page can make a server without client keys do: nothing it could not do itself.

A browser lets any page send a *simple* cross-origin request without asking the server first:
a POST of ``text/plain``, of a form, or of a body with no ``Content-Type``. And a page on a
domain that its owner points at 127.0.0.1 (DNS rebinding) sends whatever it likes, with its
own name in the ``Host`` header. On a server without client keys either would spend the
upstream credit for a stranger's page. So, without keys (docs/security.md, docs/serve.md):

- a POST whose body is not ``application/json`` is refused (415): a page can send JSON to
  another origin only after a CORS preflight, which is answered with no grant unless the
  operator lists the page's origin (``cors_origins``);
- on a loopback address, a ``Host`` that is not ``localhost``, a loopback address or the bound
  host is refused (421 Misdirected Request), unless the operator names it (``allowed_hosts``;
  ``"*"``: any); so is an ``Origin`` (a page's) on none of those names and not granted CORS
  (``cors_origins``): 403.

With client keys neither check applies: a page cannot send a key it does not have.

Example:
    >>> from permsc_integrations.serve import ModelConfig, ServeConfig
    >>> guard = BrowserGuard.of(ServeConfig(models=(ModelConfig("psc", "openai:m"),)))
    >>> guard.refuse("POST", "localhost:8080", "application/json") is None
    True
    >>> guard.refuse("POST", "attacker.example:8080", "application/json").status
    421
    >>> guard.refuse("POST", "127.0.0.1:8080", "text/plain").status
    415
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from permsc_integrations.serve._config import ServeConfig, is_loopback
from permsc_integrations.serve._errors import HttpError

__all__ = ["BrowserGuard", "browser_middleware"]


def _hostname(host: str) -> str:
    """``Host``'s name without its port: ``[::1]:8080`` -> ``::1``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _is_loopback_name(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class BrowserGuard:
    """The checks of a server without client keys (none with keys)."""

    keyless: bool
    hosts: frozenset[str] | None  # the Host names answered; None: any
    origins: frozenset[str] = frozenset()  # the origins granted CORS, also let in

    @classmethod
    def of(cls, config: ServeConfig) -> BrowserGuard:
        keyless = not config.keys
        if not keyless or not is_loopback(config.host) or "*" in config.allowed_hosts:
            return cls(keyless, None)
        named = {_hostname(h) for h in config.allowed_hosts}
        granted = frozenset(o.rstrip("/").lower() for o in config.cors_origins)
        return cls(keyless, frozenset({config.host.strip("[]").lower(), *named}), granted)

    def _foreign(self, name: str) -> bool:
        return self.hosts is not None and not _is_loopback_name(name) and name not in self.hosts

    def refuse(
        self, method: str, host: str | None, content_type: str | None, origin: str | None = None
    ) -> HttpError | None:
        """The refusal of a request with these headers, or None to let it in."""
        if not self.keyless:
            return None
        if host and self._foreign(_hostname(host)):
            return HttpError(
                421,
                f"Host {host[:100]!r} is not this server's: without client keys, a server on "
                "loopback answers localhost and loopback addresses only (a web page could "
                "reach it through DNS rebinding); --allowed-host names others",
            )
        media = (content_type or "").partition(";")[0].strip().lower()
        if method == "POST" and media != "application/json":
            return HttpError(
                415,
                "Content-Type must be application/json: without client keys the server refuses "
                "other bodies (any web page can send those to it)",
            )
        if origin and origin.rstrip("/").lower() not in self.origins:
            if self._foreign(_hostname(origin.partition("://")[2] or origin)):
                return HttpError(
                    403,
                    f"Origin {origin[:100]!r} is not this server's: without client keys, a "
                    "server on loopback answers pages of localhost and loopback addresses only; "
                    "--allowed-host names others, --cors-origin grants a page",
                )
        return None


class _Refuse:
    """ASGI middleware: the guard's refusals, answered through ``fail`` (logged, counted)."""

    def __init__(
        self, app: ASGIApp, guard: BrowserGuard, fail: Callable[[str, str, HttpError], ASGIApp]
    ) -> None:
        self.app, self.guard, self.fail = app, guard, fail

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            error = self.guard.refuse(
                scope["method"],
                headers.get("host"),
                headers.get("content-type"),
                headers.get("origin"),
            )
            if error is not None:
                await self.fail(scope["path"], "", error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def browser_middleware(
    config: ServeConfig, fail: Callable[[str, str, HttpError], ASGIApp]
) -> list[Middleware]:
    """The app's middleware: CORS grants for ``cors_origins`` only (outermost, so that a
    granted preflight is answered), then the guard's refusals."""
    guard = Middleware(_Refuse, guard=BrowserGuard.of(config), fail=fail)
    if not config.cors_origins:
        return [guard]
    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(config.cors_origins),
        allow_methods=["GET", "POST"],
        allow_headers=["authorization", "content-type"],
    )
    return [cors, guard]
