"""Response caches: stable keys, memory and SQLite stores, thread safety, persistence."""

from __future__ import annotations

import threading

import anyio
import pytest

from permsc_integrations.backends.base import Completion, GenerationSettings
from permsc_integrations.cache import MemoryCache, ResponseCache, SQLiteCache, cache_key
from permsc_integrations.results import Usage

MSGS = [{"role": "system", "content": "rank"}, {"role": "user", "content": "[1] a\n[2] b"}]


class Model:
    """A backend stand-in: only its identity matters to the key."""

    def __init__(self, name: str, fingerprint: str | None = None) -> None:
        self.name, self.fingerprint = name, fingerprint


def test_key_is_stable_and_sensitive_to_what_matters() -> None:
    m = Model("openai:m")
    base = cache_key(m, MSGS, GenerationSettings())
    assert base == cache_key(
        m, [dict(reversed(list(m.items()))) for m in MSGS], GenerationSettings()
    )
    assert len(base) == 64
    assert base != cache_key(Model("openai:other"), MSGS, GenerationSettings())
    assert base != cache_key(m, MSGS[:1], GenerationSettings())
    assert base != cache_key(m, MSGS, GenerationSettings(temperature=0.7))
    assert base != cache_key(m, MSGS, GenerationSettings(max_tokens=5))
    assert base == cache_key(m, MSGS, GenerationSettings(timeout=5)), "timeout is not semantic"


def test_the_key_follows_the_fingerprint_not_the_name() -> None:
    one, other = Model("openai:m", '{"endpoint": "a"}'), Model("openai:m", '{"endpoint": "b"}')
    assert cache_key(one, MSGS, GenerationSettings()) != cache_key(
        other, MSGS, GenerationSettings()
    )
    assert cache_key(Model("x", "same"), MSGS, GenerationSettings()) == cache_key(
        Model("y", "same"), MSGS, GenerationSettings()
    )


@pytest.fixture(params=["memory", "sqlite"])
def cache(request: pytest.FixtureRequest, tmp_path) -> ResponseCache:
    if request.param == "memory":
        return MemoryCache()
    return SQLiteCache(tmp_path / "cache.sqlite")


async def test_round_trip_keeps_text_usage_and_model(cache: ResponseCache) -> None:
    assert isinstance(cache, ResponseCache)
    completion = Completion(
        "[2] > [1]", Usage(prompt_tokens=11, completion_tokens=3), "m-1", "stop"
    )
    assert await cache.aget("k") is None
    await cache.aset("k", completion)
    got = await cache.aget("k")
    assert got == Completion(
        "[2] > [1]", Usage(prompt_tokens=11, completion_tokens=3), "m-1", "stop"
    )


def test_sqlite_cache_persists_across_instances(tmp_path) -> None:
    path = tmp_path / "c.sqlite"
    first = SQLiteCache(path)
    anyio.run(first.aset, "k", Completion("kept"))
    first.close()
    second = SQLiteCache(path)
    assert anyio.run(second.aget, "k").text == "kept"
    assert len(second) == 1


def test_memory_cache_bound_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2)

    async def go() -> None:
        await cache.aset("a", Completion("a"))
        await cache.aset("b", Completion("b"))
        await cache.aget("a")
        await cache.aset("c", Completion("c"))

    anyio.run(go)
    assert len(cache) == 2
    assert anyio.run(cache.aget, "b") is None and anyio.run(cache.aget, "a").text == "a"


def test_sqlite_cache_is_safe_across_threads(tmp_path) -> None:
    cache = SQLiteCache(tmp_path / "t.sqlite")
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(50):
                anyio.run(cache.aset, f"{t}-{i}", Completion(f"text {t} {i}"))
                assert anyio.run(cache.aget, f"{t}-{i}").text == f"text {t} {i}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(cache) == 200
