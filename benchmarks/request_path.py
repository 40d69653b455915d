"""The modules a request visits from ``PSCRanker.arank`` to the backend, and its re-entries.

Not a timing: the shape of the request path (docs/architecture.md "before and after"), traced
in a child interpreter per checkout (``--old``: another checkout, e.g. of main, side by side
with the working tree) with no model, over a backend that answers at once:

* *path*: the stack at the backend call, each task joined to the stack of the code that
  started it (``TaskGroup.start_soon`` patched to pass its caller's frames on): the
  permsc_integrations frames from ``arank`` to the backend, their modules, and the re-entries
  (a module entered again after the path left it: A -> B -> A). For a 50-item request (blocks,
  m = 2, window 10: a round of 5 blocks x 2 shuffles, then the head window): the first
  round's path and the head round's; and for an 8-item request under first-token scoring.
* *calls*: every function entered (``sys.setprofile``, coroutines resumed left out) from
  ``arank`` to the first backend call of the 50-item request: the modules, the switches
  between modules, the re-entries.

    python benchmarks/request_path.py [--old /path/to/checkout-of-main] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _report import write_section

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import contextvars, json, sys
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
IGNORE = ("results", "errors", "checks")

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
print(json.dumps({"paths": [[kind, list(path)] for kind, path in PATHS], "calls": SEQ}))
"""


def trace(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def runs(modules: list[str]) -> list[str]:
    """``modules`` with repeats in a row folded: the modules in the order the path enters them."""
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def rows(found: dict) -> dict[str, str]:
    out = {}
    labels = iter(("first round", "head round"))
    for kind, path in found["paths"]:
        label = f"path, {next(labels)}" if kind == "generate" else "path, first-token"
        modules = [m for m, _ in path]
        entered = runs(modules)
        out[label] = (
            f"{len(set(modules))} modules, {len(entered) - len(set(modules))} re-entries, "
            f"{len(path)} frames: {' > '.join(entered)}"
        )
    calls = found["calls"]
    entered = runs(calls)
    out["calls to the first backend call"] = (
        f"{len(set(calls))} modules, {len(entered) - 1} switches, "
        f"{len(entered) - len(set(calls))} re-entries ({len(calls)} functions)"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="another checkout to trace beside this one")
    parser.add_argument("--no-write", action="store_true", help="print, don't touch the docs")
    args = parser.parse_args()
    columns = {"this tree": rows(trace(ROOT))}
    if args.old:
        columns = {"old": rows(trace(args.old.resolve())), "new": columns["this tree"]}
    names = list(columns)
    lines = [f"| | {' | '.join(names)} |", "| --- |" + " --- |" * len(names)]
    for label in columns[names[-1]]:
        cells = [columns[n].get(label, "") for n in names]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    body = (
        "### request path\n\nThe modules a request visits from `PSCRanker.arank` to the "
        "backend (not a timing; see the script's docstring): 50 items, blocks, m = 2, window "
        "10; first-token: 8 items.\n\n" + "\n".join(lines)
    )
    sys.stdout.write(body + "\n")
    if not args.no_write:
        old = " --old <checkout of main>" if args.old else ""
        command = f"python benchmarks/request_path.py{old}"
        write_section("request-path", body, command=command)


if __name__ == "__main__":
    main()
