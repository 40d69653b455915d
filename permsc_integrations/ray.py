"""Batch ranking on Ray Data: one PSC ranker per actor, one call budget for the whole job.

:func:`rank_dataset` adds ranking columns to every row of a :class:`ray.data.Dataset`; it runs
``map_batches`` with a pool of actors, each holding one :class:`~permsc_integrations.PSCRanker`
whose async engine ranks the rows of several batches at once on the actor's event loop.
``max_concurrency`` is the budget of calls in flight for the **whole job**: it is split evenly
across the actors (so ``concurrency`` actors never exceed it together). A row whose ranking
fails becomes a row with ``error`` set: rows are never dropped and a bad row never fails the
job. Permutation seeds derive from the ranker's ``seed`` and the row's own query and items
(:func:`permsc_integrations.run.state.derive_seed`), so a re-run, a resumed run, another
partitioning or the single-process ``permsc rank`` give the same orders.

Needs the ``ray`` extra: ``pip install 'permsc-integrations[ray]'``. See docs/scale.md.

Example (it starts Ray, so not run as a doctest)::

    import ray.data
    ds = ray.data.from_items([{"query": "q", "items": ["a", "b", "c"]}])
    ranked = rank_dataset(ds, backend="openai:gpt-4o-mini", num_permutations=5)
    ranked.take(1)[0]["order"]  # e.g. [1, 0, 2]
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from .checks import positive_int
from .errors import ConfigurationError, MissingDependencyError
from .options import RankingOptions
from .ranker import PSCRanker
from .results import Usage

__all__ = ["rank_dataset", "split_budget", "RESULT_COLUMNS", "USAGE_FIELDS"]

RESULT_COLUMNS = ("order", "scores", "confidence", "samples", "failed_samples", "usage", "error")
"""The columns :func:`rank_dataset` adds (an input column of one of these names is refused)."""
USAGE_FIELDS = Usage.COUNTS


def _ray() -> Any:
    try:
        # lazy: optional dependency (the ray extra)
        import ray
        import ray.data
    except ImportError as exc:
        raise MissingDependencyError("ray", "ray", purpose="ranking Ray datasets") from exc
    return ray


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


@dataclass(frozen=True, slots=True)
class _Columns:
    query: str
    items: str
    id: str | None


class _RankBatches:
    """The actor: one ranker (the actor's share of the budget), rows ranked concurrently."""

    def __init__(self, backend: Any, options: RankingOptions, columns: _Columns) -> None:

        self.columns = columns
        self.ranker = PSCRanker(backend, options=options)

    async def __call__(self, batch: Any) -> AsyncIterator[Any]:
        # lazy: optional dependency (pyarrow, with the ray extra)
        import pyarrow as pa

        rows = batch.to_pylist()
        outcomes = await self._rank(rows)
        added = _result_columns(outcomes)
        for name in RESULT_COLUMNS:
            batch = batch.append_column(name, pa.array(added[name], type=_column_types()[name]))
        yield batch

    async def _rank(self, rows: list[dict[str, Any]]) -> list[Any]:
        """Every row's RankingResult or the exception it raised, in row order."""

        c = self.columns
        out: list[Any] = [None] * len(rows)

        async def one(k: int, row: dict[str, Any]) -> None:
            try:
                rid = row.get(c.id) if c.id else k
                query: Any = row.get(c.query)  # the core refuses what is not a string
                out[k] = await self.ranker.arank(query, row.get(c.items) or (), request_id=rid)
            except Exception as exc:  # a failed row is a row with its error
                out[k] = exc

        async with anyio.create_task_group() as tg:
            for k, row in enumerate(rows):
                tg.start_soon(one, k, row)
        return out


def _result_columns(outcomes: Sequence[Any]) -> dict[str, list[Any]]:
    """The added columns for each outcome (a RankingResult or the exception it raised)."""
    columns: dict[str, list[Any]] = {name: [] for name in RESULT_COLUMNS}
    for outcome in outcomes:
        failed = isinstance(outcome, BaseException)
        usage = getattr(outcome, "usage", None)
        values = {
            "order": None if failed else list(outcome.order),
            "scores": None if failed else list(outcome.scores),
            "confidence": None if failed else float(outcome.confidence),
            "samples": None if failed else len(outcome.samples),
            "failed_samples": None if failed else len(outcome.failures),
            "usage": {f: getattr(usage, f, 0) or 0 for f in USAGE_FIELDS},
            "error": f"{type(outcome).__name__}: {outcome}" if failed else None,
        }
        for name, value in values.items():
            columns[name].append(value)
    return columns


def _column_types() -> dict[str, Any]:
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


def _job_options(ranker_options: dict[str, Any], ds: Any) -> RankingOptions:
    """The job's options, checked before Ray starts work: nothing one ranker shares with
    another (a cache object, ``ranker_cap``), no result column the dataset already has."""
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
    clash = sorted(set(RESULT_COLUMNS) & set(ds.columns() or ()))
    if clash:
        raise ConfigurationError(f"the dataset already has column(s) {clash}; rename them first")
    return options


def rank_dataset(
    ds: Any,
    *,
    backend: Any,
    query_column: str = "query",
    items_column: str = "items",
    id_column: str | None = None,
    concurrency: int = 2,
    batch_size: int = 16,
    batches_per_actor: int = 4,
    num_cpus: float = 0.25,
    **ranker_options: Any,
) -> Any:
    """``ds`` with the :data:`RESULT_COLUMNS` added to every row (see the module docstring).

    ``backend`` is a spec string (or a picklable backend object) that each actor resolves;
    ``concurrency`` is the number of actors, each ranking up to ``batches_per_actor``
    batches of ``batch_size`` rows at once and reserving ``num_cpus`` CPUs; ``ranker_options``
    are :class:`~permsc_integrations.RankingOptions` (validated here, before Ray starts work),
    ``max_concurrency`` being the whole job's budget of calls in flight. ``items_column``
    holds lists of texts or of mappings with ``"text"``; ``id_column`` tags events and errors.
    """
    ray = _ray()
    options = _job_options(ranker_options, ds)
    actors, per_actor = split_budget(options.max_concurrency, concurrency)
    return ds.map_batches(
        _RankBatches,
        fn_constructor_kwargs={
            "backend": backend,
            "options": dataclasses.replace(options, max_concurrency=per_actor),
            "columns": _Columns(query_column, items_column, id_column),
        },
        compute=ray.data.ActorPoolStrategy(
            size=actors,
            max_tasks_in_flight_per_actor=batches_per_actor,
            max_concurrent_calls_per_actor=batches_per_actor,
        ),
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=num_cpus,
    )
