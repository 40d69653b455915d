"""Secrets out of every text the library produces: URLs and known keys, redacted.

A URL loses its credentials (``user:password@``) and the values of query parameters that carry
secrets (``api-key``, ``key``, ``token``, ``sig``, ...); a known secret (the API key) is masked
wherever it appears, such as a server's error message that echoes it. Reprs, error messages,
events, logs and cache keys go through these functions.

Example:
    >>> redact_url("https://bob:hunter2@proxy.example/v1?api-key=abc&region=eu")
    'https://***@proxy.example/v1?api-key=***&region=eu'
    >>> redact_text("Incorrect API key provided: sk-123456789", ["sk-123456789"])
    'Incorrect API key provided: ***'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from permsc_integrations._registry import publish
from permsc_integrations.errors import ConfigurationError

__all__ = [
    "redact_url",
    "redact_text",
    "is_secret_name",
    "is_masked",
    "refuse_masked",
    "split_credentials",
    "public_settings",
    "MASK",
]

MASK = "***"
_SECRET_NAME = re.compile(
    r"(^|[-_])(api[-_]?key|key|token|access[-_]?token|secret|password|passwd|pwd|sig|"
    r"signature|auth|authorization|credential|credentials|session)($|[-_])",
    re.IGNORECASE,
)
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def is_secret_name(name: str) -> bool:
    """True for option, header or parameter names that hold secrets (``api_key``, ...).

    >>> is_secret_name("api_key"), is_secret_name("X-Api-Key"), is_secret_name("monkey")
    (True, True, False)
    """
    return bool(_SECRET_NAME.search(name)) or name.lower().endswith("apikey")


def redact_url(url: str | None) -> str:
    """``url`` without credentials or secret query values (``""`` for None)."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if is_secret_name(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def split_credentials(url: str | None) -> tuple[str | None, tuple[str, str] | None]:
    """``url`` without its ``user:password@``, and those (decoded), or None: what an HTTP
    client may be given as its basic auth instead, so that no URL it logs holds them.

    >>> split_credentials("http://bob:p%40ss@host:8000/v1")
    ('http://host:8000/v1', ('bob', 'p@ss'))
    """
    if url is None or "@" not in urlsplit(url).netloc:
        return url, None
    parts = urlsplit(url)
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    return urlunsplit(bare), (user, password)


def is_masked(value: object) -> bool:
    """True for what redaction put in place of a secret: ``"***"``, or a URL whose
    credentials or secret query values are ``"***"`` (never a usable credential).

    >>> is_masked("***"), is_masked(redact_url("http://u:p@h/v1")), is_masked("http://h/v1")
    (True, True, False)
    """
    if not isinstance(value, str):
        return False
    if value == MASK:
        return True
    if "://" not in value:
        return False
    try:
        parts = urlsplit(value)
        username, password = parts.username, parts.password
    except ValueError:
        return False
    if MASK in (username, password):
        return True
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    return any(is_secret_name(k) and v == MASK for k, v in pairs)


def refuse_masked(name: str, value: object) -> None:
    """Raise :class:`ConfigurationError` if ``value`` (option ``name``) is a masked secret."""
    if is_masked(value):
        shown = redact_url(str(value)) if "://" in str(value) else MASK
        raise ConfigurationError(
            f"{name} holds the masked placeholder {shown!r}, not a credential: a configuration "
            "serialised by to_dict()/dumps() never keeps its secrets. Pass the real value again "
            "(from_dict(data, backend_options={...})), or set it in the environment "
            "(OPENAI_API_KEY, OPENAI_BASE_URL)"
        )


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every URL redacted and every known secret (of 4+ characters) masked."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    return text


_PLAIN = (str, int, float, bool, type(None))
_NOT_SEMANTIC = frozenset(
    {
        "verbose",
        "callbacks",
        "callback_manager",
        "tags",
        "metadata",
        "cache",
        "rate_limiter",
        "custom_get_token_ids",
        "max_retries",
        "timeout",
        "request_timeout",
        "http_client",
        "http_async_client",
        "client",
        "async_client",
        "root_client",
        "root_async_client",
    }
)


def public_settings(obj: object) -> dict[str, object]:
    """The plain, non-secret settings of a (pydantic) model object: what a fingerprint of a
    framework's chat model may contain. Secret-named fields, ``SecretStr`` and other objects
    (clients, callbacks) are left out; URLs are redacted.

    >>> class Chat:
    ...     model_name, temperature, api_key = "m", 0.2, "sk-secret"
    ...     base_url = "https://u:p@host/v1"
    >>> public_settings(Chat())
    {'base_url': 'https://***@host/v1', 'model_name': 'm', 'temperature': 0.2}
    """
    fields = getattr(type(obj), "model_fields", None)
    names = list(fields) if fields else [n for n in dir(obj) if not n.startswith("_")]
    out: dict[str, object] = {}
    for name in sorted(names):
        if is_secret_name(name) or name in _NOT_SEMANTIC:
            continue
        value = _plain(getattr(obj, name, None))
        if value is not _SKIP:
            out[name] = value
    return out


_SKIP = object()


def _plain(value: object) -> object:
    if isinstance(value, str):
        return redact_url(value) if _URL.fullmatch(value) else value
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return _SKIP if any(v is _SKIP for v in items) else items
    if isinstance(value, dict):
        kept = {str(k): _plain(v) for k, v in value.items() if not is_secret_name(str(k))}
        return {k: v for k, v in kept.items() if v is not _SKIP}
    return _SKIP


# the adapters' declared API (permsc_integrations.integration) names these; they live here
publish("permsc_integrations.backends", public_settings, is_secret_name)
