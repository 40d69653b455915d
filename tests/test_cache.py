"""Response caches: stable keys, memory and SQLite stores, thread safety, persistence."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from permsc_integrations._calls.cache import MemoryCache, ResponseCache, SQLiteCache, cache_key
from permsc_integrations.backends.base import Completion, GenerationSettings
from permsc_integrations.errors import ConfigurationError
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


# ------------------------------------------------------ SQLiteCache in hostile conditions


def test_a_locked_database_neither_blocks_the_loop_nor_fails_the_ranking(
    tmp_path, scripted_server, caplog
) -> None:
    """Another process holds the write lock: writes wait in a worker thread, then give up
    with one warning; the event loop keeps running meanwhile and the ranking succeeds."""
    import sqlite3

    from permsc_integrations import PSCRanker
    from permsc_integrations.testing import oracle_responder

    path = tmp_path / "locked.sqlite"
    cache = SQLiteCache(path, busy_timeout=1.0)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the write lock, held for the whole ranking
    server = scripted_server(oracle_responder(len))
    ticks = 0

    async def go():
        nonlocal ticks
        async with anyio.create_task_group() as tg:

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await anyio.sleep(0.01)
                    ticks += 1

            tg.start_soon(ticker)
            ranker = PSCRanker(
                "openai:m",
                num_permutations=3,
                cache=cache,
                backend_options={"base_url": server.base_url},
            )
            result = await ranker.arank("q", ["a", "bbb", "cc"])
            await ranker.aclose()
            tg.cancel_scope.cancel()
            return result

    with caplog.at_level("WARNING"):
        result = anyio.run(go)
    other.rollback()
    assert result.order == (1, 2, 0) and server.request_count == 3
    assert ticks >= 20  # three 1 s waits for the lock happened off the loop
    assert caplog.text.count("write failed") == 1  # warned once


def test_a_damaged_row_is_a_miss(tmp_path, caplog) -> None:
    import sqlite3

    path = tmp_path / "damaged.sqlite"
    cache = SQLiteCache(path)
    anyio.run(cache.aset, "k1", Completion("fine"))
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO responses VALUES ('k2', '{not json')")
        raw.execute("""INSERT INTO responses VALUES ('k3', '{"text": "no usage"}')""")
    with caplog.at_level("WARNING"):
        assert anyio.run(cache.aget, "k2") is None and anyio.run(cache.aget, "k3") is None
    assert anyio.run(cache.aget, "k1").text == "fine"
    assert caplog.text.count("damaged entry") == 1


def test_a_file_that_is_not_a_database_is_refused_clearly(tmp_path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a cache\n" * 100)
    with pytest.raises(ConfigurationError, match="not a usable SQLite cache"):
        SQLiteCache(path)


def test_new_cache_files_are_private(tmp_path) -> None:
    path = tmp_path / "private.sqlite"
    SQLiteCache(path).close()
    assert path.stat().st_mode & 0o777 == 0o600


def read_only(*paths: Path) -> None:
    """Make ``paths`` read-only for this process: file modes, or for root (who ignores
    them) the immutable attribute; skip the test where neither can be had."""
    import os
    import subprocess

    if os.geteuid() != 0:
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"running as root and chattr +i is not available: {done.stderr!r}")


def writable(*paths: Path) -> None:
    import os
    import subprocess

    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)
    for p in paths:
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_a_read_only_file_is_a_read_only_cache(tmp_path, caplog) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "ro.sqlite"
    cache = SQLiteCache(path)
    anyio.run(cache.aset, "k", Completion("kept"))
    cache.close()
    for extra in folder.glob("ro.sqlite-*"):  # WAL side files, cleaned at close
        extra.unlink()
    read_only(path, folder)
    try:
        with caplog.at_level("WARNING"):
            cache = SQLiteCache(path)
            assert cache.read_only
            assert anyio.run(cache.aget, "k").text == "kept"
            anyio.run(cache.aset, "new", Completion("not stored"))
            assert anyio.run(cache.aget, "new") is None
        assert caplog.text.count("read-only") == 1
        cache.close()
    finally:
        writable(folder, path)
