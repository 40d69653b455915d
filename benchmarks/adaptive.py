"""Adaptive m against fixed m = 5, 10, 20: calls per window, quality, and waves (latency).

(a) The scripted server's noise model (``noisy_responder``: each sample keeps a random share
    ``keep`` of the true order in place and shuffles the rest; 1.0 = a self-consistent model),
    one window of 20 items, through the real openai client. A wave is one round trip: a window
    ranked in w waves takes about w x L instead of 1 x L.
(b) Real answers of the embedded 1.5B model saved by the reproduction
    (``docs/results/*sort*-qwen.samples.jsonl``), re-aggregated offline: the adaptive rule walks the
    saved sample sequence wave by wave, exactly as the engine would have drawn it.

Run: ``.venv/bin/python benchmarks/adaptive.py`` (about a minute). Writes the "adaptive"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section  # noqa: E402

from permsc_integrations import PSCRanker, aggregate  # noqa: E402
from permsc_integrations.adaptive import Adaptive, waves  # noqa: E402
from permsc_integrations.eval.datasets import kendall_tau_b  # noqa: E402
from permsc_integrations.eval.report import bootstrap_ci  # noqa: E402
from permsc_integrations.eval.samples import read_samples  # noqa: E402
from permsc_integrations.metrics import kendall_tau  # noqa: E402
from permsc_integrations.testing import ScriptedOpenAIServer, noisy_responder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POLICY = Adaptive()


def scripted(keep: float, lists: int) -> list[str]:
    items = [f"item {'x' * (k + 1)}" for k in range(20)]
    truth = sorted(range(20), key=lambda i: -len(items[i]))
    rows = []
    with ScriptedOpenAIServer(noisy_responder(len, keep=keep, seed=11)) as server:
        for label, m, policy in [
            ("m=5", 5, None),
            ("m=10", 10, None),
            ("m=20", 20, None),
            ("adaptive", 20, POLICY),
        ]:
            taus, calls, rounds = [], [], []
            waves_seen: list[int] = []
            with PSCRanker(
                "openai:m",
                num_permutations=m,
                adaptive=policy,
                backend_options={"base_url": server.base_url},
                on_event=lambda e, seen=waves_seen: (
                    seen.append(1) if e.kind == "wave_end" else None
                ),
            ) as r:
                for q in range(lists):
                    waves_seen.clear()
                    result = r.rank(f"query {q}", items)
                    taus.append(kendall_tau(result.order, truth))
                    calls.append(len(result.samples))
                    rounds.append(max(1, len(waves_seen)))
            rows.append(
                f"| {keep:.1f} | {label} | {statistics.fmean(calls):.1f} | "
                f"{statistics.fmean(taus):.3f} | {statistics.fmean(rounds):.1f} |"
            )
    return rows


def offline(path: Path) -> list[str]:
    _, lists = read_samples(path)
    name = path.name.replace(".samples.jsonl", "")

    def run(policy: Adaptive | None, cap: int) -> tuple[float, float, list[float]]:
        taus, calls = [], []
        for s in lists.values():
            n, drawn = len(s.example.items), 0
            for _, end in waves(policy, cap):
                drawn = end
                good = [r for r in s.rankings[:end] if r]
                if (
                    policy
                    and end < cap
                    and len(good) >= max(1, end // 2)
                    and policy.stable(good, n_items=n, aggregator="kemeny")
                ):
                    break
            good = [r for r in s.rankings[:drawn] if r]
            order = aggregate(good, method="kemeny", n_items=n) if good else list(range(n))
            taus.append(kendall_tau_b(tuple(order), s.example.keys))
            calls.append(drawn)
        return statistics.fmean(taus), statistics.fmean(calls), taus

    rows = []
    for label, policy, cap in [
        ("m=5", None, 5),
        ("m=10", None, 10),
        ("m=20", None, 20),
        ("adaptive", POLICY, 20),
    ]:
        tau, calls, taus = run(policy, cap)
        low, high = bootstrap_ci(taus)
        rows.append(
            f"| {name} ({len(lists)} lists) | {label} | {calls:.1f} | {tau:.3f} "
            f"({low:.3f}..{high:.3f}) |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lists", type=int, default=12, help="scripted lists per noise level")
    ap.add_argument(
        "samples",
        nargs="*",
        type=Path,
        default=sorted((ROOT / "docs" / "results").glob("*sort*-qwen.samples.jsonl")),  # sorting
    )
    args = ap.parse_args()
    body = [
        f"Adaptive m = `{POLICY}` (cap 20) against fixed m; Kemeny throughout.",
        "",
        f"(a) Scripted noise model, one window of 20 items, {args.lists} lists per level:",
        "",
        "| keep | m | calls per window | Kendall tau to the truth | waves (x L) |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for keep in (1.0, 0.8, 0.6, 0.4, 0.2):
        body += scripted(keep, args.lists)
    body += [
        "",
        "(b) Saved answers of the embedded 1.5B model, re-aggregated offline (95% bootstrap CI):",
        "",
        "| samples | m | calls per list | Kendall tau (95% CI) |",
        "| --- | --- | ---: | ---: |",
    ]
    for path in args.samples:
        body += offline(path)
    write_section("adaptive", "\n".join(body))
    sys.stdout.write("\n".join(body) + "\n")


if __name__ == "__main__":
    main()
