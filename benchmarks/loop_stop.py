"""Does stopping looping answers change what they say? Replay saved answers token by token.

Reads a samples file written by ``permsc eval --samples`` with a local model (no generation:
only the model's tokenizer is loaded). Each saved answer is re-tokenized and cut where
:func:`permsc_integrations.backends.local._repetition.repeats_itself` first fires, as the
transformers backend's per-row stop would; the cut text is parsed again with the task's
prompt. Reports how many answers are cut, how many parsed rankings change (the target is none),
and the decode steps of each list's batch (the longest row) with and without the stop. Writes
the "loop-stop" section of docs/benchmarks.md.

    python benchmarks/loop_stop.py docs/results/wordsort-qwen.samples.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations.backends.local._gguf_cache import prepared_folder  # noqa: E402
from permsc_integrations.backends.local._model_store import gguf_path  # noqa: E402
from permsc_integrations.backends.local._repetition import repeats_itself  # noqa: E402
from permsc_integrations.cli._eval import sorting_max_tokens  # noqa: E402
from permsc_integrations.eval._samples import ListSamples, read_samples  # noqa: E402
from permsc_integrations.prompts import get_prompt  # noqa: E402


def first_loop(ids: list[int]) -> int | None:
    """The number of tokens generated when the stop would fire, or None."""
    return next((t for t in range(1, len(ids) + 1) if repeats_itself(ids[:t])), None)


def replay(
    samples: ListSamples, prompt: Any, tokenizer: Any, cap: int
) -> tuple[int, int, int, int]:
    """``(cut, changed, steps without, steps with)`` for one list's batch."""
    cut = changed = 0
    before = after = 0
    for perm, text in zip(samples.permutations, samples.raw_texts, strict=True):
        ids = tokenizer.encode(text, add_special_tokens=False)
        full = min(len(ids) + 1, cap)  # + its end token, unless it ran to the cap
        stop = first_loop(ids)  # the stop watches every row that has not ended
        before, after = max(before, full), max(after, stop or full)
        if stop is None:
            continue
        cut += 1
        shown = [samples.example.items[i] for i in perm]
        kept = tokenizer.decode(ids[:stop])
        if (
            prompt.parse(kept, len(shown), shown).ranking
            != prompt.parse(text, len(shown), shown).ranking
        ):
            changed += 1
    return cut, changed, before, after


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("samples")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--section", default="loop-stop")
    args = parser.parse_args()
    import transformers

    header, found = read_samples(args.samples)
    folder = prepared_folder(gguf_path(args.model))  # the tokenizer, as prepared
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    prompt = get_prompt(header.get("prompt", "wordsort"))
    totals = [0, 0, 0, 0]
    answers = 0
    for samples in found.values():
        cap = sorting_max_tokens(len(samples.example.items))  # as `permsc eval` capped it
        for i, value in enumerate(replay(samples, prompt, tokenizer, cap)):
            totals[i] += value
        answers += len(samples.raw_texts)
    cut, changed, before, after = totals
    text = "\n".join(
        [
            "## Loop stop: cutting answers that repeat themselves\n",
            f"{len(found)} lists of `{args.samples}` ({header.get('backend')}, "
            f"m={header.get('m')}), replayed token by token with the model's tokenizer "
            "(no generation).\n",
            "| answers | cut in a loop | parsed rankings changed | batch decode steps, no stop "
            "| with stop | ratio |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {answers} | {cut} | {changed} | {before} | {after} | {after / before:.2f} |",
        ]
    )
    write_section(args.section, text)
    print(text)  # noqa: T201


if __name__ == "__main__":
    main()
