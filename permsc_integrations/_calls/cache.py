"""Response caches, so that a re-run or an evaluation sweep does not pay twice.

The key is a stable SHA-256 of the backend's fingerprint (model, full endpoint, decoding and
extra options: everything that can change an answer, secrets excluded), the messages and the
generation settings. Only completed answers are stored, never errors. Both caches are
safe to share between threads and event loops.

Example:
    >>> import anyio
    >>> from permsc_integrations.backends.base import Completion, GenerationSettings
    >>> cache = MemoryCache()
    >>> messages = [{"role": "user", "content": "hi"}]
    >>> class Model:
    ...     name = fingerprint = "openai:gpt-4o-mini@api.openai.com"
    >>> key = cache_key(Model(), messages, GenerationSettings())
    >>> anyio.run(cache.aset, key, Completion(text="[1] > [2]"))
    >>> anyio.run(cache.aget, key).text
    '[1] > [2]'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from permsc_integrations._registry import publish
from permsc_integrations.backends.base import Backend, Completion, GenerationSettings, ResponseCache
from permsc_integrations.errors import ConfigurationError
from permsc_integrations.results import Usage

__all__ = ["ResponseCache", "MemoryCache", "SQLiteCache", "cache_key", "fingerprint"]

log = logging.getLogger(__name__)


def fingerprint(backend: Backend) -> str:
    """What identifies ``backend``'s answers: its ``fingerprint`` (model, endpoint, decoding
    options; never secrets), else its name."""
    value = getattr(backend, "fingerprint", None)
    return str(value) if value else backend.name


def cache_key(
    backend: Backend, messages: Sequence[Mapping[str, str]], settings: GenerationSettings
) -> str:
    """A stable hex digest of the backend's fingerprint, the messages and the settings (the
    timeout is not part of it)."""
    payload = {
        "backend": fingerprint(backend),
        "messages": [dict(sorted(m.items())) for m in messages],
        "settings": {k: v for k, v in dataclasses.asdict(settings).items() if k != "timeout"},
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _dump(completion: Completion) -> str:
    u = completion.usage
    return json.dumps(
        {
            "text": completion.text,
            "model": completion.model,
            "finish_reason": completion.finish_reason,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
        }
    )


def _load(blob: str) -> Completion:
    d: dict[str, Any] = json.loads(blob)
    usage = Usage(
        prompt_tokens=int(d["prompt_tokens"]), completion_tokens=int(d["completion_tokens"])
    )
    if not isinstance(d["text"], str):
        raise TypeError("text is not a string")
    return Completion(
        text=d["text"], usage=usage, model=str(d["model"]), finish_reason=d["finish_reason"]
    )


class MemoryCache:
    """An in-process cache; ``max_entries`` bounds it (least recently used go first)."""

    def __init__(self, max_entries: int | None = None) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, Completion] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    async def aget(self, key: str) -> Completion | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    async def aset(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._data[key] = completion
            self._data.move_to_end(key)
            if self.max_entries is not None and len(self._data) > self.max_entries:
                self._data.popitem(last=False)


class SQLiteCache:
    """A cache in one SQLite file, kept across runs and shareable between processes.

    Every query runs in a worker thread (``anyio.to_thread``), never on the event loop, and
    waits at most ``busy_timeout`` seconds for another process's lock. The cache never
    fails a ranking: a locked database or a corrupt row is a miss, and a read-only file is a
    read-only cache (each warns once). A file that is not an SQLite database is refused at
    construction. New files are created readable by their owner only (0600).
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 0.5) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self.read_only = False
        _create_private(self.path)
        self._conn = self._connect(self.path, busy_timeout)
        try:
            self._prepare()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            self._conn = self._read_only(busy_timeout, exc)
            self.read_only = True
            message = f"{self.path} is read-only: cached answers are read, new ones not stored"
            self._warn("read-only", message)

    @staticmethod
    def _connect(target: str, busy_timeout: float, uri: bool = False) -> sqlite3.Connection:
        return sqlite3.connect(
            target, timeout=busy_timeout, check_same_thread=False, isolation_level=None, uri=uri
        )

    def _read_only(self, busy_timeout: float, cause: Exception) -> sqlite3.Connection:
        """A read-only connection to a file this process may not write, or a clear error."""
        for mode in ("mode=ro", "immutable=1"):  # immutable: no -shm file in a read-only dir
            try:
                conn = self._connect(f"file:{self.path}?{mode}", busy_timeout, uri=True)
                conn.execute("SELECT COUNT(*) FROM responses").fetchone()
                return conn
            except sqlite3.DatabaseError:
                continue
        raise ConfigurationError(
            f"{self.path} is not a usable SQLite cache ({cause}); delete it or choose another path"
        ) from cause

    def _prepare(self) -> None:
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("SQLiteCache: %s", message)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    async def aget(self, key: str) -> Completion | None:
        return await anyio.to_thread.run_sync(self._get, key)

    async def aset(self, key: str, completion: Completion) -> None:
        if not self.read_only:
            await anyio.to_thread.run_sync(self._set, key, _dump(completion))

    def _get(self, key: str) -> Completion | None:
        try:
            with self._lock:
                sql = "SELECT value FROM responses WHERE key = ?"
                row = self._conn.execute(sql, (key,)).fetchone()
        except sqlite3.Error as exc:  # locked by another process, or a damaged file
            self._warn("get", f"read failed ({exc}); treated as a miss")
            return None
        if row is None:
            return None
        try:
            return _load(row[0])
        except (ValueError, KeyError, TypeError) as exc:
            self._warn("row", f"a damaged entry ({type(exc).__name__}: {exc}) is a miss")
            return None

    def _set(self, key: str, blob: str) -> None:
        try:
            with self._lock:
                sql = "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)"
                self._conn.execute(sql, (key, blob))
        except sqlite3.Error as exc:
            self._warn("set", f"write failed ({exc}); the answer was not cached")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()


def _create_private(path: str) -> None:
    """Create ``path`` (if new) readable and writable by its owner only."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError:  # a read-only folder, say: sqlite3 says it more precisely below
        pass


publish("permsc_integrations", MemoryCache, SQLiteCache)
