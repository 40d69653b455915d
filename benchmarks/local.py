"""Batched vs one-by-one generation with the embedded model (section "local").

One window of ``--items`` DL19 BM25 passages (cut to ``--words`` words), ``-m`` permuted
RankGPT prompts: first all of them through one left-padded ``generate`` call
(``acomplete_batch``), then the same prompts one ``acomplete`` at a time. Reports wall time,
the ratio, tokens per second, whether both modes gave the same texts, and how the answers
parsed (the embedded SmolLM2-135M is weak: this is the honest quality picture).

    python benchmarks/local.py                 # 20 items, m=20, 30 words, CPU
    python benchmarks/local.py --device cuda   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import anyio
from _report import write_section

from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.backends.embedded import embedded_backend
from permsc_integrations.metrics import kendall_tau
from permsc_integrations.permutations import sample_permutations
from permsc_integrations.prompts import get_prompt
from permsc_integrations.results import ParseStatus

DATA = Path(__file__).resolve().parents[2] / "shared/data/trec-dl/normalized/dl19.bm25.top100.jsonl"


def window(items: int, words: int) -> tuple[str, list[str]]:
    row = json.loads(DATA.open().readline())
    texts = [" ".join(c["text"].split()[:words]) for c in row["candidates"][:items]]
    return row["query"], texts


def quality(prompt, texts, answers) -> dict[str, float]:
    statuses, echo = [], []
    for answer in answers:
        try:
            parsed = prompt.parse(answer.text, len(texts))
        except ValueError:
            statuses.append(ParseStatus.INVALID)
            continue
        statuses.append(parsed.status)
        if len(parsed.ranking) >= 2:  # tau of the answer to the order it was shown in
            echo.append(kendall_tau(list(parsed.ranking), sorted(parsed.ranking)))
    n = len(statuses)
    return {
        "full": sum(s == ParseStatus.OK for s in statuses) / n,
        "partial": sum(s == ParseStatus.PARTIAL for s in statuses) / n,
        "invalid": sum(s == ParseStatus.INVALID for s in statuses) / n,
        "echo_tau": sum(echo) / len(echo) if echo else float("nan"),
    }


async def measure(args: argparse.Namespace) -> dict[str, object]:
    query, texts = window(args.items, args.words)
    prompt = get_prompt("rankgpt", max_words=args.words)
    perms = sample_permutations(len(texts), args.m, seed=0)
    batch = [prompt.render(query, [texts[i] for i in p]) for p in perms]
    backend = embedded_backend(device=args.device)
    backend.load()
    settings = GenerationSettings(max_tokens=args.max_new_tokens)
    await backend.acomplete(batch[0], GenerationSettings(max_tokens=2))  # warm-up
    began = time.perf_counter()
    batched = await backend.acomplete_batch(batch, settings)
    t_batch = time.perf_counter() - began
    print(f"batched: {t_batch:.1f} s", file=sys.stderr, flush=True)  # noqa: T201
    began = time.perf_counter()
    single = [await backend.acomplete(b, settings) for b in batch]
    t_single = time.perf_counter() - began
    gen_b = sum(c.usage.completion_tokens for c in batched)
    gen_s = sum(c.usage.completion_tokens for c in single)
    return {
        "device": f"{backend.device}/{backend.dtype}",
        "items": len(texts),
        "m": args.m,
        "prompt_tokens": sum(c.usage.prompt_tokens for c in batched) // args.m,
        "t_batch": t_batch,
        "t_single": t_single,
        "gen_batch": gen_b,
        "gen_single": gen_s,
        "examples": sorted({c.text.replace("\n", " ")[:60] for c in batched})[:4],
        "same": sum(a.text == b.text for a, b in zip(batched, single, strict=True)),
        "quality": quality(prompt, texts, batched),
    }


def render(r: dict, args: argparse.Namespace) -> str:
    q = r["quality"]
    return "\n".join(
        [
            "## Local model: batched vs one by one\n",
            "Embedded SmolLM2-135M-Instruct (GGUF Q4_1 via transformers) on "
            f"{r['device']}: one window of {r['items']} DL19 BM25 passages (first query, "
            f"cut to {args.words} words; "
            f"~{r['prompt_tokens']} prompt tokens each), m={r['m']} RankGPT prompts, greedy, "
            f"at most {args.max_new_tokens} new tokens.\n",
            "| mode | wall s | generated tokens | generated tok/s | prompt + generated tok/s |",
            "|---|---|---|---|---|",
            f"| one `generate` for all {r['m']} (left-padded batch) | {r['t_batch']:.1f} | "
            f"{r['gen_batch']} | {r['gen_batch'] / r['t_batch']:.2f} | "
            f"{(r['gen_batch'] + r['prompt_tokens'] * r['m']) / r['t_batch']:.0f} |",
            f"| {r['m']} calls one by one | {r['t_single']:.1f} | {r['gen_single']} | "
            f"{r['gen_single'] / r['t_single']:.2f} | "
            f"{(r['gen_single'] + r['prompt_tokens'] * r['m']) / r['t_single']:.0f} |",
            "",
            f"One by one / batched wall time: **{r['t_single'] / r['t_batch']:.1f}x**. "
            f"Identical texts in both modes: {r['same']} of {r['m']}.",
            "",
            f"Answer quality (batched answers): {q['full']:.0%} full valid rankings, "
            f"{q['partial']:.0%} partial, {q['invalid']:.0%} unparseable; mean Kendall tau of a "
            f"parsed answer to the order it was shown in: {q['echo_tau']:.2f} (1.0 = pure echo; "
            "nan: no answer named two or more passages). Distinct answers seen: "
            + ", ".join(f"`{t}`" for t in r["examples"])
            + ".",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("-m", type=int, default=20)
    parser.add_argument("--words", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--device", default=None)
    parser.add_argument("--section", default="local")
    args = parser.parse_args()
    result = anyio.run(measure, args)
    write_section(args.section, render(result, args))
    print(render(result, args))  # noqa: T201


if __name__ == "__main__":
    main()
