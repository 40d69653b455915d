"""The modules a request visits from ``PSCRanker.arank`` to the backend, its re-entries, its cost.

The request path of docs/architecture.md, traced in a child interpreter per checkout
(``--old``: another checkout, e.g. of main, side by side with the working tree) with no
model, over a backend that answers at once:

* *path*: the stack at the backend call, each task joined to the stack of the code that
  started it (``TaskGroup.start_soon`` patched to pass its caller's frames on): the
  permsc_integrations frames from ``arank`` to the backend, their modules, and the re-entries
  (a module entered again after the path left it: A -> B -> A). For a 50-item request (blocks,
  m = 2, window 10: a round of 5 blocks x 2 shuffles, then the head window): the first
  round's path and the head round's; and for an 8-item request under first-token scoring.
* *calls*: every function entered (``sys.setprofile``, coroutines resumed left out) from
  ``arank`` to the first backend call of the 50-item request: the modules, the switches
  between modules, the re-entries;
* *time*: the 50-item request again, untraced, over the same backend: its CPU time, every
  thread's (median of 30; most of it the rounds' exact Kemeny consensus, in a worker thread),
  the one figure that depends on the machine.

It writes its figures into docs/architecture.md between the ``request_path`` markers (the
figures as JSON in the first one: tests/test_architecture_doc.py holds the block to what
``render`` makes of them, and the path to a fresh trace); with ``--old``, the side-by-side
table to docs/benchmarks.md.

    python benchmarks/request_path.py [--old /path/to/checkout-of-main] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from _report import machine, write_section

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import contextvars, json, sys, time
import anyio
import anyio._backends._asyncio as backend_asyncio
from permsc_integrations import PSCRanker
from permsc_integrations.backends.base import Completion, LabelProbabilities

PARENT = contextvars.ContextVar("parent", default=())

def stack(skip=2):
    out, f = [], sys._getframe(skip)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod.startswith("permsc_integrations."):
            out.append((mod[len("permsc_integrations."):], f.f_code.co_name))
        f = f.f_back
    return PARENT.get() + tuple(reversed(out))

original = backend_asyncio.TaskGroup.start_soon
def start_soon(self, func, *args, name=None):
    token = PARENT.set(stack())
    try:
        return original(self, func, *args, name=name)
    finally:
        PARENT.reset(token)
backend_asyncio.TaskGroup.start_soon = start_soon

PATHS, SEQ, SEEN, DONE = {}, [], {}, []
IGNORE = ("results", "errors", "_checks")  # the leaves every part reads

def prof(frame, event, arg):
    if event != "call" or DONE or id(frame) in SEEN:
        return
    SEEN[id(frame)] = frame
    mod = frame.f_globals.get("__name__", "")
    if mod.startswith("permsc_integrations.") and not mod[20:].startswith(IGNORE):
        SEQ.append(mod[20:])

class Echo:
    name = "echo"
    async def acomplete(self, messages, settings):
        DONE.append(1)
        PATHS.setdefault(("generate", stack()), None)
        n = sum(m["content"].startswith("[") for m in messages if m["role"] == "user")
        return Completion(text=" > ".join(f"[{i}]" for i in range(1, n + 1)))
    async def afirst_token(self, messages, labels, settings):
        PATHS.setdefault(("first_token", stack()), None)
        return LabelProbabilities(tuple(1.0 / len(labels) for _ in labels))
    async def aclose(self):
        pass

async def generate():
    ranker = PSCRanker(Echo(), num_permutations=2, window_size=10)
    sys.setprofile(prof)
    try:
        await ranker.arank("q", [f"item {i}" for i in range(50)])
    finally:
        sys.setprofile(None)

anyio.run(generate)
first_token = PSCRanker(Echo(), num_permutations=2, scoring="first_token", window_size=10)
anyio.run(first_token.arank, "q", [f"item {i}" for i in range(8)])

async def timed():
    ranker = PSCRanker(Echo(), num_permutations=2, window_size=10)
    items = [f"item {i}" for i in range(50)]
    result = await ranker.arank("q", items)  # warm: imports, the solver's first use
    times = []
    for _ in range(30):
        start = time.process_time()  # every thread's: the consensus runs in a worker
        await ranker.arank("q", items)
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2], result.usage.calls

TIME = anyio.run(timed)
print(json.dumps({"paths": [[kind, list(path)] for kind, path in PATHS], "calls": SEQ,
                  "seconds": TIME[0], "request_calls": TIME[1]}))
"""

DOC = ROOT / "docs" / "architecture.md"
BEGIN = re.compile(r"<!-- request_path:begin (\{.*?\}) -->\n")
END = "<!-- request_path:end -->"
LABELS = {"generate": ("first round", "head round"), "first_token": ("first-token",)}


def trace(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def runs(modules: list[str]) -> list[str]:
    """``modules`` with repeats in a row folded: the modules in the order the path enters them."""
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def figures(found: dict) -> dict:
    """What a trace says: each path's modules in order and frames, the calls, the time."""
    paths, labels = {}, {kind: iter(names) for kind, names in LABELS.items()}
    for kind, path in found["paths"]:
        label = next(labels[kind], f"{kind} {len(paths) + 1}")
        paths[label] = {"modules": runs([m for m, _ in path]), "frames": len(path)}
    calls = found["calls"]
    entered = runs(calls)
    return {
        "paths": paths,
        "calls": {
            "functions": len(calls),
            "modules": len(set(calls)),
            "switches": len(entered) - 1,
            "re-entries": len(entered) - len(set(calls)),
        },
        "ms per request": round(found["seconds"] * 1e3, 1),
        "machine": machine(),
        "calls per request": found["request_calls"],
    }


def rows(found: dict) -> dict[str, str]:
    """One column of the side-by-side table (docs/benchmarks.md)."""
    out = {}
    for label, path in figures(found)["paths"].items():
        modules = path["modules"]
        out[f"path, {label}"] = (
            f"{len(set(modules))} modules, {len(modules) - len(set(modules))} re-entries, "
            f"{path['frames']} frames: {' > '.join(modules)}"
        )
    c = figures(found)["calls"]
    out["calls to the first backend call"] = (
        f"{c['modules']} modules, {c['switches']} switches, {c['re-entries']} re-entries "
        f"({c['functions']} functions)"
    )
    return out


def render(fig: dict) -> str:
    """The docs/architecture.md block of these figures (what lies between the markers)."""
    lines = [
        "| request | the modules it passes, `arank` to the backend, in order | modules | "
        "re-entries | frames |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for label, path in fig["paths"].items():
        modules = path["modules"]
        shown = " > ".join(f"`{m}`" for m in modules)
        again = len(modules) - len(set(modules))
        lines.append(f"| {label} | {shown} | {len(set(modules))} | {again} | {path['frames']} |")
    c = fig["calls"]
    return "\n".join([
        *lines,
        "",
        f"From `arank` to the first backend call the request enters {c['functions']} functions "
        f"in {c['modules']} modules ({c['switches']} switches between modules, "
        f"{c['re-entries']} re-entries; the values and checks left out). Untraced, the whole "
        f"request (its plan, {fig['calls per request']} calls answered at once, every "
        f"round's consensus) takes {fig['ms per request']} ms of CPU, median of 30 on "
        f"{fig['machine']}.",
    ])


def block(fig: dict) -> str:
    return f"<!-- request_path:begin {json.dumps(fig)} -->\n{render(fig)}\n{END}"


def documented(text: str) -> tuple[dict, str]:
    """The figures docs/architecture.md's block was written from, and the block's text."""
    begin = BEGIN.search(text)
    end = text.find(END, begin.end()) if begin else -1
    if begin is None or end < 0:
        raise ValueError(f"no request_path markers in {DOC.name}")
    return json.loads(begin.group(1)), text[begin.end() : end].rstrip("\n")


def write_doc(fig: dict) -> None:
    text = DOC.read_text(encoding="utf-8")
    documented(text)  # the markers are there
    old = re.compile(BEGIN.pattern + ".*?" + re.escape(END), re.S)
    DOC.write_text(old.sub(lambda _: block(fig), text, count=1), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="another checkout to trace beside this one")
    parser.add_argument("--no-write", action="store_true", help="print, don't touch the docs")
    args = parser.parse_args()
    found = trace(ROOT)
    sys.stdout.write(render(figures(found)) + "\n")
    if not args.no_write:
        write_doc(figures(found))
    if args.old:
        side_by_side(rows(trace(args.old.resolve())), rows(found), write=not args.no_write)


def side_by_side(old: dict[str, str], new: dict[str, str], *, write: bool) -> None:
    lines = ["| | old | new |", "| --- | --- | --- |"]
    lines += [f"| {label} | {old.get(label, '')} | {cell} |" for label, cell in new.items()]
    body = (
        "### request path\n\nThe modules a request visits from `PSCRanker.arank` to the "
        "backend (not a timing; see the script's docstring): 50 items, blocks, m = 2, window "
        "10; first-token: 8 items.\n\n" + "\n".join(lines)
    )
    sys.stdout.write(body + "\n")
    if write:
        command = "python benchmarks/request_path.py --old <checkout of main>"
        write_section("request-path", body, command=command)


if __name__ == "__main__":
    main()
