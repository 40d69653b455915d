"""The re-pack's hot paths (issue 37), before and after, side by side in one run.

``--old`` is a checkout of main before the re-pack (``git worktree add /tmp/base-bench
0c52f86``); the working tree is *after*. Every figure is measured in fresh child interpreters
with ``PYTHONPATH`` set to one tree, the trees alternating round by round (old, new, then
new, old, ...) so that the load of this shared machine falls on both alike; a figure is the median
over the rounds, with the rounds' spread (min..max), and the table gives after / before.

* *engine CPU per call*: an in-process backend that answers every call at once (no HTTP, as
  in ``benchmarks/engine_versions.py``), the process's CPU time (every thread's: the rounds'
  consensus runs in a worker) per call: a 100-item request (blocks, m = 20, Borda: 120 calls,
  5 times) and 50 one-window lists of 10 items (m = 20, Kemeny, ``arank_many``: 1,000 calls).
  Borda for the 100 items: under Kemeny its consensus runs the solver's time-limited
  heuristic (a 100-item round), whose CPU is set by the time limit and the load, not the code;
* *aggregation*: ``aggregate(rankings, method=...)`` over 20 noisy rankings of 50 items
  (adjacent swaps of one order, fixed seeds), Kemeny, Borda and RRF: ms per call, the median
  of repeats within the child;
* *import*: wall time of ``python -c "import permsc_integrations"`` minus that of
  ``python -c pass`` (the bare interpreter, run beside it), median of fresh interpreters;
* *request path*: the functions entered from ``arank`` to the first model call of a 50-item
  request (blocks, m = 2, window 10), as ``benchmarks/request_path.py`` counts them (its
  trace, run once per tree: it is a count, not a timing).

    python benchmarks/repack_hot_paths.py --old /tmp/base-bench [--rounds 5] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _child import PRELUDE
from _report import write_section
from request_path import figures, trace

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "0c52f86"

ENGINE = PRELUDE + r"""
async def cpu(fn):
    began = time.process_time()
    calls = await fn()
    return 1000 * (time.process_time() - began) / calls

async def main():
    out = {}
    kw = dict(num_permutations=20, aggregator="borda", max_concurrency=4096)
    async with PSCRanker(Instant(), **kw) as ranker:
        await ranker.arank("warm-up", texts(100, 0))
        async def request():
            return sum([(await ranker.arank("q", texts(100, s))).usage.calls for s in range(1, 6)])
        out["engine: a 100-item request, blocks, m = 20, Borda (120 calls), CPU ms per call"] = (
            await cpu(request))
    async with PSCRanker(Instant(), num_permutations=20, max_concurrency=4096) as ranker:
        lists = [(f"q{i}", texts(10, i)) for i in range(50)]
        await ranker.arank("warm-up", texts(10, 99))
        async def windows():
            return sum([r.usage.calls async for r in ranker.arank_many(lists)])
        out["engine: 50 lists of 10, m = 20 (1,000 calls), CPU ms per call"] = (
            await cpu(windows))
    print(json.dumps(out))

asyncio.run(main())
"""

AGGREGATE = r"""
import json, random, statistics, time
from permsc_integrations import aggregate

def rankings(seed, m=20, n=50, swaps=60):
    rng, out = random.Random(seed), []
    base = list(range(n))
    rng.shuffle(base)
    for _ in range(m):
        order = base[:]
        for _ in range(swaps):
            i = rng.randrange(n - 1)
            order[i], order[i + 1] = order[i + 1], order[i]
        out.append(order)
    return out

instances = [rankings(seed) for seed in range(5)]
out = {}
for method in ("kemeny", "borda", "rrf"):
    for r in instances:
        aggregate(r, method=method, n_items=50)  # warm
    times = []
    for _ in range(15):
        began = time.perf_counter()
        for r in instances:
            aggregate(r, method=method, n_items=50)
        times.append((time.perf_counter() - began) / len(instances) * 1000)
    out[f"aggregate, {method}: 20 rankings of 50 items, ms per call"] = statistics.median(times)
print(json.dumps(out))
"""

COUNTS = (
    PRELUDE
    + AGGREGATE.split("instances = ")[0].replace(", statistics, time", "")
    + r"""
import cProfile, io, pstats

def counted(fn, times):
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(times):
        fn()
    profile.disable()
    return round(pstats.Stats(profile, stream=io.StringIO()).total_calls / times, 1)

async def engine(n, lists, **kw):
    async with PSCRanker(Instant(), num_permutations=20, max_concurrency=4096, **kw) as ranker:
        await ranker.arank("warm-up", texts(n, 0))
        requests = [(f"q{i}", texts(n, i)) for i in range(lists)]
        async def run():
            return sum([r.usage.calls async for r in ranker.arank_many(requests)])
        profile = cProfile.Profile()
        profile.enable()
        calls = await run()
        profile.disable()
        return round(pstats.Stats(profile, stream=io.StringIO()).total_calls / calls, 1)

out = {
    "Python calls per model call: the 100-item request, Borda": asyncio.run(
        engine(100, 1, aggregator="borda")),
    "Python calls per model call: 50 lists of 10, Kemeny": asyncio.run(engine(10, 50)),
}
for method in ("kemeny", "borda", "rrf"):
    r = rankings(0)
    aggregate(r, method=method, n_items=50)
    out[f"Python calls per aggregate, {method}"] = counted(
        lambda: aggregate(r, method=method, n_items=50), 10)
print(json.dumps(out))
"""
)

READING = (
    "What the timings cannot show on a loaded machine, the code and the counts do: the "
    "aggregation code is the same in both trees (`aggregate`'s body and `_borda.py` "
    "unchanged, `_rrf.py` and `kemeny.py` one import line each), so its ratios are this "
    "machine's noise; the engine enters as many Python functions per model call as before "
    "(the counts' table), and the request path to the first call about half as many; the "
    "import loads one module more (`aggregators._capabilities`, the aggregators' protocols), "
    "its time within the noise."
)

MODULES = r"""
import json, sys
before = set(sys.modules)
import permsc_integrations
new = set(sys.modules) - before
print(json.dumps({
    "modules `import permsc_integrations` loads": len(new),
    "of them permsc_integrations'": sum(m.startswith("permsc_integrations") for m in new),
}))
"""

IMPORT = "import permsc_integrations: wall s over the bare interpreter"


def child(root: Path, code: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def wall(root: Path, code: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(root)}
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, cwd=root, check=True)
    return time.perf_counter() - began


def import_cost(root: Path, runs: int) -> float:
    """Median over ``runs`` of (import wall - bare wall), each pair run back to back."""
    pairs = [wall(root, "import permsc_integrations") - wall(root, "pass") for _ in range(runs)]
    return statistics.median(pairs)


def one_round(root: Path, import_runs: int) -> dict[str, float]:
    return {
        **child(root, ENGINE),
        **child(root, AGGREGATE),
        IMPORT: import_cost(root, import_runs),
    }


def request_path_count(root: Path) -> int | str:
    try:
        return int(figures(trace(root))["calls"]["functions"])
    except (subprocess.CalledProcessError, KeyError, ValueError) as exc:
        return f"could not run ({type(exc).__name__})"


def load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


def cell(values: list[float]) -> str:
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:.3f} ({low:.3f}..{high:.3f})"


def table(samples: dict[str, dict[str, list[float]]], paths: dict[str, int | str]) -> str:
    lines = [
        f"| figure | before ({BEFORE}), median (min..max) | after, median (min..max) "
        "| after / before, medians | after / before, minima |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, old in samples["old"].items():
        new = samples["new"][name]
        ratio = statistics.median(new) / statistics.median(old)
        least = min(new) / min(old)
        lines.append(f"| {name} | {cell(old)} | {cell(new)} | {ratio:.2f} | {least:.2f} |")
    old_p, new_p = paths["old"], paths["new"]
    ratio_p = f"{new_p / old_p:.2f}" if isinstance(old_p, int) and isinstance(new_p, int) else ""
    lines.append(
        f"| request path: functions entered, `arank` to the first model call (50 items, blocks, "
        f"m = 2, window 10) | {old_p} | {new_p} | {ratio_p} | {ratio_p} |"
    )
    return "\n".join(lines)


def count_table(counts: dict[str, dict[str, float]]) -> str:
    lines = [
        f"| count | before ({BEFORE}) | after | after / before |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, old in counts["old"].items():
        new = counts["new"][name]
        lines.append(f"| {name} | {old:g} | {new:g} | {new / old:.3f} |")
    return "\n".join(lines)


def intro(rounds: int, import_runs: int) -> str:
    return (
        "## re-pack: hot paths before and after\n\n"
        f"Issue 37's target: the hot paths no slower after the re-pack. Before: {BEFORE} (main "
        "before the re-pack); after: the working tree. Each tree in fresh child interpreters "
        f"(`PYTHONPATH` = the tree), alternating (old, new, then new, old, ...) for {rounds} "
        "rounds; "
        "a cell is the median of the rounds (min..max). Engine CPU: an in-process backend "
        "answering at once, the process's CPU (every thread) per call; the 100-item request "
        "under Borda (under Kemeny its consensus runs the solver's time-limited heuristic, "
        "whose CPU the time limit sets). Aggregation: median of "
        '15 repeats over 5 instances within a child. Import: wall of `python -c "import '
        f'permsc_integrations"` minus `python -c pass` run beside it, median of {import_runs} '
        "pairs per round. The request path is a count (one trace per tree).\n\n"
    )


def run(old: Path, rounds: int, import_runs: int) -> str:
    trees = {"old": old, "new": ROOT}
    for root in trees.values():  # bytecode written, caches warm, before any timing
        one_round(root, 1)
    start_load = load()
    samples: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for k in range(rounds):  # old, new, then new, old: neither always runs first
        for label in ("old", "new") if k % 2 == 0 else ("new", "old"):
            for name, value in one_round(trees[label], import_runs).items():
                samples[label].setdefault(name, []).append(value)
    paths = {label: request_path_count(root) for label, root in trees.items()}
    counts = {
        label: {**child(root, COUNTS), **child(root, MODULES)} for label, root in trees.items()
    }
    return (
        intro(rounds, import_runs)
        + table(samples, paths)
        + "\n\nCounts (no timing, so the load is not in them; they move by under 1 % run to "
        "run): Python function calls (cProfile's total) per model call and per `aggregate` "
        "call, the same work as above; the modules the import loads.\n\n"
        + count_table(counts)
        + "\n\n"
        + READING
        + f"\n\nThe machine is shared with other agents (load average, 1 min: {start_load} at "
        f"the start, {load()} at the end): read the ratios, measured side by side, rather "
        "than the absolute figures.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help=f"a checkout of {BEFORE}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--import-runs", type=int, default=5, help="import pairs per round")
    parser.add_argument("--no-write", action="store_true", help="print, don't touch the docs")
    args = parser.parse_args()
    body = run(args.old.resolve(), max(args.rounds, 1), max(args.import_runs, 1))
    sys.stdout.write(body)
    if not args.no_write:
        command = (
            f"python benchmarks/repack_hot_paths.py --old <checkout of {BEFORE}> "
            f"--rounds {args.rounds} --import-runs {args.import_runs}"
        )
        write_section("repack-hot-paths", body, command=command)


if __name__ == "__main__":
    main()
