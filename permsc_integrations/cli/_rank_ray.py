"""``permsc rank --engine ray``: the same records as the single process, ranked on Ray actors.

Ray starts on this machine for the job (or joins ``--ray-address``, else ``RAY_ADDRESS``); the
queries are ranked by ``--actors`` actors sharing ``--max-concurrency`` calls in flight
(:func:`permsc_integrations.ray._rows.rank_rows`). Seeds derive from each row's content, so the
output equals the single-process ``permsc rank`` for the same options. Rows come back as they
finish: each goes to the journal at once (:mod:`._rank_journal`: ``--resume`` pays only for
rows never finished) and to the output (cli/_rank_output.py). When no actor can run for
``--ray-capacity-timeout`` seconds the command stops with an error (exit 2); what was written
stays valid.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from permsc_integrations.cli._common import Query, backend_spec, report
from permsc_integrations.cli._rank_journal import Journal, unit_key
from permsc_integrations.cli._rank_records import to_json
from permsc_integrations.ray import alive, find_processes, lineage
from permsc_integrations.results import RankingResult, StopReason, Usage, scores_from_order

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations._options.keywords import RankingKeywords
    from permsc_integrations.ray import RankedRow

__all__ = ["rank_queries_on_ray", "job_options", "reap_marked"]


class _Writer(Protocol):
    """Where each query's record goes (``permsc rank``'s writer: cli/_rank_output.py)."""

    def put(self, position: int, text: str | None) -> None: ...

    def render(self, query: Query, result: RankingResult) -> str: ...


def job_options(args: argparse.Namespace, opts: RankingKeywords) -> RankingKeywords:
    """The actors' ranking options: ``opts`` (the command line's) with the backend's
    ``base_url`` and ``device`` (each actor builds its own backend)."""
    backend_options = dict(opts.get("backend_options", {}))
    if args.base_url:
        backend_options["base_url"] = args.base_url
    if args.device:
        backend_options["device"] = args.device
    return {**opts, "backend_options": backend_options}


def _result(row: RankedRow) -> RankingResult:
    order = tuple(row.order or ())
    usage = Usage(**row.usage)
    return RankingResult(
        order,
        scores_from_order(order),
        (),
        float(row.confidence or 0),
        usage,
        top_probability=row.top_probability,
        head=row.head,
        stopped=cast("StopReason", row.stopped),
    )


@contextmanager
def _ray_for(args: argparse.Namespace) -> Iterator[None]:
    """Ray for this job: the one this process already runs, else ``--ray-address`` (or
    ``RAY_ADDRESS``) joined, else a new local instance (never a cluster some other user left
    recorded in Ray's temp folder) that ends with this process (:func:`_reaper`); shut down
    after the job if it was started here."""
    # lazy: optional dependency (the ray extra)
    import ray

    if ray.is_initialized():
        yield
        return
    address = args.ray_address or os.environ.get("RAY_ADDRESS")
    reaper = _reaper() if address is None else None
    try:
        try:
            context = ray.init(
                address=address or "local",
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
            )
        finally:  # the processes that carry the mark are started
            os.environ.pop(_MARK, None)
        if reaper is not None:
            info = getattr(context, "address_info", None) or {}  # ray.init's RayContext
            _tell(reaper, info.get("session_dir") or "")
        try:
            yield
        finally:
            ray.shutdown()
    finally:
        if reaper is not None:
            _close(reaper)


_MARK = "PERMSC_RAY_JOB"


def _reaper() -> subprocess.Popen[bytes] | None:
    """Make the Ray about to start here end with this process, however it ends (Linux).

    Every process of a local Ray inherits this process's environment, marked here with a
    token until Ray has started, and holds its log files open in the session folder, which
    :func:`_tell` passes on; a reaper process waits on a pipe from this one and, once this
    process is gone (even by SIGKILL: the pipe closes) or has shut Ray down (:func:`_close`),
    kills every process that carries the mark or holds a file in that folder, never this
    process or its ancestors (this one still holds files there after ``ray.shutdown()``).
    Ray alone lets its node agents outlive a killed driver by 30 s and more (docs/scale.md).
    """
    if not os.path.isdir("/proc/self"):
        return None
    token = os.urandom(8).hex()
    env = {k: v for k, v in os.environ.items() if k != _MARK}
    code = "from permsc_integrations.cli._rank_ray import reap_marked; reap_marked()"
    reaper = subprocess.Popen(
        [sys.executable, "-c", code, token, *map(str, _lineage())], stdin=subprocess.PIPE, env=env,
        start_new_session=True,  # a Ctrl-C to this process group leaves it its work
    )  # fmt: skip
    os.environ[_MARK] = token
    return reaper


def _lineage() -> list[int]:
    """This process, then its ancestors: the reaper spares them (known here, as this process
    may be gone before the reaper has started)."""
    here = os.getpid()
    return [here, *sorted(lineage(here) - {here})]


_SESSION, _SHUT_DOWN = "session ", "shut down"
"""The reaper's messages, a line each: the session folder; Ray shut down by a live driver."""


def _tell(reaper: subprocess.Popen[bytes], session_dir: str) -> None:
    """Give the reaper the folder whose open files mark this Ray's processes too."""
    _send(reaper, _SESSION + session_dir)


def _send(reaper: subprocess.Popen[bytes], message: str) -> None:
    """One message to the reaper (a line)."""
    assert reaper.stdin is not None
    with suppress(BrokenPipeError):  # the reaper is gone: the job goes on without it
        reaper.stdin.write(message.encode() + b"\n")
        reaper.stdin.flush()


def _close(reaper: subprocess.Popen[bytes]) -> None:
    """Ray is shut down: let the reaper end what is left of it, and wait for it."""
    assert reaper.stdin is not None
    _send(reaper, _SHUT_DOWN)
    with suppress(BrokenPipeError):
        reaper.stdin.close()
    try:
        reaper.wait(10)
    except subprocess.TimeoutExpired:
        reaper.kill()


def reap_marked() -> None:
    """The reaper (see :func:`_reaper`; its arguments: the token, the driver's pid, its
    ancestors'). Once stdin closes, and the driver has died unless it said Ray was shut down,
    SIGKILL every process whose environment holds the token, or which runs Ray's Python or
    one of its programs and holds a file open in the session folder read from stdin, sparing
    the driver and its ancestors; sweep again until a sweep finds none (a node agent killed
    mid-fork leaves a child the sweep before did not list)."""
    driver, spare = int(sys.argv[2]), frozenset(int(pid) for pid in sys.argv[2:])
    messages = sys.stdin.buffer.read().decode(errors="replace").splitlines()
    while _SHUT_DOWN not in messages and alive(driver):  # the pipe closes as the driver exits
        time.sleep(0.01)
    folder = next((m[len(_SESSION) :] for m in messages if m.startswith(_SESSION)), "")
    mark, programs = f"{_MARK}={sys.argv[1]}".encode(), _ray_programs()
    for _ in range(_SWEEPS):
        found = find_processes(mark, folder or None, programs, spare)
        if not found:
            return
        for pid in found:
            with suppress(OSError):  # gone already
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _ray_programs() -> tuple[str, ...]:
    """Where the programs of a Ray started here lie: this Python, Ray's package folder."""
    ray = importlib.util.find_spec("ray")
    folders = (ray.submodule_search_locations or []) if ray is not None else []
    return tuple(os.path.realpath(path) for path in (sys.executable, *folders))


_SWEEPS = 200
"""At most this many sweeps (10 s and more): a fork loop cannot hold the reaper forever."""


def rank_queries_on_ray(
    args: argparse.Namespace,
    opts: RankingKeywords,
    queries: list[Query],
    writer: _Writer,
    on_row: Callable[[RankedRow], None],
) -> int:
    """Rank ``queries`` on Ray; write each record as it finishes; return the failures."""
    options = job_options(args, opts)
    spec = backend_spec(args)
    keys = [unit_key(q, spec, options) for q in queries]
    expected = dict(zip(keys, queries, strict=True))  # what a replayed row is checked against
    journal = Journal(args.output, args.resume, expected) if args.output != "-" else None
    job = _Job(args, queries, keys, writer, on_row, journal)
    try:
        todo = job.replay()
        if not todo:
            return 0
        with _ray_for(args):
            return job.rank(todo, spec, options)
    finally:
        if journal is not None:
            journal.close()


@dataclass(frozen=True)
class _Job:
    args: argparse.Namespace
    queries: list[Query]
    keys: list[str]  # each query's unit key (rank_journal.unit_key)
    writer: _Writer
    on_row: Callable[[RankedRow], None]
    journal: Journal | None

    def replay(self) -> list[int]:
        """Write the rows the journal holds ranked; the positions still to rank."""
        earlier = self.journal.earlier if self.journal else {}
        todo = []
        for k, query in enumerate(self.queries):
            row = earlier.get(self.keys[k])
            if row is None:
                todo.append(k)
                continue
            self.writer.put(k, _render(self.args, self.writer, query, row))
            self.on_row(row)
        if self.journal and len(todo) < len(self.queries):
            done = len(self.queries) - len(todo)
            report(f"resuming: {done} queries ranked in {self.journal.path}, no calls made")
        return todo

    def rank(self, todo: list[int], spec: str, options: RankingKeywords) -> int:
        """Rank the queries at ``todo``; each row to the journal as it comes; the failures."""
        # lazy: optional dependency (the ray extra), and start-up time of every command
        from permsc_integrations._ranker.ranker import RankRequest
        from permsc_integrations.ray import rank_rows

        q = self.queries
        requests = (RankRequest(q[k].query, q[k].texts, id=k) for k in todo)
        rows = rank_rows(
            requests,
            backend=spec,
            concurrency=self.args.actors,
            capacity_timeout=self.args.ray_capacity_timeout,
            **options,
        )
        failed = 0
        for row in rows:
            failed += self._finished(cast(int, row.key), row)  # the ids given: positions
        return failed

    def _finished(self, k: int, row: RankedRow) -> int:
        """Record one row: the journal, then the output; 1 if it failed."""
        query = self.queries[k]
        if self.journal is not None:
            self.journal.write(self.keys[k], query.qid, row)
        self.on_row(row)
        if row.error is not None:
            report(f"query {query.qid} failed: {row.error.splitlines()[0]}")
            self.writer.put(k, None)
            return 1
        self.writer.put(k, _render(self.args, self.writer, query, row))
        return 0


def _render(args: argparse.Namespace, writer: _Writer, query: Query, row: RankedRow) -> str:
    """The single process's record; its sample counts come from the row (no windows here)."""
    if args.format != "jsonl":
        return str(writer.render(query, _result(row)))
    record = {
        **to_json(query, _result(row)),
        "samples": row.samples,
        "failed_samples": row.failed_samples,
    }
    return json.dumps(record, ensure_ascii=False) + "\n"
