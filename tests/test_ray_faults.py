"""``permsc rank --engine ray`` under faults on a local multi-node Ray cluster (a head with no
CPUs, two worker nodes), the CLI joining it with ``--ray-address`` in a process of its own, as
a job does; the scripted loopback server counts the calls. Scaled down from docs/scale.md's
measurements (benchmarks/ray_faults.py: 1,000 queries, L = 1 s, 200 in flight): 40 queries of
4 items, m = 3, L = 0.2 s, 8 calls in flight, 2 actors. Each fault is made once half the
planned calls were made:

- a worker node lost: the job finishes, every row once and right;
- both lost: exit 2 with a message, the rows written valid;
- the driver SIGKILLed: at most one budget of calls after it, its actors gone; ``--resume``
  completes every row once, both runs paying at most the plan plus one budget;
- a driver that started Ray itself (no ``--ray-address``) SIGKILLed: the same for its calls,
  and every process of its Ray gone within 30 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

ray = pytest.importorskip("ray")

from permsc_integrations.testing import Reply, oracle_responder  # noqa: E402
from permsc_integrations.testing.ray_cluster import (  # noqa: E402
    local_ray_cluster,
    processes_with,
    reap,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

QUERIES, ITEMS, M, LATENCY, BUDGET = 40, 4, 3, 0.2, 8
PLANNED = QUERIES * M  # one window of 4 items: m calls a query
SMALL_STORE = "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"  # for a Ray the driver starts


def relevance(text: str) -> float:
    return text.count("x")


@pytest.fixture(scope="module")
def cluster():
    with local_ray_cluster(workers=2, worker_cpus=1) as running:
        yield running


@pytest.fixture
def workers(cluster):
    """The cluster with two live worker nodes (a test before may have killed some)."""
    while len(cluster.workers) < 2:
        cluster.add_worker()
    return cluster


@pytest.fixture
def job(scripted_server, tmp_path):
    oracle = oracle_responder(relevance)
    server = scripted_server(lambda request: Reply(oracle(request).text, delay=LATENCY))
    source = tmp_path / "in.jsonl"
    lines = [
        {
            "qid": f"q{k}",
            "query": f"question {k}",
            "candidates": [
                {"docid": f"d{j}", "text": f"q{k} item {j} " + "x" * ((3 * j + k) % ITEMS)}
                for j in range(ITEMS)
            ],
        }
        for k in range(QUERIES)
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return Job(server, source, tmp_path / "out.jsonl", lines)


class Job:
    def __init__(self, server, source, output, lines) -> None:
        self.server, self.source, self.output, self.lines = server, source, output, lines
        self.env: dict[str, str] | None = None  # the driver's environment (None: ours)

    def start(self, *flags: str) -> subprocess.Popen:
        cmd = [
            sys.executable, "-m", "permsc_integrations.cli", "rank", "-i", str(self.source),
            "-o", str(self.output), "--engine", "ray", "--actors", "2",
            "--max-concurrency", str(BUDGET), "-m", str(M), "--backend", "openai:m",
            "--base-url", self.server.base_url, "--no-progress", *flags,
        ]  # fmt: skip
        return subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=self.env
        )

    def at_half(self, proc: subprocess.Popen, until) -> None:
        def half() -> bool:
            """half the planned calls were made"""
            assert proc.poll() is None, proc.stderr.read()
            return self.server.request_count >= PLANNED // 2

        asyncio.run(until(half, timeout=120))

    def rows(self) -> dict[str, dict]:
        """The output's records by qid, each once and right."""
        by_qid: dict[str, dict] = {}
        for line in self.output.read_text().splitlines():
            record = json.loads(line)
            assert record["qid"] not in by_qid, f"{record['qid']} written twice"
            by_qid[record["qid"]] = record
        for line in self.lines:
            if line["qid"] in by_qid:
                texts = [c["text"] for c in line["candidates"]]
                right = sorted(range(ITEMS), key=lambda j: -relevance(texts[j]))
                assert by_qid[line["qid"]]["order"] == right, line["qid"]
        return by_qid


def test_one_worker_node_lost_the_job_finishes(workers, job, until) -> None:
    proc = job.start("--ray-address", workers.address)
    job.at_half(proc, until)
    workers.kill_workers(1)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert len(job.rows()) == QUERIES
    assert job.server.request_count <= PLANNED + 2 * BUDGET  # the lost actor's rows, again


def test_no_capacity_left_fails_with_a_message(workers, job, until) -> None:
    proc = job.start("--ray-address", workers.address, "--ray-capacity-timeout", "5")
    job.at_half(proc, until)
    workers.kill_workers(2)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 2
    assert "no ranking actor could run for 5 s" in err and "--resume" in err
    assert len(job.rows()) < QUERIES  # what was written stays valid: once and right


def actors_of(tmpdir: str) -> list[str]:
    return [name for name in processes_with(tmpdir).values() if "_RowsActor" in name]


def kill_driver(job: Job, until, tmpdir: str, *flags: str) -> int:
    """SIGKILL the driver at half; wait for its actors to end; the calls made after the kill."""
    proc = job.start(*flags)
    job.at_half(proc, until)
    assert actors_of(tmpdir)
    proc.send_signal(signal.SIGKILL)
    at_kill = job.server.request_count
    proc.wait()

    def actors_gone() -> bool:
        """none of the job's actors is alive"""
        return not actors_of(tmpdir)

    asyncio.run(until(actors_gone, timeout=30))
    return job.server.request_count - at_kill


def test_a_killed_driver_takes_its_actors_and_resume_pays_once(workers, job, until) -> None:
    flags = ("--ray-address", workers.address)
    assert kill_driver(job, until, workers.tmpdir, *flags) <= BUDGET
    resumed = job.start("--resume", *flags)
    _, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err
    assert len(job.rows()) == QUERIES
    assert job.server.request_count <= PLANNED * 1.05 + BUDGET  # both runs


def test_a_killed_driver_that_started_ray_takes_it_all(job, until) -> None:
    """No cluster: the driver starts Ray itself (in a folder of its own, with a small object
    store), and is SIGKILLed."""
    tmpdir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths are long
    job.env = {**os.environ, "RAY_TMPDIR": tmpdir, SMALL_STORE: "0.01"}
    job.env.pop("RAY_ADDRESS", None)
    try:
        assert kill_driver(job, until, tmpdir) <= BUDGET

        left: dict[int, str] = {}

        def all_gone() -> bool:
            """no process of the driver's Ray is alive (its node agents included)"""
            left.clear()
            left.update(processes_with(tmpdir))
            return not left

        try:
            asyncio.run(until(all_gone, timeout=30))
        except pytest.fail.Exception:
            pytest.fail(f"alive 30 s after the driver was killed: {left}")
    finally:
        reap(tmpdir)
        shutil.rmtree(tmpdir, ignore_errors=True)
