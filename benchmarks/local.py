"""The embedded models on this machine: load, one call, the demo's batched window, the whole
``permsc demo`` command (section "local").

For each embedded model: the time to load it from its converted cache (``permsc models
prepare`` ran once), one greedy call on the demo's prompt, the demo's window (8 passages,
m=6 permuted RankGPT prompts) in one batched ``generate``, how those answers parsed and how
well the aggregate ranks the demo's three relevant passages, and the wall time of
``permsc demo --backend embedded:NAME`` as a user runs it (a fresh process: imports and load
included). Sequential, one model at a time; run it on idle cores.

    python benchmarks/local.py                          # both models
    python benchmarks/local.py --models smollm2-135m    # the fast one only
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import anyio
from _report import write_section

from permsc_integrations import aggregate
from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.backends.local._embedded import embedded_backend
from permsc_integrations.cli._demo import DEMO_PERMUTATIONS, demo_query
from permsc_integrations.errors import ParseError
from permsc_integrations.permutations import sample_permutations
from permsc_integrations.prompts import get_prompt
from permsc_integrations.results import ParseStatus

PERMSC = Path(sys.executable).with_name("permsc")
LIFESPAN = {"d2", "d4", "d7"}  # the demo's passages that say how long goldfish live


async def measure(name: str) -> dict[str, object]:
    query = demo_query()
    prompt = get_prompt("rankgpt")
    perms = sample_permutations(len(query.texts), DEMO_PERMUTATIONS, seed=0)
    batch = [prompt.render(query.query, [query.texts[i] for i in p]) for p in perms]
    settings = GenerationSettings(max_tokens=8 + 6 * len(query.texts))
    backend = embedded_backend(name)
    began = time.perf_counter()
    backend.load()
    t_load = time.perf_counter() - began
    began = time.perf_counter()
    await backend.acomplete(batch[0], settings)
    t_one = time.perf_counter() - began
    began = time.perf_counter()
    answers = await backend.acomplete_batch(batch, settings)
    t_batch = time.perf_counter() - began
    rankings, statuses = [], []
    for perm, answer in zip(perms, answers, strict=True):
        try:
            parsed = prompt.parse(answer.text, len(perm))
        except ParseError:
            statuses.append(ParseStatus.INVALID)
            continue
        statuses.append(parsed.status)
        if parsed.ranking:
            rankings.append([perm[i] for i in parsed.ranking])
    consensus = aggregate(rankings, method="kemeny", n_items=len(query.texts)) if rankings else []
    print(f"{name}: load {t_load:.1f} s, batch {t_batch:.1f} s", file=sys.stderr)  # noqa: T201
    return {
        "model": name,
        "device": f"{backend.device}/{backend.dtype}",
        "load": t_load,
        "one": t_one,
        "batch": t_batch,
        "prompt_tokens": sum(a.usage.prompt_tokens for a in answers) // len(answers),
        "full": sum(s == ParseStatus.OK for s in statuses),
        "partial": sum(s == ParseStatus.PARTIAL for s in statuses),
        "top3": sum(1 for i in consensus[:3] if query.docids[i] in LIFESPAN),
        "demo": demo_wall(name),
    }


def demo_wall(name: str) -> float:
    """``permsc demo`` in a fresh process, as the README runs it."""
    began = time.perf_counter()
    subprocess.run(
        [str(PERMSC), "demo", "--backend", f"embedded:{name}"],
        check=True,
        stdout=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    return time.perf_counter() - began


def render(rows: list[dict], m: int) -> str:
    lines = [
        "## Local model: the embedded models on this CPU\n",
        f"The demo's window (8 passages, m={m} RankGPT prompts, greedy) through transformers. "
        "*load*: from the converted cache; *one call*: one prompt alone; *batched*: all "
        f"{m} prompts in one left-padded `generate`; *demo*: `permsc demo --backend "
        "embedded:NAME` in a fresh process (imports, load, generation, output). *top 3*: how "
        "many of the three passages that say how long goldfish live (d2, d4, d7) the Kemeny "
        "ranking puts in its top 3.\n",
        "| model | device | prompt tokens | load s | one call s | batched (m) s | per call "
        "in the batch s | full / partial answers | top 3 | demo s |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['device']} | {r['prompt_tokens']} | {r['load']:.1f} | "
            f"{r['one']:.1f} | {r['batch']:.1f} | {r['batch'] / m:.1f} | "
            f"{r['full']} / {r['partial']} of {m} | {r['top3']} of 3 | {r['demo']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="qwen2.5-coder-1.5b,smollm2-135m")
    parser.add_argument("--section", default="local")
    args = parser.parse_args()
    rows = [anyio.run(measure, name) for name in args.models.split(",")]
    text = render(rows, DEMO_PERMUTATIONS)
    write_section(args.section, text)
    print(text)  # noqa: T201


if __name__ == "__main__":
    main()
