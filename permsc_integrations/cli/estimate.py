"""``permsc estimate``: the calls and tokens a ``permsc rank`` run would spend, before it runs.

Calls are exact for the planned windows (windows x m per query; re-asks and retries come on
top). Tokens are approximate: characters / 4 of the rendered prompts, no tokenizer needed.

Example:
    $ permsc estimate --input dl19.bm25.top100.jsonl -m 20
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Any

from ..backends.base import Message
from ..window_plan import plan_windows
from ._common import Query, add_ranking_arguments, cli_options, load_queries, say

__all__ = ["add_parser", "run", "Estimate", "estimate_query", "approx_tokens"]

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4  # role and separators in chat formats
ANSWER_TOKENS_PER_ITEM = 6  # "[12] > "


@dataclass(frozen=True, slots=True)
class Estimate:
    """What ranking some queries would spend (tokens approximate)."""

    queries: int = 0
    items: int = 0
    windows: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(
            *(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=True))
        )


def approx_tokens(messages: list[Message]) -> int:
    """Approximate prompt tokens: characters / 4, plus a few per message.

    >>> approx_tokens([{"role": "user", "content": "x" * 400}])
    104
    """
    chars = sum(len(m["content"]) for m in messages)
    return chars // CHARS_PER_TOKEN + TOKENS_PER_MESSAGE * len(messages)


def estimate_query(
    query: Query, prompt: Any, *, m: int, window_size: int, step: int, top_k: int | None
) -> Estimate:
    """Windows x m calls; each window's prompt rendered on the items it starts with."""

    plan = plan_windows(len(query.texts), window_size=window_size, step=step, top_k=top_k)
    prompt_tokens = completion = 0
    for window in plan:
        shown = list(query.texts[window.start : window.end])
        prompt_tokens += approx_tokens(prompt.render(query.query, shown))
        completion += ANSWER_TOKENS_PER_ITEM * len(shown)
    return Estimate(
        1, len(query.texts), len(plan), len(plan) * m, prompt_tokens * m, completion * m
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("estimate", help="calls and tokens a rank run would spend")
    parser.add_argument("--input", "-i", required=True, help="JSONL file, as for 'permsc rank'")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_ranking_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    options = cli_options(args)  # a bad option fails here, as it would in 'rank'
    prompt = options.build_prompt()
    queries, bad = load_queries(args.input)
    total = Estimate()
    for query in queries:
        total += estimate_query(
            query,
            prompt,
            m=options.num_permutations,
            window_size=options.window_size,
            step=options.step,
            top_k=options.top_k,
        )
    if args.json:
        say(json.dumps({**asdict(total), "bad_lines": bad, "tokens": "approximate (chars/4)"}))
    else:
        say(f"queries:           {total.queries} ({bad} bad lines skipped)")
        say(f"items:             {total.items}")
        say(f"windows:           {total.windows}")
        say(
            f"calls:             {total.calls} (windows x m={options.num_permutations}; "
            "re-asks and retries come on top)"
        )
        say(f"prompt tokens:     ~{total.prompt_tokens:,} (approximate: characters / 4)")
        say(f"completion tokens: ~{total.completion_tokens:,} (approximate: 6 per ranked item)")
    return 2 if bad else 0
