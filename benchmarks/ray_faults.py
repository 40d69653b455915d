"""Faults under ``permsc rank --engine ray`` on a local multi-node Ray cluster (issue 33).

A head node with no CPUs and two worker nodes (``ray.cluster_utils.Cluster``, a small object
store each); the CLI joins it with ``--ray-address`` as a real job does; a scripted server in a
process of its own answers every call in L seconds and counts the calls. Each case starts a
fresh cluster and, once half the planned calls were made, does one thing:

- ``node``: kills one worker node (SIGKILL, no drain). Expected: rc 0, every row once and right.
- ``capacity``: kills both worker nodes. Expected: a non-zero exit that says so, in bounded time.
- ``driver``: SIGKILLs the driver; counts the calls made after the kill and the job's Ray
  processes still alive 30 s later; then reruns with ``--resume`` and counts what both paid.
  ``driver-own-ray``: the same with no cluster, the driver starting Ray itself.
- ``interrupt``: SIGINT (Ctrl-C) to the driver.

Run: ``nice -n 10 .venv/bin/python benchmarks/ray_faults.py`` (about 8 minutes at the issue's
scale: 1,000 queries x 8 items, m = 5, L = 1 s, 200 calls in flight, 4 actors);
``--queries 200 --latency 0.5`` for a quick look. Writes the "ray-faults" section of
docs/benchmarks.md (``--no-write``: print only; ``--append``: after the runs already there, as
for a *before* run of the previous code with ``--label before``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import RankingOptions  # noqa: E402
from permsc_integrations.testing import Reply, ScriptedOpenAIServer, oracle_responder  # noqa: E402
from permsc_integrations.testing._ray_cluster import (  # noqa: E402
    local_ray_cluster,
    processes_with,
    reap,
)


def relevance(text: str) -> float:
    return text.count("x")


def queries(n: int, items: int) -> list[dict[str, Any]]:
    """Query k's item j says 'x' (3j + k) % items times: the right order differs by query."""
    return [
        {
            "qid": f"q{k}",
            "query": f"question {k}",
            "candidates": [
                {"docid": f"d{j}", "text": f"q{k} item {j} " + "x" * ((3 * j + k) % items)}
                for j in range(items)
            ],
        }
        for k in range(n)
    ]


@dataclass
class Run:
    """One driver process: its command, its output file and what happened to it."""

    cmd: list[str]
    output: Path
    proc: subprocess.Popen[str] | None = None
    rc: int | None = None
    stderr: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    def start(self) -> Run:
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        return self

    def wait(self, timeout: float) -> int | None:
        """The exit status, or None if still running after ``timeout`` s (then killed)."""
        assert self.proc is not None
        try:
            _, self.stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate()
            return None
        self.rc = self.proc.returncode
        return self.rc


@contextmanager
def server_process(latency: float) -> Iterator[tuple[str, Any]]:
    """The scripted server in its own process; yields its URL and a shared call counter."""
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("q", 0)
    oracle = oracle_responder(relevance)

    def respond(request: Any) -> Reply:
        with counter.get_lock():
            counter.value += 1
        return Reply(oracle(request).text, delay=latency)

    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(respond, child), daemon=True)
    proc.start()
    try:
        yield parent.recv(), counter
    finally:
        proc.terminate()
        proc.join(5)


def _serve(responder: Callable[[Any], Reply], conn: Any) -> None:
    import threading

    with ScriptedOpenAIServer(responder) as server:
        conn.send(server.base_url)
        threading.Event().wait()


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def check_output(path: Path, data: list[dict[str, Any]]) -> dict[str, int]:
    """Rows written, duplicated, wrong (order not the oracle's) and missing."""
    expected = {
        q["qid"]: sorted(
            range(len(q["candidates"])), key=lambda j: -relevance(q["candidates"][j]["text"])
        )
        for q in data
    }
    seen: dict[str, int] = {}
    wrong = 0
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        record = json.loads(line)
        seen[record["qid"]] = seen.get(record["qid"], 0) + 1
        wrong += record.get("order") != expected[record["qid"]] and not record.get("error")
    return {
        "rows": len(lines),
        "duplicated": sum(n - 1 for n in seen.values()),
        "wrong": wrong,
        "missing": len(set(expected) - set(seen)),
    }


@dataclass
class Bench:
    args: argparse.Namespace
    url: str
    counter: Any
    workdir: Path
    data: list[dict[str, Any]]
    planned: int

    @property
    def calls(self) -> int:
        return int(self.counter.value)

    def driver(self, address: str | None, output: Path, *extra: str) -> Run:
        a = self.args
        cmd = [
            sys.executable, "-m", "permsc_integrations.cli", "rank",
            "-i", str(self.workdir / "in.jsonl"), "-o", str(output), "--engine", "ray",
            *(["--ray-address", address] if address else []), "--actors", str(a.actors),
            "--max-concurrency", str(a.budget), "-m", str(a.m), "--backend", "openai:bench",
            "--base-url", self.url, "--no-progress", *a.extra.split(), *extra,
        ]  # fmt: skip
        return Run(cmd, output).start()

    def at_half(self, run: Run, since: int) -> bool:
        """Wait until half the planned calls were made after ``since`` calls (False if the
        driver ended first)."""
        assert run.proc is not None
        return (
            wait_for(
                lambda: self.calls - since >= self.planned // 2 or run.proc.poll() is not None, 600
            )
            and run.proc.poll() is None
        )


def case_node(bench: Bench, cluster: Any) -> dict[str, Any]:
    """One worker node killed at half: the job should finish, every row once and right."""
    before = bench.calls
    run = bench.driver(cluster.address, bench.workdir / "node.jsonl")
    bench.at_half(run, before)
    cluster.kill_workers(1)
    began = time.monotonic()
    rc = run.wait(bench.args.deadline)
    return {
        "rc": "hang" if rc is None else rc,
        "after fault (s)": round(time.monotonic() - began, 1),
        "calls / planned": round((bench.calls - before) / bench.planned, 3),
        **check_output(run.output, bench.data),
        "message": _last_line(run.stderr),
    }


def case_capacity(bench: Bench, cluster: Any) -> dict[str, Any]:
    """Both worker nodes killed at half: the job should fail, in bounded time, saying why."""
    run = bench.driver(cluster.address, bench.workdir / "capacity.jsonl")
    bench.at_half(run, bench.calls)
    cluster.kill_workers(2)
    began = time.monotonic()
    rc = run.wait(bench.args.deadline)
    return {
        "rc": "hang" if rc is None else rc,
        "after fault (s)": round(time.monotonic() - began, 1),
        **check_output(run.output, bench.data),
        "message": _last_line(run.stderr),
    }


def case_driver(bench: Bench, cluster: Any) -> dict[str, Any]:
    """The driver SIGKILLed at half: calls after the kill, Ray processes left 30 s later; then
    ``--resume``: every row once and right, and what both runs paid. Without a cluster, the
    driver starts Ray itself (no ``--ray-address``)."""
    address = cluster.address if cluster is not None else None
    output = bench.workdir / f"driver-{'cluster' if address else 'own'}.jsonl"
    processes = cluster.processes if cluster else lambda: processes_with(os.environ["RAY_TMPDIR"])
    existing = processes()
    before = bench.calls
    run = bench.driver(address, output)
    bench.at_half(run, before)
    assert run.proc is not None
    run.proc.send_signal(signal.SIGKILL)
    at_kill = bench.calls
    run.wait(30)
    time.sleep(30)
    after_kill = bench.calls - at_kill
    left = {p: t for p, t in processes().items() if p not in existing}
    written = check_output(output, bench.data)["rows"]
    resumed = bench.driver(address, output, "--resume")
    rc = resumed.wait(bench.args.deadline)
    return {
        "calls after kill": after_kill,
        "Ray processes 30 s later": f"{len(left)} {sorted(set(left.values()))}",
        "rows at kill": written,
        "resume rc": "hang" if rc is None else rc,
        "calls / planned (both runs)": round((bench.calls - before) / bench.planned, 3),
        "extra calls": bench.calls - before - bench.planned,
        **check_output(output, bench.data),
        "message": _last_line(resumed.stderr),
    }


def case_interrupt(bench: Bench, cluster: Any) -> dict[str, Any]:
    """Ctrl-C (SIGINT) to the driver at half: its exit status and time, the calls after it."""
    output = bench.workdir / "interrupt.jsonl"
    existing = cluster.processes()
    run = bench.driver(cluster.address, output)
    bench.at_half(run, bench.calls)
    assert run.proc is not None
    run.proc.send_signal(signal.SIGINT)
    at_signal, began = bench.calls, time.monotonic()
    rc = run.wait(60)
    exited = time.monotonic() - began
    time.sleep(30)
    left = {p: t for p, t in cluster.processes().items() if p not in existing}
    return {
        "rc": "hang" if rc is None else rc,
        "exit after (s)": round(exited, 1),
        "calls after SIGINT": bench.calls - at_signal,
        "Ray processes 30 s later": f"{len(left)} {sorted(set(left.values()))}",
        **check_output(output, bench.data),
        "message": _last_line(run.stderr),
    }


CASES: dict[str, tuple[Callable[[Bench, Any], dict[str, Any]], bool]] = {
    "node": (case_node, True),  # (the case, whether it runs on the 3-node cluster)
    "capacity": (case_capacity, True),
    "driver": (case_driver, True),
    "driver-own-ray": (case_driver, False),
    "interrupt": (case_interrupt, True),
}


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def run_cases(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    data = queries(args.queries, args.items)
    planned = args.queries * RankingOptions(num_permutations=args.m).plan(args.items).calls.high
    results = []
    with tempfile.TemporaryDirectory() as tmp, server_process(args.latency) as (url, counter):
        workdir = Path(tmp)
        (workdir / "in.jsonl").write_text("".join(json.dumps(q) + "\n" for q in data))
        bench = Bench(args, url, counter, workdir, data, planned)
        for name in args.cases.split(","):
            case, on_cluster = CASES[name]
            for _ in range(args.repeat):
                cluster = local_ray_cluster(2, args.worker_cpus) if on_cluster else nullcontext()
                with cluster as running:
                    result = case(bench, running)
                results.append((name, result))
                sys.stdout.write(f"{name}: {json.dumps(result)}\n")
                sys.stdout.flush()
                left = reap(os.environ["RAY_TMPDIR"])  # the driver's own Ray, if it started one
                if left:
                    sys.stdout.write(f"  killed, left after the case: {left}\n")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("-m", type=int, default=5)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--actors", type=int, default=4)
    ap.add_argument("--worker-cpus", type=int, default=2)
    ap.add_argument("--cases", default="node,capacity,driver,driver-own-ray,interrupt")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=240.0, help="s to wait after a fault")
    ap.add_argument("--extra", default="", help="more permsc rank flags")
    ap.add_argument("--label", default="", help="a name for this run in the section")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--append", action="store_true", help="add this run to the section (before and after)"
    )
    args = ap.parse_args()
    results = run_cases(args)
    if not args.no_write:
        body = report(args, results)
        body = _section_body("ray-faults") + "\n\n" + body if args.append else HEADING + body
        write_section("ray-faults", body)


HEADING = (
    "## Ray under faults (issue 33): a local 3-node cluster, `permsc rank --engine ray`\n\n"
    'Each fault once half the planned calls were made; docs/scale.md "What survives what" '
    "reads them. A *before* run is this script run against an export of the earlier code "
    "(`PYTHONPATH=<export>`, with `testing/_ray_cluster.py` copied in).\n\n"
)


def _section_body(name: str) -> str:
    """The runs already in the section ``name`` of docs/benchmarks.md (its machine and
    command lines left out: write_section adds this run's)."""
    import re

    from _report import DOC

    found = re.search(f"<!-- BEGIN {name} -->\n(.*?)\n\nMachine: ", DOC.read_text(), re.S)
    return found.group(1) if found else ""


def report(args: argparse.Namespace, results: list[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        f"{args.label or 'this code'}: {args.queries} queries x {args.items} items, m = {args.m}, "
        f"L = {args.latency} s, {args.budget} calls in flight, {args.actors} actors, a head "
        f"with no CPUs and 2 worker nodes of {args.worker_cpus} CPUs.",
        "",
    ]
    for name, result in results:
        lines.append(f"- **{name}**: " + ", ".join(f"{k} {v}" for k, v in result.items()))
    return "\n".join(lines)


if __name__ == "__main__":
    # Ray's address file and sockets in a folder of this run's own: ray.init() elsewhere on
    # the machine does not find this run's clusters, and its processes can be told apart
    with tempfile.TemporaryDirectory(prefix="rf", dir="/tmp") as ray_tmp:
        os.environ["RAY_TMPDIR"] = ray_tmp
        main()
