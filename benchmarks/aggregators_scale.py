"""Kemeny at 100-1000 items, before and after, side by side in one run.

Each measurement runs in its own interpreter (peak memory is that process's high-water
mark), on the same rankings for both versions: the working tree ("after") and the package
as of ``--baseline`` ("before", extracted with ``git archive``). Inputs: m = 20 uniformly
random full rankings, m = 20 LLM-like full rankings (noisy copies of a hidden truth), and
the "blocks" strategy's partial rankings (m shuffles, each cut into blocks of 20, each block
ranked by the truth with local swaps; m = 5, 10, 20). ``time_limit=1.0`` (the default).

The "before" runs get an address-space cap (``--cap-gib``) and a wall-clock cap
(``--timeout``) so that they cannot take the shared machine down: past either, the row says so.

Run: ``.venv/bin/python benchmarks/aggregators_scale.py`` (about 15 minutes on 2 cores);
``--quick`` for a smoke run. Writes the "aggregators_scale" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
Rankings = list[list[int]]

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
rankings, n, time_limit = json.loads(Path(sys.argv[1]).read_text())
import highspy  # noqa: F401 - imported before the clock starts, as in a warm process
from permsc_integrations.aggregators._kemeny import kemeny_solve
kemeny_solve([[0, 1, 2], [2, 1, 0]], n_items=3)
page = resource.getpagesize()
base = int(Path("/proc/self/statm").read_text().split()[1]) * page
try:
    t = time.perf_counter()
    sol = kemeny_solve(rankings, n_items=n, time_limit=time_limit)
    out = {"s": time.perf_counter() - t, "objective": sol.objective, "bound": sol.lower_bound,
           "exact": sol.exact, "method": sol.method}
except MemoryError:
    out = {"error": f"MemoryError after {time.perf_counter() - t:.0f} s"}
out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out["base"] = base
print(json.dumps(out))
"""


def swapped(rng: np.random.Generator, order: list[int], swaps: int) -> list[int]:
    """``order`` with ``swaps`` random exchanges of items at most 3 places apart."""
    p = list(order)
    for _ in range(swaps):
        i = int(rng.integers(0, len(p)))
        j = min(len(p) - 1, i + int(rng.integers(1, 4)))
        p[i], p[j] = p[j], p[i]
    return p


def uniform(rng: np.random.Generator, n: int, m: int) -> Rankings:
    return [rng.permutation(n).tolist() for _ in range(m)]


def llm_like(rng: np.random.Generator, n: int, m: int) -> Rankings:
    """Copies of a hidden truth (a random order) with n // 10 local swaps each."""
    truth = rng.permutation(n).tolist()
    return [swapped(rng, truth, max(2, n // 10)) for _ in range(m)]


def blocks(rng: np.random.Generator, n: int, m: int, size: int = 20) -> Rankings:
    """m shuffles, each cut into balanced blocks of at most ``size``; each block ranked by
    the hidden truth with 2 local swaps (one call's answer for one block)."""
    place = np.empty(n, dtype=np.intp)
    place[rng.permutation(n)] = np.arange(n)
    out = []
    for _ in range(m):
        for block in np.array_split(rng.permutation(n), -(-n // size)):
            out.append(swapped(rng, sorted(block.tolist(), key=lambda i: place[i]), 2))
    return out


INPUTS = {"uniform": uniform, "LLM-like": llm_like, "blocks of 20": blocks}


def baseline_tree(ref: str, into: Path) -> Path:
    """The package as of ``ref``, extracted into ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "permsc_integrations"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(path: Path, code_root: Path, args: argparse.Namespace, capped: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root)}

    def cap() -> None:
        limit = int(args.cap_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=code_root,  # ``-c`` puts the working directory first on sys.path
            timeout=args.timeout if capped else 600,
            preexec_fn=cap if capped else None,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"> {args.timeout:.0f} s (stopped)"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0][:60]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cells(quick: bool) -> list[tuple[str, int, int]]:
    sizes = [100, 500] if quick else [100, 200, 500, 1000]
    out = []
    for n in sizes:
        out += [("uniform", n, 20), ("LLM-like", n, 20)]
        out += [("blocks of 20", n, m) for m in ((5, 20) if quick else (5, 10, 20))]
    return out


def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        before_root = baseline_tree(args.baseline, Path(tmp))
        for k, (kind, n, m) in enumerate(cells(args.quick)):
            for seed in range(args.seeds):
                rng = np.random.default_rng(1000 * k + seed)
                path = Path(tmp) / "case.json"
                path.write_text(json.dumps([INPUTS[kind](rng, n, m), n, 1.0]))
                before = measure(path, before_root, args, capped=True)
                after = measure(path, ROOT, args, capped=False)
                rows.append(
                    {"kind": kind, "n": n, "m": m, "seed": seed, "before": before, "after": after}
                )
                print(json.dumps(rows[-1]), flush=True)  # noqa: T201 - progress
    return rows


def _worst(runs: list[dict], key: str) -> float | None:
    """The largest ``key`` over the runs, or None if any run failed."""
    return None if any("error" in r for r in runs) else max(r[key] for r in runs)


def _gap(runs: list[dict]) -> str:
    if any("error" in r for r in runs):
        return "-"
    gaps = [(r["objective"] - r["bound"]) / max(r["bound"], 1.0) for r in runs]
    exact = sum(r["exact"] for r in runs)
    return f"{exact}/{len(runs)} exact" if exact == len(runs) else f"{100 * max(gaps):.2f} %"


def _time(runs: list[dict]) -> str:
    errors = [r["error"] for r in runs if "error" in r]
    return errors[0] if errors else f"{max(r['s'] for r in runs):.3f}"


def fmt(cell: tuple[str, int, int], rows: list[dict]) -> str:
    """One table row: the worst time, memory and gap over the cell's instances."""
    before, after = [r["before"] for r in rows], [r["after"] for r in rows]
    b_s, a_s = _worst(before, "s"), _worst(after, "s") or 0.0
    b_m, a_m = _worst(before, "peak"), _worst(after, "peak") or 1
    speed = f"{b_s / max(a_s, 1e-6):,.1f}x" if b_s is not None else "-"
    mem = f"{b_m / 2**20:,.0f}" if b_m is not None else "-"
    ratio = f"{b_m / a_m:,.1f}x" if b_m is not None else "-"
    obj = "-"
    if b_s is not None:
        pairs = zip(after, before, strict=True)
        obj = f"{np.mean([a['objective'] / b['objective'] for a, b in pairs]):.4f}"
    methods = sorted({a["method"].removeprefix("condorcet+") for a in after})
    return (
        f"| {cell[0]} | {cell[1]} | {cell[2]} | {_time(before)} | {a_s:.3f} | {speed} | {mem} | "
        f"{a_m / 2**20:,.0f} | {ratio} | {_gap(before)} | {_gap(after)} | {obj} | "
        f"{', '.join(methods)} |"
    )


def render(rows: list[dict], args: argparse.Namespace, total_s: float) -> str:
    cells = sorted({(r["kind"], r["n"], r["m"]) for r in rows}, key=lambda c: (c[1], c[0], c[2]))
    head = (
        "## Kemeny at scale: before and after, n = 100-1000\n\n"
        f"One interpreter per measurement, `time_limit=1.0`, {args.seeds} instances per row, "
        f"the worst of them shown; *before* is the package at `{args.baseline}`, *after* the "
        "working tree, on the same rankings. *s*: wall time of the `kemeny_solve` call; "
        "*MiB*: the process's peak resident memory (ru_maxrss, so the interpreter, numpy and "
        "HiGHS are included: about "
        f"{np.median([r['after']['base'] for r in rows]) / 2**20:.0f} MiB before the call); "
        "*gap*: (objective - proven lower bound) / bound, as each version reports it; "
        "*obj after/before*: below 1 means the new ranking has fewer disagreements. *blocks "
        "of 20*: the partial rankings of the blocks strategy (m shuffles x n/20 blocks, each "
        "ranked by a hidden truth with 2 local swaps); *LLM-like*: m copies of a hidden truth "
        "with n/10 local swaps each. The *before* runs were capped at "
        f"{args.cap_gib:.0f} GiB of address space and {args.timeout:.0f} s. Load average "
        f"{args.load[0]:.1f} at the start, {args.load[1]:.1f} at the end (2 shared cores): "
        "compare the ratios.\n\n"
        "| input | n | m | before s | after s | speed-up | before MiB | after MiB | "
        "memory ratio | before gap | after gap | obj after/before | after method |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    body = [fmt(c, [r for r in rows if (r["kind"], r["n"], r["m"]) == c]) for c in cells]
    tail = (
        f"\n\nSlowest *after* call: {max(r['after']['s'] for r in rows):.3f} s (limit 1.0 s). "
        f"Largest *after* peak: {max(r['after']['peak'] for r in rows) / 2**20:,.0f} MiB. "
        f"Total benchmark time: {total_s / 60:.0f} min."
    )
    return head + "\n".join(body) + tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--baseline", default="ae9fd76", help="git ref of the 'before' code")
    ap.add_argument("--cap-gib", type=float, default=6.0)
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--save", help="also write the raw measurements to this JSON file")
    args = ap.parse_args()
    if args.quick:
        args.seeds = 1
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    rows = run(args)
    args.load = (load_start, os.getloadavg()[0])
    if args.save:
        Path(args.save).write_text(json.dumps({"args": vars(args), "rows": rows}))
    write_section("aggregators_scale", render(rows, args, time.perf_counter() - started))


if __name__ == "__main__":
    main()
