"""Batch ranking on Ray Data: one PSC ranker per actor, one call budget for the whole job.

:func:`rank_dataset` adds ranking columns to every row of a :class:`ray.data.Dataset`; it runs
``map_batches`` with a pool of actors, each holding one :class:`~permsc_integrations.PSCRanker`
whose async engine ranks the rows of several batches at once on the actor's event loop.
``max_concurrency`` is the budget of calls in flight for the **whole job**: it is split evenly
across the actors (so ``concurrency`` actors never exceed it together). A row whose ranking
fails becomes a row with ``error`` set (and its ``usage``, what it spent): rows are never
dropped and a bad row never fails the job. Permutation seeds derive from the ranker's
``seed`` and the row's own query and items
(:func:`permsc_integrations._run.state.derive_seed`), so a re-run, a resumed run, another
partitioning or the single-process ``permsc rank`` give the same orders.

What every ranking actor holds, here and in :mod:`permsc_integrations.ray._rows` (the engine
of ``permsc rank --engine ray``, whose faults are bounded): a :class:`RowRanker` that turns
each row into a :class:`RankedRow` and ends its process with its node
(:func:`exit_with_parent`). Ray Data's own fault handling is docs/scale.md's.

Needs the ``ray`` extra: ``pip install 'permsc-integrations[ray]'``. See docs/scale.md.

Example (it starts Ray, so not run as a doctest)::

    import ray.data
    ds = ray.data.from_items([{"query": "q", "items": ["a", "b", "c"]}])
    ranked = rank_dataset(ds, backend="openai:gpt-4o-mini", num_permutations=5)
    ranked.take(1)[0]["order"]  # e.g. [1, 0, 2]
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import anyio

from permsc_integrations._checks import positive_int
from permsc_integrations._options.options import RankingOptions
from permsc_integrations._ranker.ranker import PSCRanker
from permsc_integrations.errors import ConfigurationError, MissingDependencyError
from permsc_integrations.results import RankingResult, Usage

if TYPE_CHECKING:  # optional dependencies (the ray extra), imported where used
    from typing import Unpack  # Python 3.11

    import pyarrow as pa
    from ray import ObjectRef, ObjectRefGenerator
    from ray.data import ActorPoolStrategy, Dataset

    from permsc_integrations._options.keywords import RankingKeywords
    from permsc_integrations.backends.base import Backend

__all__ = ["rank_dataset"]

RESULT_COLUMNS = ("order", "scores", "confidence", "samples", "failed_samples", "usage", "error")
"""The columns :func:`rank_dataset` adds (an input column of one of these names is refused)."""
USAGE_FIELDS = Usage.COUNTS


def ray_module() -> ModuleType:
    """``ray``, imported (with ``ray.data``), or an error naming the install line."""
    try:
        # lazy: optional dependency (the ray extra)
        import ray
        import ray.data
    except ImportError as exc:
        raise MissingDependencyError("ray", "ray", purpose="ranking Ray datasets") from exc
    return ray


_R = TypeVar("_R", covariant=True)


class RayCall(Protocol[_R]):
    """A Ray actor class or actor method, as a driver calls it: ``.remote(...)``."""

    def remote(self, *args: object) -> _R: ...


class _Streaming(Protocol):
    def options(self, *, num_returns: str) -> RayCall[ObjectRefGenerator]: ...


class RowsHandle(Protocol):
    """What a driver uses of a rows actor's handle (:mod:`permsc_integrations.ray._rows`):
    Ray types a handle ``ActorHandle | type[Actor]``, whose methods have no ``options``."""

    rank: _Streaming
    __ray_ready__: RayCall[ObjectRef[None]]


def split_budget(max_concurrency: int, actors: int) -> tuple[int, int]:
    """``(actors, calls per actor)``: the job's budget split evenly, never exceeded.

    >>> split_budget(200, 4)
    (4, 50)
    >>> split_budget(3, 8)  # fewer calls than actors: one call each, fewer actors
    (3, 1)
    """
    positive_int("concurrency (actors)", actors)
    actors = min(actors, max_concurrency)
    return actors, max_concurrency // actors


def actor_options(
    concurrency: int, ranker_options: Mapping[str, object]
) -> tuple[int, RankingOptions]:
    """``(actors, each actor's options)``: the options validated (before Ray starts work) and
    the job's ``max_concurrency`` split among at most ``concurrency`` actors."""
    options = RankingOptions.from_kwargs(**ranker_options)
    if options.cache is not None:
        raise ConfigurationError(
            "a cache object cannot be shared by Ray actors; rank without cache= (or give each "
            "actor its own by wrapping the backend)"
        )
    if options.ranker_cap is not None:
        raise ConfigurationError(
            "ranker_cap is one ranker's meter and Ray actors each build their own: it would "
            "allow the cap once per actor; cap each request with request_cap instead"
        )
    actors, per_actor = split_budget(options.max_concurrency, concurrency)
    return actors, dataclasses.replace(options, max_concurrency=per_actor)


@dataclass(frozen=True, slots=True)
class RankedRow:
    """One row's ranking as plain values, what an actor sends back: ``key`` names the row,
    ``order`` indexes its items best first; a failed row has ``error`` set, its ranking fields
    None, and ``usage`` still says what it spent. ``head``, ``stopped`` and ``top_probability``
    are the result's (the CLI writes them; :func:`rank_dataset`'s columns leave them out)."""

    key: object
    order: tuple[int, ...] | None
    scores: tuple[float, ...] | None
    confidence: float | None
    samples: int | None
    failed_samples: int | None
    usage: dict[str, int]
    error: str | None
    head: int | None = None
    stopped: str = "complete"
    top_probability: tuple[float | None, ...] = ()

    @classmethod
    def of(cls, key: object, outcome: RankingResult | Exception) -> RankedRow:
        """The row of a RankingResult, or of the exception its ranking raised."""
        usage = getattr(outcome, "usage", None)
        spent = {f: int(getattr(usage, f, 0) or 0) for f in USAGE_FIELDS}
        if isinstance(outcome, Exception):
            return cls.failed(key, f"{type(outcome).__name__}: {outcome}", spent)
        return cls(
            key,
            tuple(outcome.order),
            tuple(outcome.scores),
            float(outcome.confidence),
            len(outcome.samples),
            len(outcome.failures),
            spent,
            None,
            outcome.head,
            outcome.stopped,
            tuple(outcome.top_probability),
        )

    @classmethod
    def failed(cls, key: object, error: str, usage: dict[str, int] | None = None) -> RankedRow:
        """A failed row: ``error`` says why, ``usage`` what it spent (nothing known: zeros)."""
        spent = usage if usage is not None else dict.fromkeys(USAGE_FIELDS, 0)
        return cls(key, None, None, None, None, None, spent, error)


def exit_with_parent(interval: float = 0.05) -> None:
    """End this process as soon as its parent is gone (a daemon thread checks every
    ``interval`` s).

    A Ray worker's parent is its node's raylet. When a driver that started Ray itself is
    killed, the raylet dies with it but the workers lived on for seconds, still calling the
    upstream (hundreds of calls after the kill, docs/scale.md): an actor that calls this stops
    within ``interval``.
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)  # the node is gone: no cleanup can reach anyone now

    threading.Thread(target=watch, name="permsc-exit-with-parent", daemon=True).start()


class RowRanker:
    """What every ranking actor holds: one ranker (its share of the job's budget); the
    process ends with its node (:func:`exit_with_parent`)."""

    def __init__(self, backend: str | Backend, options: RankingOptions) -> None:
        exit_with_parent()
        self.ranker = PSCRanker(backend, options=options)

    async def rank(self, key: object, query: object, items: object) -> RankedRow:
        """One row's :class:`RankedRow`; a failure is a row with its error, never raised.
        ``query`` and ``items`` are the row's, unchecked: the core refuses a query that is not
        a string and items that are not a list of texts or mappings."""
        try:
            given = cast("Sequence[object]", items or ())
            result = await self.ranker.arank(cast(str, query), given, request_id=key)
            return RankedRow.of(key, result)
        except Exception as exc:
            return RankedRow.of(key, exc)


@dataclass(frozen=True, slots=True)
class _Columns:
    query: str
    items: str
    id: str | None


class _RankBatches:
    """The Ray Data actor: a :class:`RowRanker`, the rows of a batch ranked concurrently."""

    def __init__(self, backend: str | Backend, options: RankingOptions, columns: _Columns) -> None:

        self.columns = columns
        self.rows = RowRanker(backend, options)

    async def __call__(self, batch: pa.Table) -> AsyncIterator[pa.Table]:
        # lazy: optional dependency (pyarrow, with the ray extra)
        import pyarrow as pa

        ranked = await self._rank(batch.to_pylist())
        types = _column_types()
        for name in RESULT_COLUMNS:
            values = [getattr(row, name) for row in ranked]
            batch = batch.append_column(name, pa.array(values, type=types[name]))
        yield batch

    async def _rank(self, rows: list[dict[str, object]]) -> list[RankedRow]:
        """Every row's RankedRow, in row order."""
        c = self.columns
        out: list[RankedRow | None] = [None] * len(rows)

        async def one(k: int, row: dict[str, object]) -> None:
            rid = row.get(c.id) if c.id else k
            out[k] = await self.rows.rank(rid, row.get(c.query), row.get(c.items))

        async with anyio.create_task_group() as tg:
            for k, row in enumerate(rows):
                tg.start_soon(one, k, row)
        return [row for row in out if row is not None]  # every one: the group waited for all


def _column_types() -> dict[str, pa.DataType]:
    # lazy: optional dependency (pyarrow, with the ray extra)
    import pyarrow as pa

    return {
        "order": pa.list_(pa.int64()),
        "scores": pa.list_(pa.float64()),
        "confidence": pa.float64(),
        "samples": pa.int64(),
        "failed_samples": pa.int64(),
        "usage": pa.struct([(f, pa.int64()) for f in USAGE_FIELDS]),
        "error": pa.string(),
    }


def rank_dataset(
    ds: Dataset,
    *,
    backend: str | Backend,
    query_column: str = "query",
    items_column: str = "items",
    id_column: str | None = None,
    concurrency: int = 2,
    batch_size: int = 16,
    batches_per_actor: int = 4,
    num_cpus: float = 0.25,
    **ranker_options: Unpack[RankingKeywords],
) -> Dataset:
    """``ds`` with the :data:`RESULT_COLUMNS` added to every row (see the module docstring).

    ``backend`` is a spec string (or a picklable backend object) that each actor resolves;
    ``concurrency`` is the number of actors, each ranking up to ``batches_per_actor``
    batches of ``batch_size`` rows at once and reserving ``num_cpus`` CPUs; ``ranker_options``
    are :class:`~permsc_integrations.RankingOptions` (validated here, before Ray starts work),
    ``max_concurrency`` being the whole job's budget of calls in flight. ``items_column``
    holds lists of texts or of mappings with ``"text"``; ``id_column`` tags events and errors.
    """
    ray = ray_module()
    actors, options = actor_options(concurrency, ranker_options)
    clash = sorted(set(RESULT_COLUMNS) & set(ds.columns() or ()))
    if clash:
        raise ConfigurationError(f"the dataset already has column(s) {clash}; rename them first")
    columns = _Columns(query_column, items_column, id_column)
    return ds.map_batches(
        _RankBatches,
        fn_constructor_kwargs={"backend": backend, "options": options, "columns": columns},
        compute=_actor_pool(ray, actors, batches_per_actor),
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=num_cpus,
    )


def _actor_pool(ray: ModuleType, actors: int, batches_per_actor: int) -> ActorPoolStrategy:
    """``actors`` actors, each given up to ``batches_per_actor`` batches at once."""
    return ray.data.ActorPoolStrategy(
        size=actors,
        max_tasks_in_flight_per_actor=batches_per_actor,
        max_concurrent_calls_per_actor=batches_per_actor,
    )
