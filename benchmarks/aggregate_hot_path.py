"""``aggregate(rankings, method=...)`` on PSC-sized inputs: three versions side by side in one run.

The hot path of every window: m = 20 answers of n = 10-50 items, input checks included. The
versions are the working tree and two commits extracted with ``git archive``: ``--before``
(the package before partial answers and Kemeny at scale landed; 0.15 ms at n = m = 20 then)
and ``--regressed`` (the tip of main before this fix; 0.31 ms). Each version runs in its own
interpreter on the same rankings, in alternating rounds (``--rounds``), so that load on the
machine falls on all three alike; a row's time is the best round's median over its instances.
The working tree must return what main returned before the fix on every instance (*same*).

Run: ``.venv/bin/python benchmarks/aggregate_hot_path.py`` (about two minutes on 2 cores;
``--methods kemeny borda`` adds Borda);
``--quick`` for a smoke run. Writes the "aggregate_hot_path" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "efbe03b^"  # before Kemeny at scale (the partial-answer pair counts) landed
REGRESSED = "cb72d02"  # main before the hot path was fixed

CHILD = r"""
import json, statistics, sys, timeit
from pathlib import Path
cells, number = json.loads(Path(sys.argv[1]).read_text()), int(sys.argv[2])
from permsc_integrations import aggregate
aggregate([[0, 1, 2], [2, 1, 0]], method="kemeny")  # imports and first-call work, off the clock
out = []
for cell in cells:
    times, orders = [], []
    for r in cell["instances"]:
        orders.append(aggregate(r, method=cell["method"]))
        t = min(timeit.repeat(lambda: aggregate(r, method=cell["method"]), number=number, repeat=5))
        times.append(t / number)
    out.append({"median": statistics.median(times), "orders": orders})
print(json.dumps(out))
"""


def llm_like(rng: np.random.Generator, n: int, m: int) -> list[list[int]]:
    """Copies of a hidden truth with max(2, n // 10) swaps of items at most 3 places apart."""
    truth, out = rng.permutation(n).tolist(), []
    for _ in range(m):
        p = list(truth)
        for _ in range(max(2, n // 10)):
            i = int(rng.integers(0, n))
            j = min(n - 1, i + int(rng.integers(1, 4)))
            p[i], p[j] = p[j], p[i]
        out.append(p)
    return out


def partial(rng: np.random.Generator, n: int, m: int) -> list[list[int]]:
    """LLM-like answers that leave out each item with probability 0.2 (partial answers)."""
    return [[i for i in r if rng.random() >= 0.2] for r in llm_like(rng, n, m)]


def mallows(rng: np.random.Generator, n: int, m: int, phi: float = 0.7) -> list[list[int]]:
    """Mallows samples around a random truth (repeated insertion)."""
    truth, out = rng.permutation(n).tolist(), []
    for _ in range(m):
        p: list[int] = []
        for i in range(n):
            w = phi ** np.arange(i + 1)
            p.insert(i - int(rng.choice(i + 1, p=w / w.sum())), truth[i])
        out.append(p)
    return out


REGIMES = {"LLM-like": llm_like, "LLM-like, partial": partial, "Mallows 0.7": mallows}


def make_cells(args: argparse.Namespace) -> list[dict]:
    sizes = [20] if args.quick else [10, 20, 50]
    cells, seed = [], 0
    for method in args.methods:
        for n in sizes:
            for regime, sample in REGIMES.items():
                seed += 1
                rng = np.random.default_rng(seed)
                instances = [sample(rng, n, args.m) for _ in range(args.instances)]
                cells.append({"method": method, "n": n, "regime": regime, "instances": instances})
    return cells


def extract(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "permsc_integrations"],
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(code_root: Path, cells_file: Path, number: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cells_file), str(number)],
        capture_output=True,
        text=True,
        env=env,
        cwd=code_root,
        check=True,
    )
    return json.loads(done.stdout)


def run(args: argparse.Namespace, cells: list[dict]) -> dict[str, list[list[dict]]]:
    """Per version, per round, the child's answer for every cell."""
    with tempfile.TemporaryDirectory() as tmp:
        roots = {
            "before": extract(args.before, Path(tmp) / "before"),
            "regressed": extract(args.regressed, Path(tmp) / "regressed"),
            "now": ROOT,
        }
        cells_file = Path(tmp) / "cells.json"
        cells_file.write_text(json.dumps(cells))
        rounds: dict[str, list[list[dict]]] = {name: [] for name in roots}
        for _ in range(args.rounds):
            for name, root in roots.items():
                rounds[name].append(measure(root, cells_file, args.number))
    return rounds


def row(cell: dict, k: int, rounds: dict[str, list[list[dict]]]) -> str:
    best = {name: min(r[k]["median"] for r in runs) for name, runs in rounds.items()}
    now = rounds["now"][0][k]["orders"]

    def same(names: tuple[str, ...]) -> str:
        answers = [r[k]["orders"] for name in names for r in rounds[name]]
        return f"{sum(all(a[i] == now[i] for a in answers) for i in range(len(now)))}/{len(now)}"

    return (
        f"| {cell['method']} | {cell['n']} | {cell['regime']} | {1e3 * best['before']:.3f} | "
        f"{1e3 * best['regressed']:.3f} | {1e3 * best['now']:.3f} | "
        f"{best['regressed'] / best['now']:.2f}x | {best['before'] / best['now']:.2f}x | "
        f"{same(('regressed', 'now'))} | {same(('before',))} |"
    )


def render(cells: list[dict], rounds: dict, args: argparse.Namespace, load: tuple) -> str:
    head = (
        "## The aggregation hot path: `aggregate(..., method=...)`, three versions side by side\n\n"
        f"m = {args.m} rankings per instance, {args.instances} instances per row, input checks "
        f"included. Each version ran in its own interpreter, {args.rounds} alternating rounds; "
        "a row's time is the best round's median over its instances (each instance timed as "
        f"the best of 5 x {args.number} calls). *before*: `{args.before}` (before partial "
        f"answers and Kemeny at scale); *regressed*: `{args.regressed}` (main before this fix); "
        "*now*: the working tree. *same*: instances where every round of *regressed* and "
        "*now* returned the same ranking (this fix changes no result); *as before*: the same "
        "for *before* (Borda's partial-answer semantics changed on purpose in between). Other "
        "jobs shared this machine (load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end): read the ratios.\n\n"
        "| method | n | regime | before ms | regressed ms | now ms | regressed / now "
        "| before / now | same | as before |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    return head + "\n".join(row(c, k, rounds) for k, c in enumerate(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--m", type=int, default=20)
    ap.add_argument("--instances", type=int, default=5)
    ap.add_argument("--number", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--methods", nargs="+", default=["kemeny"])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--regressed", default=REGRESSED)
    args = ap.parse_args()
    if args.quick:
        args.instances, args.number, args.rounds = 2, 20, 1
    cells = make_cells(args)
    load_start, started = os.getloadavg()[0], time.perf_counter()
    rounds = run(args, cells)
    body = render(cells, rounds, args, (load_start, os.getloadavg()[0]))
    print(body)  # noqa: T201 - the table, as written to the docs
    total = time.perf_counter() - started
    write_section("aggregate_hot_path", body + f"\n\nTotal benchmark time: {total:.0f} s.")


if __name__ == "__main__":
    main()
