"""``permsc rank`` writes each query's record to ``--output`` the moment it finishes (issue 40,
item 9): a slow query holds back no other, a SIGKILLed run leaves every finished query on
disk and ``--resume`` pays only for the others; a run that ends puts the file in input order.
A real ``permsc`` process against a real loopback server whose answers for some queries are
held until the test lets them go."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from permsc_integrations.cli import main
from permsc_integrations.testing import ChatRequest, Reply, oracle_responder

pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(300)

oracle = oracle_responder(lambda text: text.count("goldfish"))


class Held:
    """A responder that answers every call at once, but those for the queries ``held`` (by
    number) only once :attr:`gate` is set."""

    def __init__(self, *held: int) -> None:
        self.held = [f"question {k} of many" for k in held]
        self.gate = threading.Event()

    async def __call__(self, request: ChatRequest) -> Reply:
        if any(question in request.text for question in self.held):
            while not self.gate.is_set():
                await asyncio.sleep(0.005)
        return oracle(request)


def write_input(path: Path, count: int) -> Path:
    rows = [
        {
            "qid": f"q{k}",
            "query": f"question {k} of many",
            "candidates": [
                {"docid": f"d{j}", "text": f"q{k} passage {j} " + "goldfish " * ((j + k) % 4)}
                for j in range(4)
            ],
        }
        for k in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def flags(server) -> list[str]:
    return ["-m", "2", "--backend", "openai:m", "--base-url", server.base_url, "--no-progress"]


def start(source: Path, out: Path, server) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "permsc_integrations.cli", "rank", "-i", str(source)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.Popen(
        [*argv, "-o", str(out), *flags(server)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def qids_on_disk(out: Path) -> list[str]:
    """The qids of the whole lines in ``out`` now."""
    text = out.read_text() if out.exists() else ""
    return [
        json.loads(line)["qid"] for line in text.splitlines(keepends=True) if line.endswith("\n")
    ]


@pytest.fixture
def held_server(scripted_server):
    servers: list[Held] = []

    def make(*held: int):
        responder = Held(*held)
        servers.append(responder)
        return scripted_server(responder), responder

    yield make
    for responder in servers:  # never leave a handler waiting
        responder.gate.set()


def test_a_slow_query_holds_back_no_other_record(held_server, tmp_path, wait_until) -> None:
    """q0's answers are held: the five others are on disk while it is pending (before: none
    until q0 was done); once it is, the file is the same as an unhindered run's."""
    server, responder = held_server(0)
    source, out = write_input(tmp_path / "in.jsonl", 6), tmp_path / "out.jsonl"
    proc = start(source, out, server)
    try:
        wait_until(lambda: len(qids_on_disk(out)) == 5, "five records on disk", timeout=120)
        assert sorted(qids_on_disk(out)) == ["q1", "q2", "q3", "q4", "q5"]
        assert server.in_flight == 2 and proc.poll() is None  # q0's two calls, still held
        responder.gate.set()
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    reference = tmp_path / "reference.jsonl"
    assert main(["rank", "-i", str(source), "-o", str(reference), *flags(server)]) == 0
    assert out.read_text() == reference.read_text()  # in input order, once the run has ended


def test_a_killed_run_keeps_every_finished_query_and_resume_pays_for_the_rest(
    held_server, tmp_path, wait_until
) -> None:
    """Eight queries, q0 and q5 held; SIGKILL once the six others are on disk (before: none
    was, and --resume paid for all eight). --resume asks only q0's and q5's calls again."""
    server, responder = held_server(0, 5)
    source, out = write_input(tmp_path / "in.jsonl", 8), tmp_path / "out.jsonl"
    proc = start(source, out, server)
    try:
        wait_until(lambda: len(qids_on_disk(out)) == 6, "six records on disk", timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert sorted(qids_on_disk(out)) == ["q1", "q2", "q3", "q4", "q6", "q7"]
    responder.gate.set()
    wait_until(lambda: server.in_flight == 0, "the held calls answered (to no one)")
    server.reset()
    assert main(["rank", "-i", str(source), "-o", str(out), "--resume", *flags(server)]) == 0
    assert server.request_count == 2 * 2  # q0's and q5's two calls each, nothing else
    reference = tmp_path / "reference.jsonl"
    assert main(["rank", "-i", str(source), "-o", str(reference), *flags(server)]) == 0
    assert out.read_text() == reference.read_text()
