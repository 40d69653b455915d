"""Client keys: ``PERMSC_API_KEYS`` (comma-separated) or a key file, sent as a bearer token.

Keys are compared in constant time and never kept in a form that could leak: a request is
known by a short digest of its key (for the per-key cap), never by the key.

Example:
    >>> ring = KeyRing(("k-alpha",))
    >>> ring.identify("Bearer k-alpha") == ring.identify("bearer k-alpha")
    True
    >>> ring.identify("Bearer nope")
    Traceback (most recent call last):
    ...
    permsc_integrations.serve._auth.Unauthorized: invalid API key
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from pathlib import Path

from permsc_integrations.errors import ConfigurationError, PermscError

__all__ = ["KeyRing", "Unauthorized", "load_keys", "ENV_KEYS"]

ENV_KEYS = "PERMSC_API_KEYS"
_MIN_LENGTH = 8


class Unauthorized(PermscError):
    """A missing, malformed or wrong client key (HTTP 401)."""


def load_keys(env_value: str | None, key_file: str | Path | None = None) -> tuple[str, ...]:
    """The client keys of ``PERMSC_API_KEYS`` and of a file (one a line, ``#`` comments)."""
    keys = [k.strip() for k in (env_value or "").split(",") if k.strip()]
    if key_file is not None:
        path = Path(key_file)
        if not path.is_file():
            raise ConfigurationError(f"key file not found: {key_file}")
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                keys.append(line)
    short = [n for n, k in enumerate(keys, 1) if len(k) < _MIN_LENGTH or " " in k]
    if short:  # name the positions, never the keys
        raise ConfigurationError(
            f"client keys must be at least {_MIN_LENGTH} characters without spaces "
            f"(keys number {', '.join(map(str, short))} are not)"
        )
    return tuple(dict.fromkeys(keys))


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class KeyRing:
    """The accepted keys; with none, every caller is let in (as ``"anonymous"``)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._digests = tuple(_digest(k) for k in keys)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def identify(self, authorization: str | None) -> str:
        """The caller's id (a digest prefix) for ``Authorization: Bearer KEY``; raises
        :class:`Unauthorized` for a missing, malformed or unknown key."""
        if not self._digests:
            return "anonymous"
        if not authorization:
            raise Unauthorized("missing API key: send 'Authorization: Bearer KEY'")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("malformed Authorization header: expected 'Bearer KEY'")
        digest = _digest(token.strip())
        found = False
        for known in self._digests:  # every digest compared: no early exit to time
            found |= hmac.compare_digest(digest, known)
        if not found:
            raise Unauthorized("invalid API key")
        return digest[:6].hex()
