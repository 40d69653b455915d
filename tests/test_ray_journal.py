"""The pieces of a Ray job that survives faults, without starting Ray: the unit key that makes
a row's work idempotent, the journal that keeps every finished row (failed ones with what they
spent), a resume that pays nothing for a journaled row, the watchdog's deadline, the admission
that lets rows finish one after another, and an actor process that ends with its parent.
The same on a real multi-node cluster: tests/test_ray_faults.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from permsc_integrations import PSCRanker, RankRequest
from permsc_integrations.cli import build_parser, main
from permsc_integrations.cli._common import Query, backend_spec, ranker_options
from permsc_integrations.cli._rank_journal import SUFFIX, Journal, unit_key
from permsc_integrations.cli._rank_ray import job_options
from permsc_integrations.errors import InsufficientSamplesError
from permsc_integrations.ray._actors import RankedRow
from permsc_integrations.ray._rows import Watchdog, _Admission
from permsc_integrations.results import Usage
from permsc_integrations.testing import oracle_responder


def goldfish(text: str) -> float:
    return text.count("goldfish")


def write_queries(path, n: int) -> list[Query]:
    lines = []
    for k in range(n):
        texts = [f"q{k} passage {j} " + "goldfish " * ((j + k) % 4) for j in range(4)]
        candidates = [{"docid": f"d{j}", "text": t} for j, t in enumerate(texts)]
        lines.append({"qid": f"q{k}", "query": f"question {k}", "candidates": candidates})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return [
        Query(o["qid"], o["query"], tuple(c["text"] for c in o["candidates"]),
              tuple(c["docid"] for c in o["candidates"]),
              tuple(o["candidates"]), False)
        for o in lines
    ]  # fmt: skip


QUERY = Query("q1", "goldfish?", ("a", "b goldfish"), ("d1", "d2"), ("a", "b goldfish"), False)


def test_the_unit_key_names_what_changes_an_answer_and_nothing_else() -> None:
    base = unit_key(QUERY, "openai:m", {"num_permutations": 5, "seed": 0})
    same = {"num_permutations": 5, "seed": 0, "max_concurrency": 7, "timeout": 3.0}
    assert unit_key(QUERY, "openai:m", same) == base  # how a row is run, not what it answers
    other_query = Query("q1", "other", QUERY.texts, QUERY.docids, QUERY.items, False)
    other_docids = Query("q1", QUERY.query, QUERY.texts, ("x1", "x2"), QUERY.items, False)
    changed = [
        unit_key(QUERY, "openai:m", {"num_permutations": 6, "seed": 0}),
        unit_key(QUERY, "openai:m", {"num_permutations": 5, "seed": 1}),
        unit_key(QUERY, "openai:other", {"num_permutations": 5, "seed": 0}),
        unit_key(other_query, "openai:m", {"num_permutations": 5, "seed": 0}),
        unit_key(other_docids, "openai:m", {"num_permutations": 5, "seed": 0}),  # the record's
    ]
    assert base not in changed and len(set(changed)) == 5


def test_the_journal_keeps_ranked_and_failed_rows_and_resumes_the_ranked(tmp_path) -> None:
    output = str(tmp_path / "out.jsonl")
    ranked = RankedRow(0, (1, 0), (0.5, 1.0), 0.9, 5, 0, {"calls": 5}, None)
    error = InsufficientSamplesError(1, 3, [])
    error.usage = Usage(calls=4, prompt_tokens=40)  # as the ranker sets it on its way out
    failed = RankedRow.of(1, error)
    with Journal(output, resume=False) as journal:
        journal.write("key-a", "qa", ranked)
        journal.write("key-b", "qb", failed)
    lines = [
        json.loads(line) for line in (tmp_path / f"out.jsonl{SUFFIX}").read_text().splitlines()
    ]
    assert lines[1]["qid"] == "qb" and lines[1]["order"] is None
    assert lines[1]["usage"]["calls"] == 4 and lines[1]["usage"]["prompt_tokens"] == 40
    assert "InsufficientSamplesError" in lines[1]["error"]  # the calls a failure spent, kept
    path = tmp_path / f"out.jsonl{SUFFIX}"
    path.write_bytes(path.read_bytes() + b'{"qid": "qc", "key": "key-c", "ord')  # a crash
    qa = Query("qa", "query", ("a", "b"), ("d1", "d2"), ("a", "b"), False)
    qb = Query("qb", "query", ("a", "b"), ("d1", "d2"), ("a", "b"), False)
    expected = {"key-a": qa, "key-b": qb, "key-c": qb}  # this run's queries by their keys
    with Journal(output, resume=True, expected=expected) as journal:
        assert set(journal.earlier) == {"key-a"}  # the failed row is ranked again
        assert journal.earlier["key-a"].order == (1, 0)
        assert journal.earlier["key-a"].usage["calls"] == 5
    assert path.read_bytes().endswith(b"\n")  # the torn line is cut
    with Journal(output, resume=False) as journal:  # a new run starts a new journal
        assert journal.earlier == {}
    assert path.read_text() == ""


def _journaled(server, tmp_path) -> tuple[list[str], Path, list[str]]:
    """Five queries' rows in the journal as the Ray engine writes them (q3 first, then q0, q4,
    q1, q2): the resuming command line, the journal, its lines."""
    source, there = tmp_path / "in.jsonl", tmp_path / "there.jsonl"
    queries = write_queries(source, 5)
    common = ["-m", "3", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]
    argv = ["rank", "-i", str(source), "-o", str(there), "--engine", "ray", "--resume", *common]
    args = build_parser().parse_args(argv)
    options = job_options(args, ranker_options(args, backend_spec(args)))
    with PSCRanker(backend_spec(args), **options) as ranker:
        results = ranker.rank_many([RankRequest(q.query, q.texts) for q in queries])
    with Journal(str(there), resume=False) as journal:
        for k in (3, 0, 4, 1, 2):  # as rows finish: in any order
            row = RankedRow.of(k, results[k])
            journal.write(unit_key(queries[k], backend_spec(args), options), queries[k].qid, row)
    path = Path(str(there) + SUFFIX)
    server.reset()
    return argv, path, path.read_text().splitlines(keepends=True)


def test_a_resume_pays_nothing_for_rows_the_journal_holds(scripted_server, tmp_path) -> None:
    """The journal as the Ray engine writes it (the CLI's own unit keys and options), every
    row in it: --resume writes what the single process writes, with no call and no Ray."""
    server = scripted_server(oracle_responder(goldfish))
    argv, _, _ = _journaled(server, tmp_path)
    here = tmp_path / "here.jsonl"
    common = ["-m", "3", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]
    assert main(["rank", "-i", str(tmp_path / "in.jsonl"), "-o", str(here), *common]) == 0
    server.reset()
    assert main(argv) == 0
    assert server.request_count == 0
    assert (tmp_path / "there.jsonl").read_text() == here.read_text()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def _tampered(line: str, **fields: object) -> str:
    return json.dumps({**json.loads(line), **fields}) + "\n"


JOURNAL_FAULTS = {  # what is done to the journal's lines, and what the error names
    "not JSON": ({1: '{"qid": "q0", "ke\n'}, "line 2: not a journal row"),
    "no key": ({1: '{"qid": "q0", "error": null}\n'}, "line 2: not a journal row"),
    "an order not a permutation": (
        {2: lambda line: _tampered(line, order=[0, 0, 1, 2])},
        "line 3: the row of qid 'q4' does not fit its query ('order' does not hold each of "
        "its 4 candidates once)",
    ),
    "an order too short": (
        {0: lambda line: _tampered(line, order=[1, 0])},
        "line 1: the row of qid 'q3' does not fit its query ('order'",
    ),
    "scores of another length": (
        {0: lambda line: _tampered(line, scores=[1.0])},
        "line 1: the row of qid 'q3' does not fit its query ('scores' is not 4 numbers)",
    ),
    "another qid": (
        {3: lambda line: _tampered(line, qid="q2")},
        "line 4: the row of qid 'q1' does not fit its query (its qid is not 'q1')",
    ),
    "usage not counts": (
        {4: lambda line: _tampered(line, usage={"calls": "three"})},
        "line 5: the row of qid 'q2' does not fit its query ('usage' is not counts by name)",
    ),
}


@pytest.mark.parametrize("fault", JOURNAL_FAULTS)
def test_a_corrupt_or_tampered_journal_stops_resume_before_any_call(
    scripted_server, tmp_path, capsys, fault
) -> None:
    """Before: a traceback (bad JSON, a missing key), or the tampered row replayed as it was
    (exit 0, a record whose order is not a ranking of its query)."""
    server = scripted_server(oracle_responder(goldfish))
    argv, path, lines = _journaled(server, tmp_path)
    edits, message = JOURNAL_FAULTS[fault]
    for at, edit in edits.items():
        lines[at] = edit(lines[at]) if callable(edit) else edit
    path.write_text("".join(lines))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert "so it is not replayed" in err or "not a journal row" in err
    assert server.request_count == 0 and path.read_text() == "".join(lines)
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def test_the_watchdog_expires_only_after_timeout_with_no_live_actor() -> None:
    dog = Watchdog(10.0, since=0.0)  # the job starts with no actor alive yet
    assert not dog.expired(alive=False, now=10.0)
    assert dog.expired(alive=False, now=10.5)  # never one alive: no capacity from the start
    dog = Watchdog(10.0, since=0.0)
    assert not dog.expired(alive=True, now=5.0)
    assert not dog.expired(alive=False, now=50.0)  # the last one lost at 50 s: the clock restarts
    assert not dog.expired(alive=False, now=59.0)
    assert not dog.expired(alive=True, now=59.5)  # a new one: no deadline
    assert not dog.expired(alive=False, now=65.0)
    assert dog.expired(alive=False, now=75.5)


def test_admission_lets_a_few_rows_run_at_a_time_in_order() -> None:
    """Rows needing 5 calls each under an actor budget of 10: at most two under way, started
    in order, so each finishes early rather than all at the end together."""

    async def run() -> tuple[list[int], int]:
        admission = _Admission(10)
        started: list[int] = []
        under_way, most = 0, 0
        gates = [asyncio.Event() for _ in range(8)]

        async def row(k: int) -> None:
            nonlocal under_way, most
            async with admission(5):
                started.append(k)
                under_way += 1
                most = max(most, under_way)
                await gates[k].wait()
                under_way -= 1

        tasks = [asyncio.ensure_future(row(k)) for k in range(8)]
        for k in range(8):
            while k not in started:
                await asyncio.sleep(0)
            gates[k].set()
        await asyncio.gather(*tasks)
        assert admission.held == 0
        return started, most

    started, most = asyncio.run(run())
    assert started == list(range(8)) and most == 2


def test_a_process_ends_as_soon_as_its_parent_is_gone(tmp_path, until) -> None:
    """A parent (standing in for a raylet) starts a child that calls exit_with_parent, and is
    SIGKILLed: the child ends (it would otherwise sleep for a minute)."""
    child = textwrap.dedent(
        """
        import sys, time
        from permsc_integrations.ray._actors import exit_with_parent
        exit_with_parent()
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    parent = textwrap.dedent(
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", {child!r}], stdout=subprocess.PIPE)
        child.stdout.readline()
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def child_gone() -> bool:
        """the child has ended"""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as stat:  # ended, not yet reaped by init
            return stat.read().split()[2] == "Z"

    asyncio.run(until(child_gone, timeout=10))
