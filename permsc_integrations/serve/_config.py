"""What a ``permsc serve`` process serves: named rankers, client keys and request limits.

Several named configurations come from a TOML file, one table per name::

    [models.psc-fast]
    backend = "openai:gpt-4o-mini"      # any backend spec PSCRanker takes
    base_url = "http://localhost:8000/v1"  # optional: an OpenAI-compatible server
    api_key_env = "OPENAI_API_KEY"      # optional: the variable holding the upstream key
    relevance_score = "win_share"       # optional: or "top_probability" (docs/scores.md)
    num_permutations = 6                # any RankingOptions option
    aggregator = "borda"

Keys are never written in the file: ``api_key_env`` names the environment variable.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "models.toml"
    >>> _ = path.write_text('[models.fast]\\nbackend = "openai:m"\\nnum_permutations = 6\\n')
    >>> [(m.name, m.backend, dict(m.options)) for m in load_models(path)]
    [('fast', 'openai:m', {'num_permutations': 6})]
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from permsc_integrations._checks import at_least, did_you_mean, number, positive_int
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._ranker.ranker import PSCRanker
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.serve._scoring import SCALES
from permsc_integrations.strategies import served_k

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Limits", "ModelConfig", "ServeConfig", "load_models", "is_loopback"]

_MODEL_KEYS = ("backend", "base_url", "api_key_env", "device", "relevance_score")
_MAX_CONNECTIONS = 4096


@dataclass(frozen=True)
class Limits:
    """Request limits; a request over one is refused with a 4xx that names the limit. The
    last seven bound what a slow, idle or eager client can hold (docs/serve.md, "Under load
    and faults")."""

    max_documents: int = 1000  # Cohere's advice: no more than 1,000 documents a request
    max_body_bytes: int = 4 * 1024 * 1024  # read in chunks; a larger body is a 413 at once
    max_query_chars: int = 10_000
    key_concurrency: int = 32  # requests of one client key ranked at once (the rest queue)
    header_timeout: float = 10.0  # a request head must arrive within this (s), or: closed
    body_timeout: float = 30.0  # the whole body within this (s) of its head, or: a 408
    max_connections: int | None = None  # None: what the open-file limit allows, up to 4096
    key_queue: int | None = None  # requests of one key waiting for a turn (None: as many
    # as key_concurrency); past it a 429 at once
    queue_timeout: float = 60.0  # a request waits this long (s) for its key's turn, or: 503
    send_timeout: float = 30.0  # a client must read each part of an answer within this (s)

    def __post_init__(self) -> None:
        for name in ("max_documents", "max_body_bytes", "max_query_chars", "key_concurrency"):
            positive_int(name, getattr(self, name))
        for name in ("header_timeout", "body_timeout", "queue_timeout", "send_timeout"):
            number(positive=True)(name, getattr(self, name))
        at_least(1, optional=True)("max_connections", self.max_connections)
        at_least(0, optional=True)("key_queue", self.key_queue)

    @property
    def queue(self) -> int:
        """Requests of one key that may wait for a turn (``key_queue``, or
        ``key_concurrency``)."""
        return self.key_concurrency if self.key_queue is None else self.key_queue


@dataclass(frozen=True)
class ModelConfig:
    """One served name: a backend spec and the ranking options of its ``PSCRanker``;
    ``relevance_score``, the scale of its answers' scores (:data:`~._scoring.SCALES`:
    ``"win_share"``, or ``"top_probability"``, which needs a k: ``top_k`` or ``max_calls``)."""

    name: str
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)
    base_url: str | None = None
    api_key_env: str | None = None
    device: str | None = None
    relevance_score: str = "win_share"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(f"a model name must be a non-empty string, got {self.name!r}")
        options = RankingOptions.from_kwargs(**self.options)  # refuse a bad option at start-up
        if self.relevance_score not in SCALES:
            raise ConfigurationError(
                f"model {self.name!r}: relevance_score must be one of {', '.join(SCALES)}, got "
                f"{self.relevance_score!r}{did_you_mean(str(self.relevance_score), tuple(SCALES))}"
            )
        if self.relevance_score == "top_probability" and served_k(options) is None:
            raise ConfigurationError(
                f"model {self.name!r}: relevance_score = 'top_probability' is the chance of the "
                "top k: set top_k (or max_calls, where k is 10)"
            )

    def build(self) -> Any:
        """A :class:`~permsc_integrations.PSCRanker` for this configuration (it owns its
        backend: ``aclose()`` it when done)."""
        backend_options: dict[str, Any] = {}
        if self.base_url:
            backend_options["base_url"] = self.base_url
        if self.device:
            backend_options["device"] = self.device
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ConfigurationError(
                    f"model {self.name!r}: the environment variable {self.api_key_env} "
                    "(api_key_env) is not set"
                )
            backend_options["api_key"] = key
        return PSCRanker(self.backend, backend_options=backend_options, **self.options)


@dataclass(frozen=True)
class ServeConfig:
    """Everything one server process needs; ``keys`` empty means no client authentication."""

    models: tuple[ModelConfig, ...]
    keys: tuple[str, ...] = field(default=(), repr=False)
    limits: Limits = field(default_factory=Limits)
    host: str = "127.0.0.1"
    port: int = 8080
    allow_public_without_keys: bool = False
    grace_period: float = 30.0  # seconds in-flight requests get to finish after SIGTERM
    allowed_hosts: tuple[str, ...] = ()  # keyless on loopback: more Host names ("*": any)
    cors_origins: tuple[str, ...] = ()  # browser origins granted CORS (none by default)

    def __post_init__(self) -> None:
        if not self.models:
            raise ConfigurationError("serve needs at least one model configuration")
        at_least(0)("port", self.port)
        number(positive=False)("grace_period", self.grace_period)
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"model names must be unique, got {names}")
        if not self.keys and not is_loopback(self.host) and not self.allow_public_without_keys:
            raise ConfigurationError(
                f"refusing to serve on {self.host} without client keys: set PERMSC_API_KEYS or "
                "--api-key-file, or pass --allow-unauthenticated to serve an open endpoint"
            )

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret this server knows (client keys, upstream keys from the environment):
        masked wherever one could be written (answers, log lines)."""
        upstream = ["OPENAI_API_KEY", *(m.api_key_env for m in self.models if m.api_key_env)]
        values = (*self.keys, *(os.environ.get(name) for name in upstream))
        return tuple(v for v in values if v)

    def connection_cap(self, open_files: int | None) -> int:
        """``limits.max_connections``, or what ``open_files`` (the soft open-file limit;
        None: unlimited) leaves after the upstream connections and 64 more files, at most
        4096; a cap that does not fit under the limit is refused."""
        reserve = 64 + sum(
            RankingOptions.from_kwargs(**m.options).max_concurrency for m in self.models
        )
        room = _MAX_CONNECTIONS if open_files is None else open_files - reserve
        cap = self.limits.max_connections or min(room, _MAX_CONNECTIONS)
        if cap > room or cap < 1:
            raise ConfigurationError(
                f"the open-file limit ({open_files}) leaves room for {max(room, 0)} client "
                f"connections beside {reserve} upstream connections and files, not {cap}: "
                "raise it (ulimit -n) or lower --max-connections or --concurrency"
            )
        return cap


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1).

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_models(path: str | Path) -> tuple[ModelConfig, ...]:
    """The ``[models.NAME]`` tables of a TOML file, each a :class:`ModelConfig`."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML ({exc})") from None
    tables = data.get("models")
    if not isinstance(tables, dict) or not tables:
        raise ConfigurationError(f"{path}: expected one or more [models.NAME] tables")
    models = []
    known = (*_MODEL_KEYS, *RankingOptions.names())
    for name, table in tables.items():
        if not isinstance(table, dict) or not isinstance(table.get("backend"), str):
            raise ConfigurationError(f"{path}: [models.{name}] needs a backend = '...' string")
        unknown = [f"unknown key {k!r}{did_you_mean(k, known)}" for k in table if k not in known]
        if unknown:  # every one, each with the closest keys (a model key or an option)
            raise ConfigurationError(
                f"{path}: [models.{name}]: {'; '.join(unknown)}; a table takes "
                f"{', '.join(_MODEL_KEYS)} and any ranking option (docs/options.md)"
            )
        options = {k: v for k, v in table.items() if k not in _MODEL_KEYS}
        extra = {k: table[k] for k in _MODEL_KEYS[1:] if k in table}
        models.append(ModelConfig(name, table["backend"], options, **extra))
    return tuple(models)
