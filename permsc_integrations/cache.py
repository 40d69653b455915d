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
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .backends.base import Backend, Completion, GenerationSettings
from .results import Usage

__all__ = ["ResponseCache", "MemoryCache", "SQLiteCache", "cache_key", "fingerprint"]


@runtime_checkable
class ResponseCache(Protocol):
    """What the engine needs from a cache."""

    async def aget(self, key: str) -> Completion | None: ...

    async def aset(self, key: str, completion: Completion) -> None: ...


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
    usage = Usage(prompt_tokens=d["prompt_tokens"], completion_tokens=d["completion_tokens"])
    return Completion(
        text=d["text"], usage=usage, model=d["model"], finish_reason=d["finish_reason"]
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
    """A cache in one SQLite file, kept across runs.

    Queries are short and run inline under a lock (WAL journal, no fsync per write), so one
    instance is safe across threads; several processes may share the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    async def aget(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else _load(row[0])

    async def aset(self, key: str, completion: Completion) -> None:
        blob = _dump(completion)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, blob)
            )

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()
