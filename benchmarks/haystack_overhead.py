"""What the Haystack component costs over the core (section "haystack-overhead").

Side by side in one run, interleaved, on in-process models that answer at once (no HTTP, so
the CPU left is the library's):

- *core*: ``permsc_integrations.PSCRanker.arank`` / ``.rank`` on the documents' texts;
- *component, backend=*: ``PSCRanker.run_async`` / ``.run`` of permsc-haystack on the same
  backend object and Haystack ``Document``s (input checks, copies of the documents with
  their score and ``meta["psc"]``);
- *component, chat_generator=*: the same ranking through :class:`HaystackChatBackend` over a
  Haystack chat generator that answers in process (``ChatMessage`` in and out, usage read
  from the reply's meta), against *core* on a core backend computing the same answer (the
  generator's own work, reading the ``ChatMessage``s back, counts against the component);
- *over HTTP*: the component with Haystack's ``OpenAIChatGenerator`` against the core's
  ``openai:`` backend, both calling the project's scripted OpenAI-compatible server run in
  a separate process (so its CPU is not counted): what a user's ranking costs on this side.

Reports process CPU (every thread: the sync bridge and the aggregation's workers) per ranking
and per call, the median of the runs, and the ratio to *core* (target: at most 1.05). Then
the cold import of the component over Haystack's own (target: under 0.5 s): the CPU of fresh
interpreters, ``import haystack`` against ``import haystack`` plus the component, interleaved
(CPU, not wall: on the shared 2-core machine the same command's wall time ranged 2.6-7.4 s).

    python benchmarks/haystack_overhead.py           # about a minute
    python benchmarks/haystack_overhead.py --runs 30 --imports 9
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "adapters" / "haystack"))
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from _report import write_section  # noqa: E402
from haystack import Document  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack_integrations.components.rankers.permsc import PSCRanker  # noqa: E402

from permsc_integrations import PSCRanker as CoreRanker  # noqa: E402
from permsc_integrations.backends.base import Completion  # noqa: E402
from permsc_integrations.results import Usage  # noqa: E402
from permsc_integrations.testing import best_first  # noqa: E402
from permsc_integrations.testing._responders import shown_passages  # noqa: E402

N, M = 20, 20
PROMPTS = ("rankgpt", "rankvicuna")  # RankGPT's many turns (44 messages a call), or one turn
QUERY = "which passage has the highest number?"
TEXTS = [f"Passage {k}: a document about the number {(k * 7) % N}." for k in range(N)]


def _answer(messages: list[dict[str, Any]]) -> str:
    """The oracle's answer to a ranking prompt (the passages shown, by their number)."""
    shown = shown_passages(messages)
    order = best_first(shown, lambda text: float(text.rsplit(" ", 1)[-1].rstrip(".")))
    return " > ".join(f"[{i + 1}]" for i in order)


class Instant:
    """A core backend answering at once."""

    name = "instant"

    async def acomplete(self, messages: Any, settings: Any) -> Completion:
        return Completion(_answer(list(messages)), Usage(100, 20, 1))

    async def aclose(self) -> None:
        pass


class InstantGenerator:
    """A Haystack chat generator answering at once, with usage in the reply's meta."""

    model = "instant"

    def run(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        plain = [{"role": m.role.value, "content": m.text or ""} for m in messages]
        meta = {"usage": {"prompt_tokens": 100, "completion_tokens": 20}, "model": self.model}
        return {"replies": [ChatMessage.from_assistant(_answer(plain), meta=meta)]}

    async def run_async(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        return self.run(messages)


def _server() -> tuple[subprocess.Popen[str], str]:
    """The scripted oracle server in a process of its own; its base URL."""
    code = (
        "import sys, threading\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import haystack_overhead as h\n"
        "from permsc_integrations.testing import ScriptedOpenAIServer\n"
        "with ScriptedOpenAIServer(lambda r: h._answer(list(r.messages))) as s:\n"
        "    print(s.base_url, flush=True); sys.stdin.read()\n"
    )
    here = str(Path(__file__).resolve().parent)
    process = subprocess.Popen(
        [sys.executable, "-c", code, here],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _http_cases(base_url: str, prompt: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    options = {"num_permutations": M, "seed": 3, "prompt": prompt}
    generator = OpenAIChatGenerator(
        model="instant",
        api_base_url=base_url,
        api_key=Secret.from_token("unused"),
        max_retries=0,
        generation_kwargs={"temperature": 0.0},
    )
    core = CoreRanker(
        "openai:instant", backend_options={"base_url": base_url, "api_key": "unused"}, **options
    )
    component = PSCRanker(chat_generator=generator, **options)
    documents = [Document(content=t, id=f"d{k}") for k, t in enumerate(TEXTS)]
    return {
        f"core openai:, arank (HTTP, {prompt})": lambda: core.arank(QUERY, TEXTS),
        f"component OpenAIChatGenerator, run_async (HTTP, {prompt})": (
            lambda: component.run_async(QUERY, documents)
        ),
    }


def _cpu(call: Callable[[], Any]) -> float:
    began = time.process_time()
    call()
    return time.process_time() - began


async def _acpu(call: Callable[[], Awaitable[Any]]) -> float:
    began = time.process_time()
    await call()
    return time.process_time() - began


def measure(runs: int) -> dict[str, list[float]]:
    """CPU seconds per ranking of each case, interleaved run by run."""
    options = {"num_permutations": M, "seed": 3}
    core, core_gen = CoreRanker(Instant(), **options), CoreRanker(Instant(), **options)
    component = PSCRanker(backend=Instant(), **options)
    with_gen = PSCRanker(chat_generator=InstantGenerator(), **options)
    documents = [Document(content=t, id=f"d{k}", meta={"k": k}) for k, t in enumerate(TEXTS)]
    cases_async: dict[str, Callable[[], Awaitable[Any]]] = {
        "core, arank": lambda: core.arank(QUERY, TEXTS),
        "component backend=, run_async": lambda: component.run_async(QUERY, documents),
        "core (same answers), arank": lambda: core_gen.arank(QUERY, TEXTS),
        "component chat_generator=, run_async": lambda: with_gen.run_async(QUERY, documents),
    }
    cases_sync: dict[str, Callable[[], Any]] = {
        "core, rank": lambda: core.rank(QUERY, TEXTS),
        "component backend=, run": lambda: component.run(QUERY, documents),
    }
    server, base_url = _server()
    for prompt in PROMPTS:
        cases_async.update(_http_cases(base_url, prompt))
    out: dict[str, list[float]] = {name: [] for name in (*cases_async, *cases_sync)}

    async def async_round() -> None:
        for name, call in cases_async.items():
            out[name].append(await _acpu(call))

    async def all_rounds() -> None:
        for call in cases_async.values():  # warm-up: first builds, caches
            await call()
        for _ in range(runs):
            await async_round()

    try:
        asyncio.run(all_rounds())
    finally:
        server.communicate("")
    for call in cases_sync.values():
        call()
    for _ in range(runs):
        for name, call in cases_sync.items():
            out[name].append(_cpu(call))
    return out


def import_times(repeats: int) -> tuple[float, float]:
    """Median CPU seconds (user + system: on a shared machine, wall time is mostly other
    jobs' waiting) of a fresh interpreter running ``import haystack``, and it plus the
    component."""
    path = os.pathsep.join(map(str, (ROOT, ROOT / "adapters" / "haystack")))
    env = {**os.environ, "PYTHONPATH": path}
    codes = {
        "haystack": "import haystack",
        "component": "import haystack; import haystack_integrations.components.rankers.permsc",
    }
    times: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(repeats):
        for name, code in codes.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            times[name].append(cpu)
    return statistics.median(times["haystack"]), statistics.median(times["component"])


PAIRS = (
    ("core, arank", "component backend=, run_async"),
    ("core, rank", "component backend=, run"),
    ("core (same answers), arank", "component chat_generator=, run_async"),
    *(
        (
            f"core openai:, arank (HTTP, {p})",
            f"component OpenAIChatGenerator, run_async (HTTP, {p})",
        )
        for p in PROMPTS
    ),
)


def report(cpu: dict[str, list[float]], runs: int, imports: tuple[float, float], n: int) -> str:
    lines = [
        f"In-process models answering at once: {N} documents, m = {M} (one window, {M} calls "
        f"a ranking), Kemeny; median process CPU (all threads) of {runs} interleaved runs. "
        "Target: the component at most 5 % over the core.",
        "",
        "| case | CPU ms per ranking | per call | ratio to the core |",
        "| --- | ---: | ---: | ---: |",
    ]
    for base, case in PAIRS:
        core_ms = 1000 * statistics.median(cpu[base])
        case_ms = 1000 * statistics.median(cpu[case])
        lines.append(f"| {base} | {core_ms:.1f} | {core_ms / M:.3f} | 1.00 |")
        lines.append(f"| {case} | {case_ms:.1f} | {case_ms / M:.3f} | {case_ms / core_ms:.3f} |")
    bare, with_component = imports
    lines += [
        "",
        f"Cold import, CPU (user + system) of a fresh interpreter, median of {n} each, "
        f"interleaved: `import haystack` {bare:.2f} s; with the component "
        f"{with_component:.2f} s: **+{with_component - bare:.2f} s** "
        "(target under 0.5 s; the agent tool's `haystack.tools` loads on first use).",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--imports", type=int, default=7)
    args = parser.parse_args()
    cpu = measure(args.runs)
    imports = import_times(args.imports)
    body = report(cpu, args.runs, imports, args.imports)
    print(body, flush=True)  # noqa: T201
    title = "## Haystack component over the core (permsc-haystack)"
    write_section("haystack-overhead", f"{title}\n\n{body}")


if __name__ == "__main__":
    main()
