"""``permsc rank --engine ray`` run as a command, in every way it can find its Ray: started by
the command itself (no address: the reaper's case), ``--ray-address``, ``RAY_ADDRESS`` (as
``ray job submit`` sets it), and a process that already runs Ray calling the CLI's ``main``.
Each exits 0 with every row written for a good run, and 2 with the summary for a run whose
every query fails (an upstream answering garbage, or 500), against the scripted loopback
server. A Ray started by the command leaves none of its processes behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from permsc_integrations.cli._rank_journal import SUFFIX  # noqa: E402
from permsc_integrations.testing import Fault, oracle_responder  # noqa: E402
from permsc_integrations.testing._ray_cluster import (  # noqa: E402
    LocalRayCluster,
    local_ray_cluster,
    processes_with,
    reap,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

QUERIES, ITEMS = 3, 4
SMALL_STORE = "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION"  # for a Ray the command starts
CLI = ["-m", "permsc_integrations.cli"]
IN_PROCESS = (  # a program that runs Ray already, then the CLI's main
    "import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False); "
    "from permsc_integrations.cli import main; sys.exit(main(sys.argv[2:]))"
)


def relevance(text: str) -> float:
    return text.count("x")


def write_input(path: Path) -> list[dict]:
    lines = [
        {
            "qid": f"q{k}",
            "query": f"question {k}",
            "candidates": [
                {"docid": f"d{j}", "text": f"q{k} item {j} " + "x" * ((j + k) % ITEMS)}
                for j in range(ITEMS)
            ],
        }
        for k in range(QUERIES)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


RESPONDERS = {
    "good": oracle_responder(relevance),
    "garbage": lambda request: "I would rather not rank these.",
    "500": lambda request: Fault.status(500, retry_after=0.0),  # retried at once
}


class Run:
    """One ``permsc rank --engine ray`` in a process of its own; its status, stderr, files."""

    def __init__(self, scripted_server, tmp_path: Path, answers: str) -> None:
        self.server = scripted_server(RESPONDERS[answers])
        self.source, self.output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        self.lines = write_input(self.source)

    def argv(self, *flags: str) -> list[str]:
        return [
            "rank", "-i", str(self.source), "-o", str(self.output), "--engine", "ray",
            "--actors", "1", "--max-concurrency", "4", "-m", "2", "--backend", "openai:m",
            "--base-url", self.server.base_url, "--no-progress", *flags,
        ]  # fmt: skip

    def __call__(self, prefix: list[str], *flags: str, env: dict[str, str]) -> tuple[int, str]:
        done = subprocess.run(
            [sys.executable, *prefix, *self.argv(*flags)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, timeout=240,
        )  # fmt: skip
        return done.returncode, done.stderr

    def assert_complete(self, rc: int, err: str) -> None:
        assert rc == 0, err
        records = [json.loads(line) for line in self.output.read_text().splitlines()]
        assert [r["qid"] for r in records] == [line["qid"] for line in self.lines]  # in order
        for record, line in zip(records, self.lines, strict=True):
            texts = [c["text"] for c in line["candidates"]]
            right = sorted(range(ITEMS), key=lambda j: -relevance(texts[j]))
            assert [d["docid"] for d in record["ranking"]] == [f"d{j}" for j in right]

    def assert_all_failed(self, rc: int, err: str) -> None:
        assert rc == 2, err
        assert f"ranked 0 of {QUERIES} queries; 0 bad lines, {QUERIES} failed" in err, err
        assert self.output.read_text() == ""
        journal = Path(f"{self.output}{SUFFIX}").read_text().splitlines()
        assert sorted(json.loads(line)["qid"] for line in journal) == ["q0", "q1", "q2"]
        assert all(json.loads(line)["error"] for line in journal)


def _env(**changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")}
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


@pytest.fixture
def ray_here() -> Iterator[str]:
    """A Ray folder of its own for a Ray the command starts (short: Ray's socket paths are
    long); whatever of that Ray is left is killed afterwards."""
    tmpdir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    try:
        yield tmpdir
    finally:
        reap(tmpdir, grace=0)
        shutil.rmtree(tmpdir, ignore_errors=True)


@pytest.mark.parametrize("answers", ["good", "500"])
def test_a_ray_the_command_starts_exits_0_or_2_and_leaves_nothing(
    scripted_server, tmp_path, ray_here, answers, wait_until
) -> None:
    run = Run(scripted_server, tmp_path, answers)
    rc, err = run(CLI, env=_env(RAY_TMPDIR=ray_here, **{SMALL_STORE: "0.01"}))
    if answers == "good":
        run.assert_complete(rc, err)
    else:
        run.assert_all_failed(rc, err)

    def nothing_left() -> bool:
        """no process of the command's Ray is alive"""
        return not processes_with(ray_here)

    wait_until(nothing_left, timeout=30, every=0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with local_ray_cluster(workers=1, worker_cpus=1) as running:
        yield running


WAYS = {  # how the command is told of the cluster: (its argv prefix, flags, environment)
    "--ray-address": lambda c: (CLI, ["--ray-address", c.address], {}),
    "RAY_ADDRESS": lambda c: (CLI, [], {"RAY_ADDRESS": c.address}),
    "ray.init() first": lambda c: (["-c", IN_PROCESS, c.address], [], {}),
}


@pytest.mark.parametrize("answers", ["good", "garbage"])
@pytest.mark.parametrize("way", list(WAYS))
def test_on_a_cluster_it_exits_0_or_2_however_it_is_told_where(
    cluster, scripted_server, tmp_path, way, answers
) -> None:
    prefix, flags, env = WAYS[way](cluster)
    run = Run(scripted_server, tmp_path, answers)
    rc, err = run(prefix, *flags, env=_env(RAY_TMPDIR=cluster.tmpdir, **env))
    if answers == "good":
        run.assert_complete(rc, err)
    else:
        run.assert_all_failed(rc, err)
