"""Rank requests on Ray actors, each row back as soon as it is ranked, with bounded faults.

:func:`rank_rows` is the engine of ``permsc rank --engine ray``: ``concurrency`` actors
(Ray core, no Ray Data) share the job's ``max_concurrency`` calls in flight, each ranking up to
``batches_per_actor`` chunks of ``batch_size`` rows at once. What it promises:

- **Rows stream back as they finish**, one by one (a streaming generator per chunk), not a
  batch at a time: a driver that records each as it comes (the CLI's journal) loses, when it
  dies, only the rows still in progress.
- **A lost actor** (its node gone) is killed for good and replaced; the rows it had not
  delivered go to the others. A row delivered is never ranked again.
- **No capacity is an error, not a wait**: when no actor has been alive for
  ``capacity_timeout`` seconds (the nodes lost, none with room for another), or actors keep
  dying without finishing a row, :class:`~permsc_integrations.errors.ClusterCapacityError`
  says so; the rows delivered before it stand.
- **The job's actors end with it**: they are owned by the driver and never detached, so Ray
  ends them when the driver's process ends (on a cluster, at once); where the driver started
  Ray itself, their raylet dies with it and they stop within 50 ms
  (:func:`~permsc_integrations.ray._actors.exit_with_parent`). They are killed when the iteration
  ends, however it ends.

Needs the ``ray`` extra. See docs/scale.md.

Example (it starts Ray, so not run as a doctest)::

    from permsc_integrations import RankRequest
    for row in rank_rows([RankRequest("q", ["a", "b"], id="q1")], backend="openai:gpt-4o-mini"):
        row.key, row.order  # ("q1", (1, 0))
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, cast

from permsc_integrations._checks import positive_int
from permsc_integrations._options.keywords import RankingKeywords
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._ranker.ranker import RankRequest
from permsc_integrations.backends.base import Backend
from permsc_integrations.errors import ClusterCapacityError, PermscError
from permsc_integrations.ray._actors import (
    RankedRow,
    RayCall,
    RowRanker,
    RowsHandle,
    actor_options,
    ray_module,
)
from permsc_integrations.ray._feed import ROW_LOSSES, Feed, Watchdog

if TYPE_CHECKING:  # Python 3.11; ray: an optional dependency (the ray extra)
    from typing import Unpack

    from ray import ObjectRef, ObjectRefGenerator

__all__ = ["rank_rows", "ROW_LOSSES", "Watchdog"]

_Row = tuple[int, str, Sequence[object]]  # (position, query, items): what an actor ranks


class _Admission:
    """Rows start in order, each once fewer calls than ``cap`` are held by the rows under way
    (a row holds its plan's widest round). Started all at once, the rows' calls interleave
    in the limiter's queue and every row finishes at the end; admitted so, a few rows are
    under way at a time and each is delivered as soon as it can be."""

    def __init__(self, cap: int) -> None:
        self.cap, self.held = cap, 0
        self.changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def __call__(self, calls: int) -> AsyncIterator[None]:
        async with self.changed:
            await self.changed.wait_for(lambda: self.held < self.cap)
            self.held += calls
        try:
            yield
        finally:
            async with self.changed:
                self.held -= calls
                self.changed.notify_all()


class _RowsActor:
    """The actor: a :class:`~permsc_integrations.ray._actors.RowRanker`; each chunk's rows ranked
    concurrently (as :class:`_Admission` lets them start) and yielded as each finishes."""

    def __init__(self, backend: str | Backend, options: RankingOptions) -> None:
        self.rows = RowRanker(backend, options)
        self.options = options
        self.admission = _Admission(options.max_concurrency)

    def _widest(self, items: Sequence[object]) -> int:
        try:
            return max(r.calls.high for r in self.options.plan(len(items)).rounds)
        except (TypeError, PermscError):  # the ranker says what is wrong with the row
            return 1

    async def rank(self, rows: list[_Row]) -> AsyncIterator[RankedRow]:
        finished: asyncio.Queue[RankedRow] = asyncio.Queue()

        async def one(position: int, query: str, items: Sequence[object]) -> None:
            async with self.admission(self._widest(items or ())):
                finished.put_nowait(await self.rows.rank(position, query, items))

        tasks = [asyncio.ensure_future(one(*row)) for row in rows]
        try:
            for _ in tasks:
                yield await finished.get()
        finally:
            for task in tasks:
                task.cancel()


@functools.cache
def _remote_actor(ray: ModuleType, num_cpus: float) -> RayCall[RowsHandle]:
    # max_restarts=0: a lost actor is replaced by the driver, which knows what it had not
    # delivered; Ray's restarts would wait for its node's capacity without limit
    actor = ray.remote(max_restarts=0, max_task_retries=0)(_RowsActor)
    return actor.options(num_cpus=num_cpus, scheduling_strategy="SPREAD")


INIT_FAILURES = 3
"""Actors whose constructor raised this many times in a row stop the job (a backend that
cannot be built on the cluster: the error says why)."""


@dataclass
class _Chunk:
    actor: RowsHandle
    left: dict[int, RankRequest]  # the rows not yet delivered


@dataclass
class _Settings:
    size: int
    batch_size: int
    batches_per_actor: int
    capacity_timeout: float
    num_cpus: float
    backend: str | Backend
    options: RankingOptions


_ERROR_LINE = re.compile(r"^\s*([\w.]*(?:Error|Exception): .*)$")


def _cause(exc: Exception) -> str:
    """One line for ``exc``: the last ``SomeError: message`` line in it (Ray wraps an
    actor's own error in its traceback text), else its first line."""
    lines = str(exc).splitlines() or [""]
    found = [m.group(1) for m in map(_ERROR_LINE.match, lines) if m]
    return (found[-1] if found else f"{type(exc).__name__}: {lines[0]}")[:300]


@dataclass
class _Pool:
    """The driver's side: the actors, the chunks in flight, the deadline when none runs."""

    ray: ModuleType
    settings: _Settings
    feed: Feed
    watchdog: Watchdog
    actors: dict[RowsHandle, int] = field(default_factory=dict)  # actor: chunks in flight
    probes: dict[ObjectRef[None], RowsHandle] = field(default_factory=dict)  # ready probe: actor
    alive: set[RowsHandle] = field(default_factory=set)
    chunks: dict[ObjectRefGenerator, _Chunk] = field(default_factory=dict)  # generator: chunk
    owed: list[float] = field(default_factory=list)  # when to start the lost actors' heirs
    losses: int = 0  # actors lost in a row, no row delivered in between: the heirs' backoff
    init_failures: int = 0
    lost: int = 0
    delivered: int = 0
    failed: list[RankedRow] = field(default_factory=list)  # rows lost too often

    def add_actor(self) -> None:
        s = self.settings
        handle = _remote_actor(self.ray, s.num_cpus).remote(s.backend, s.options)
        self.actors[handle] = 0
        self.probes[handle.__ray_ready__.remote()] = handle

    def submit(self) -> None:
        """Start the heirs that are due; give chunks to the live actors, up to
        ``batches_per_actor`` each."""
        now = time.monotonic()
        for due in [t for t in self.owed if t <= now]:
            self.owed.remove(due)
            self.add_actor()
        s = self.settings
        for actor in self.alive:
            while self.actors[actor] < s.batches_per_actor and self.feed:
                left = self.feed.take(s.batch_size)
                rows = [(k, r.query, r.items) for k, r in left.items()]
                gen = actor.rank.options(num_returns="streaming").remote(rows)
                self.chunks[gen] = _Chunk(actor, left)
                self.actors[actor] += 1

    def step(self) -> RankedRow | None:
        """Wait (at most a second) for one thing to happen; a row when one was delivered."""
        if self.failed:
            return self.failed.pop()
        waiting = [*self.probes, *self.chunks]
        ready: list[ObjectRef[None]] | list[ObjectRefGenerator] = []
        if waiting:
            ready, _ = self.ray.wait(waiting, num_returns=1, timeout=1.0)
        else:  # every actor lost, the heirs not started yet
            time.sleep(0.1)
        row = None
        for ref in ready:
            if ref in self.probes:
                self._probed(ref)
            else:
                row = self._next_row(ref)
        self._check_capacity()
        return row

    def _probed(self, ref: ObjectRef[None]) -> None:
        actor = self.probes.pop(ref)
        try:
            self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:  # its constructor's error may not unpickle
            self._lost(actor, exc)
            return
        self.alive.add(actor)
        self.init_failures = 0

    def _next_row(self, gen: ObjectRefGenerator) -> RankedRow | None:
        chunk = self.chunks[gen]
        try:
            row: RankedRow = self.ray.get(next(gen))
        except StopIteration:
            del self.chunks[gen]
            self.actors[chunk.actor] -= 1
            return None
        except self._lost_errors() as exc:
            self._lost(chunk.actor, exc)
            return None
        if chunk.left.pop(cast(int, row.key), None) is None:  # keyed by position
            return None  # delivered already (never expected: no task is retried)
        self.losses, self.delivered = 0, self.delivered + 1
        return dataclasses.replace(row, key=self.feed.delivered(cast(int, row.key)))

    def _lost_errors(self) -> tuple[type[Exception], ...]:
        e = self.ray.exceptions
        return (e.RayActorError, e.ObjectLostError)

    def _lost(self, actor: RowsHandle, exc: Exception) -> None:
        """Kill ``actor`` for good, hand its rows back; its heir starts after a backoff."""
        for gen, chunk in list(self.chunks.items()):
            if chunk.actor is actor:
                self.failed += self.feed.hand_back(chunk.left, _cause(exc))
                del self.chunks[gen]
        self.actors.pop(actor, None)
        self.alive.discard(actor)
        self.ray.kill(actor, no_restart=True)
        self.lost += 1
        if getattr(exc, "actor_init_failed", not isinstance(exc, self._lost_errors())):
            self.init_failures += 1
            if self.init_failures >= INIT_FAILURES:
                raise ClusterCapacityError(
                    f"the ranking actors could not start ({self.init_failures} in a row): "
                    f"{_cause(exc)}"
                )
        self.losses += 1
        self.owed.append(time.monotonic() + min(0.5 * 2 ** (self.losses - 1), 8.0))

    def _check_capacity(self) -> None:
        if self.watchdog.expired(alive=bool(self.alive), now=time.monotonic()):
            s = self.settings
            cpus = self.ray.cluster_resources().get("CPU", 0)
            raise ClusterCapacityError(
                f"no ranking actor could run for {s.capacity_timeout:g} s ({self.lost} lost "
                f"with their nodes or processes; {len(self.actors)} waiting for a node with "
                f"{s.num_cpus:g} CPU free; the cluster's live nodes have {cpus:g} CPUs): "
                f"{self.delivered} rows were delivered, the others not ranked; give the "
                "cluster room and rerun (permsc rank: --resume)"
            )

    def stop(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)


def rank_rows(
    requests: Iterable[RankRequest],
    *,
    backend: str | Backend,
    concurrency: int = 2,
    batch_size: int = 16,
    batches_per_actor: int = 4,
    num_cpus: float = 0.25,
    capacity_timeout: float = 60.0,
    **ranker_options: Unpack[RankingKeywords],
) -> Iterator[RankedRow]:
    """Each request's :class:`~permsc_integrations.ray._actors.RankedRow` as soon as it is ranked
    (``key``: the request's ``id``, else its position), in any order (module docstring).

    ``backend`` is a spec string (or a picklable backend object) each actor resolves;
    ``ranker_options`` are :class:`~permsc_integrations.RankingOptions` (validated before Ray
    starts work), ``max_concurrency`` the whole job's budget of calls in flight. Raises
    :class:`~permsc_integrations.errors.ClusterCapacityError` when no actor could run for
    ``capacity_timeout`` seconds.
    """
    ray = ray_module()
    size, options = actor_options(concurrency, ranker_options)
    for name, value in (("batch_size", batch_size), ("batches_per_actor", batches_per_actor)):
        positive_int(name, value)
    settings = _Settings(
        size, batch_size, batches_per_actor, capacity_timeout, num_cpus, backend, options
    )
    return _rows(ray, settings, requests)


def _rows(
    ray: ModuleType, settings: _Settings, requests: Iterable[RankRequest]
) -> Iterator[RankedRow]:
    pool = _Pool(
        ray, settings, Feed(requests), Watchdog(settings.capacity_timeout, time.monotonic())
    )
    try:
        for _ in range(settings.size):
            pool.add_actor()
        while pool.feed or pool.chunks or pool.failed:
            pool.submit()
            row = pool.step()
            if row is not None:
                yield row
    finally:
        pool.stop()
