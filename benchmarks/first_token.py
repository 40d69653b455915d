"""Generated PSC vs first-token PSC on the same DL19 windows, side by side (section
"first-token").

One window per query (BM25 top 20, passages cut to 64 words, the RankGPT wording for the
generated answers and its first-token form), the same m shuffles, the same local model and
process: *generate* writes each ranking (greedy, the usual cap of 8 + 6 tokens a passage),
*first_token* reads the first token's label probabilities in one forward pass. The two modes
alternate query by query (which goes first alternates too); the model is loaded before timing.

    python benchmarks/first_token.py                       # qwen2.5-coder-1.5b, m = 2, 2 queries
    python benchmarks/first_token.py --backend embedded:smollm2-135m -m 4 --queries 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker  # noqa: E402
from permsc_integrations.backends import resolve_backend  # noqa: E402
from permsc_integrations.eval._trec import read_candidates  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trec-dl"
MODES = ("generate", "first_token")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="embedded:qwen2.5-coder-1.5b")
    ap.add_argument("-m", type=int, default=2)
    ap.add_argument("--queries", type=int, default=2)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--data", default=str(DATA / "normalized" / "dl19.bm25.top100.jsonl"))
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    queries = read_candidates(args.data, depth=args.depth)[: args.queries]
    backend = resolve_backend(args.backend)
    getattr(backend, "load", lambda: None)()
    seen: dict[str, list[tuple[float, int, int]]] = {mode: [] for mode in MODES}
    for k, q in enumerate(queries):
        texts = [c.text for c in q.candidates]
        for mode in MODES if k % 2 == 0 else MODES[::-1]:
            options = {
                "num_permutations": args.m,
                "window_size": len(texts),
                "max_words": 64,
                "timeout": None,
                "scoring": mode,
                "max_tokens": 8 + 6 * len(texts),
                "min_successful": 1,
            }
            with PSCRanker(backend, **options) as ranker:
                began = time.perf_counter()
                result = ranker.rank(q.query, texts)
                took = time.perf_counter() - began
            u = result.usage
            seen[mode].append((took, u.completion_tokens, u.prompt_tokens))
            sys.stdout.write(f"{q.qid} {mode}: {took:.1f} s, {u.completion_tokens} output tokens\n")
            sys.stdout.flush()
    body = _table(seen, args, backend.name)
    sys.stdout.write(body + "\n")
    if not args.no_write:
        write_section("first-token", body)


def _table(
    seen: dict[str, list[tuple[float, int, int]]], args: argparse.Namespace, name: str
) -> str:
    def mean(mode: str, i: int) -> float:
        return statistics.fmean(row[i] for row in seen[mode])

    gen, ft = "generate", "first_token"
    lines = [
        "## First-token scoring vs generated rankings (one window)",
        "",
        f"{name}, DL19 BM25 top {args.depth} (64 words a passage), one window per query, "
        f"m = {args.m}, {len(seen[gen])} queries; means per window, side by side in one run.",
        "",
        "| scoring | wall s | output tokens | prompt tokens |",
        "| --- | ---: | ---: | ---: |",
    ]
    for mode in (gen, ft):
        lines.append(
            f"| {mode} | {mean(mode, 0):.1f} | {mean(mode, 1):.0f} | {mean(mode, 2):.0f} |"
        )
    lines += [
        "",
        f"first_token: **{mean(gen, 1) / mean(ft, 1):.0f}x fewer output tokens**, "
        f"**{mean(gen, 0) / mean(ft, 0):.1f}x less wall time** per window.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
