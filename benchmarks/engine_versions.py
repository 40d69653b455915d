"""The engine's hot paths in two checkouts, side by side in one run (section "engine-versions").

``--old`` is another checkout (for a renovation: a checkout of main, e.g. ``git worktree add
--detach ../old-main main``); the working tree is *new*. Each figure is measured in a child
interpreter per version, the versions alternating round by round so that the load of this
shared machine falls on both alike; a figure is the median over the rounds, and the table
gives new / old.

* *engine CPU* (no HTTP): an in-process backend answering at once, the CPU of the event loop's
  thread per call: one blocks ranking of 1,000 items (m = 20, window 20, Borda: 370 calls)
  and 50 one-window lists of 10 items (m = 20, Kemeny: 1,000 calls, ``arank_many``).
* *engine.py* (``--engine-runs``): ``benchmarks/engine.py --no-write`` of each version
  against its loopback server (L = 0.5 s): warm m = 20 PSC / L, 100 lists x m = 5 at C = 25
  as a share of C/L, CPU ms per call of the engine, of ``OpenAIBackend`` alone and of the SDK,
  peak traced memory.

    python benchmarks/engine_versions.py --old ../old-main [--rounds 7] [--engine-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from _child import PRELUDE
from _report import write_section

ROOT = Path(__file__).resolve().parents[1]

CHILD = PRELUDE + r"""
async def cpu(fn):
    began = time.thread_time()
    calls = await fn()
    return 1000 * (time.thread_time() - began) / calls

async def main():
    out = {}
    async with PSCRanker(Instant(), aggregator="borda", max_concurrency=4096) as ranker:
        await ranker.arank("warm-up", texts(1000, 0))
        async def blocks():
            return (await ranker.arank("q", texts(1000, 1))).usage.calls
        out["blocks, 1,000 items (370 calls)"] = await cpu(blocks)
    async with PSCRanker(Instant(), max_concurrency=4096) as ranker:
        lists = [(f"q{i}", texts(10, i)) for i in range(50)]
        await ranker.arank("warm-up", texts(10, 99))
        async def windows():
            return sum([r.usage.calls async for r in ranker.arank_many(lists)])
        out["50 lists of 10, one window each (1,000 calls)"] = await cpu(windows)
    print(json.dumps(out))

asyncio.run(main())
"""


def child(root: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


FIGURES = {
    "warm m = 20 PSC, median / L": (
        r"\*\*warm\*\*: connections kept alive \| \d+ \| [\d.]+ \| "
        r"[\d.]+ \| ([\d.]+) \|"
    ),
    "100 lists x m = 5, share of C/L": r"calls/s = \*\*([\d.]+)%\*\*",
    "CPU ms per call, PSCRanker (engine)": r"\| PSCRanker \(engine\) \| ([\d.]+) \|",
    "CPU ms per call, OpenAIBackend alone": r"\| OpenAIBackend alone \| ([\d.]+) \|",
    "CPU ms per call, openai SDK alone": r"\| openai SDK alone \| ([\d.]+) \|",
    "peak traced memory, MiB": r"Peak traced memory .*?: ([\d.]+) MiB",
}


def engine_py(root: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    script = [sys.executable, str(root / "benchmarks" / "engine.py"), "--no-write"]
    text = subprocess.run(
        script, env=env, cwd=root, capture_output=True, text=True, check=True
    ).stdout
    found = {name: re.search(pattern, text, re.S) for name, pattern in FIGURES.items()}
    return {name: float(m.group(1)) for name, m in found.items() if m}


def alternate(versions: dict[str, Path], rounds: int, measure) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    """Per version, the median of each figure over ``rounds`` alternating rounds."""
    seen: dict[str, dict[str, list[float]]] = {name: {} for name in versions}
    for _ in range(rounds):
        for name, root in versions.items():
            for figure, value in measure(root).items():
                seen[name].setdefault(figure, []).append(value)
    return {n: {f: statistics.median(v) for f, v in figs.items()} for n, figs in seen.items()}


def table(title: str, medians: dict[str, dict[str, float]], runs: int, unit: str) -> str:
    lines = [f"| {title} | old | new | new / old |", "| --- | ---: | ---: | ---: |"]
    for figure, old in medians["old"].items():
        new = medians["new"].get(figure, float("nan"))
        lines.append(f"| {figure} | {old:.3f} | {new:.3f} | {new / old:.2f} |")
    return f"{unit}, medians of {runs} alternating rounds:\n\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the no-HTTP figures")
    parser.add_argument("--engine-runs", type=int, default=3, help="runs of engine.py each")
    parser.add_argument("--no-write", action="store_true", help="print, don't touch the docs")
    args = parser.parse_args()
    versions = {"old": args.old.resolve(), "new": ROOT}
    load = [os.getloadavg()[0]]
    parts = [
        table(
            "engine CPU, no HTTP",
            alternate(versions, args.rounds, child),
            args.rounds,
            "CPU ms of the event loop's thread per call",
        )
    ]
    if args.engine_runs:
        medians = alternate(versions, args.engine_runs, engine_py)
        parts.append(table("benchmarks/engine.py", medians, args.engine_runs, "Loopback figures"))
    load.append(os.getloadavg()[0])
    body = (
        "### engine, old and new side by side\n\n"
        + "\n\n".join(parts)
        + f"\n\nLoad average (1 min): {load[0]:.1f} at the start, {load[1]:.1f} at the end "
        "(a shared 2-core machine: read the ratios)."
    )
    sys.stdout.write(body + "\n")
    if not args.no_write:
        command = (
            f"python benchmarks/engine_versions.py --old <checkout of main> --rounds {args.rounds}"
            f" --engine-runs {args.engine_runs}"
        )
        write_section("engine-versions", body, command=command)


if __name__ == "__main__":
    main()
