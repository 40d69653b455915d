"""First-token scoring on a GPU through ``TransformersBackend``: placement, dtype, batching
and throughput (section "first-token-gpu").

Real weights cannot travel to the lent GPU machine, so the model is the embedded model's
architecture (Qwen2.5-Coder-1.5B's ``config.json``) with random weights, saved to a model
directory beside its real tokenizer and loaded through the backend as a user's directory is.
Random weights say nothing about ranking quality; they cost what real ones cost. Passages
are synthetic (64 words each, seeded), so the prompts are as long as DL19's windows.

Measured, one process: the load (device, dtype), first-token PSC windows through
``PSCRanker`` (m = 1, 5, 20, window 20), one batched pass against one prompt at a time (the
same probabilities?), and the generated mode's cost on the same prompts (the answer cap of
a window of 20, 8 + 6 * 20 = 128 tokens, decoded to the cap).

    python benchmarks/first_token_gpu.py --config-dir .gpu/qwen --out result.md

It runs on a lent machine, so it does not write docs/benchmarks.md itself: the section is
written from ``--out`` with the machine named. ``--tiny`` tries the script on a CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import transformers

from permsc_integrations import PSCRanker, RankingOptions
from permsc_integrations.backends.base import GenerationSettings
from permsc_integrations.backends.local import transformers as local

TransformersBackend = local.TransformersBackend

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
WORDS = "river stone tank fish growth water light garden city bridge paper music".split()


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def build_model_dir(config_dir: Path, into: Path, tiny: bool) -> float:
    """A model directory with random bfloat16 weights; returns the seconds it took."""
    began = time.perf_counter()
    config = transformers.AutoConfig.from_pretrained(config_dir)
    if tiny:  # a tiny model of the same family, to try the script on a CPU
        config.update({"num_hidden_layers": 1, "layer_types": config.layer_types[:1]})
        config.update({"hidden_size": 64, "intermediate_size": 128})
        config.update({"num_attention_heads": 2, "num_key_value_heads": 1})
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(into)
    for name in (*TOKENIZER_FILES, "generation_config.json"):
        if (config_dir / name).is_file():
            shutil.copy(config_dir / name, into / name)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return time.perf_counter() - began


def passages(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(64)) for _ in range(n)]


def timed_windows(backend: TransformersBackend, m: int, reps: int) -> dict[str, float]:
    """Median wall seconds of a first-token PSC window of 20 at ``m`` shuffles."""
    walls, prompt_tokens = [], 0
    with PSCRanker(
        backend,
        scoring="first_token",
        num_permutations=m,
        window_size=20,
        timeout=None,
        max_words=64,
        min_successful=1,
    ) as ranker:
        ranker.rank("which passage is about fish?", passages(20, 99))  # warm-up
        for rep in range(reps):
            sync()
            began = time.perf_counter()
            result = ranker.rank("which passage is about fish?", passages(20, rep))
            sync()
            walls.append(time.perf_counter() - began)
            prompt_tokens = result.usage.prompt_tokens
            assert len(result.order) == 20 and result.usage.completion_tokens == m
    wall = statistics.median(walls)
    return {"m": m, "wall_s": wall, "prompts_per_s": m / wall, "prompt_tokens": prompt_tokens}


def batch_agreement(backend: TransformersBackend) -> float:
    """Largest probability difference between one padded batch and one prompt at a time,
    on prompts of different lengths (left padding must not change a row's answer)."""
    prompt = RankingOptions(scoring="first_token", max_words=64).build_prompt()
    labels = prompt.labels  # type: ignore[attr-defined]
    batch = [prompt.render("q", passages(k, k)) for k in (20, 12, 5)]
    settings = GenerationSettings()

    async def both() -> tuple[list[Any], list[Any]]:
        together = await backend.afirst_token_batch(batch, labels[:20], settings)
        alone = [await backend.afirst_token(b, labels[:20], settings) for b in batch]
        return together, alone

    together, alone = asyncio.run(both())
    return max(
        abs(a - b)
        for t, s in zip(together, alone, strict=True)
        for a, b in zip(t.probabilities, s.probabilities, strict=True)
    )


def generated_cost(backend: TransformersBackend, m: int) -> dict[str, float]:
    """The generated mode's batch of ``m`` RankGPT prompts of a window of 20, decoded to
    the answer cap (random weights rarely stop early; the tokens made are counted)."""
    prompt = RankingOptions(max_words=64).build_prompt()
    batch = [prompt.render("which passage is about fish?", passages(20, k)) for k in range(m)]
    settings = GenerationSettings(max_tokens=8 + 6 * 20)
    asyncio.run(backend.acomplete_batch(batch[:1], settings))  # warm-up
    sync()
    began = time.perf_counter()
    done = asyncio.run(backend.acomplete_batch(batch, settings))
    sync()
    wall = time.perf_counter() - began
    return {"m": m, "wall_s": wall, "output_tokens": sum(c.usage.completion_tokens for c in done)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config-dir", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="a tiny model (a quick try on a CPU)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    lines = []

    def say(line: str) -> None:
        lines.append(line)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    with tempfile.TemporaryDirectory() as tmp:
        built = build_model_dir(args.config_dir, Path(tmp), args.tiny)
        backend = TransformersBackend(tmp)
        began = time.perf_counter()
        backend.load()
        loaded = time.perf_counter() - began
        param = next(local._load(backend._key).model.parameters())  # noqa: SLF001
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
        say(f"GPU: {gpu}; torch {torch.__version__}, transformers {transformers.__version__}")
        say(
            f"built random weights in {built:.1f} s, loaded in {loaded:.1f} s; backend "
            f"device={backend.device} dtype={backend.dtype}; parameters on {param.device} "
            f"as {param.dtype}"
        )
        say(
            f"one batch vs one prompt at a time: largest probability difference "
            f"{batch_agreement(backend):.2e}"
        )
        say("| mode | m | wall s a window | prompts/s | output tokens | prompt tokens |")
        say("| --- | ---: | ---: | ---: | ---: | ---: |")
        rows = [timed_windows(backend, m, args.reps) for m in (1, 5, 20)]
        for r in rows:
            say(
                f"| first_token | {r['m']} | {r['wall_s']:.3f} | {r['prompts_per_s']:.1f} | "
                f"{r['m']} | {r['prompt_tokens']} |"
            )
        gen = generated_cost(backend, 20)
        say(
            f"| generate (to the cap) | 20 | {gen['wall_s']:.3f} | {20 / gen['wall_s']:.1f} | "
            f"{gen['output_tokens']} | |"
        )
        say(
            f"first_token at m = 20: {gen['wall_s'] / rows[-1]['wall_s']:.1f}x less wall time "
            f"than decoding the generated answers; peak GPU memory "
            f"{torch.cuda.max_memory_allocated() / 2**30 if gpu != 'none' else 0:.1f} GiB"
        )
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
