"""The real-answer benchmark's report: docs/results JSON, docs/benchmarks.md "real answers"
and docs/img/real-answers.png (benchmarks/real_answers.py)."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from _real_lists import bootstrap
from _report import write_section

ROOT = Path(__file__).resolve().parents[1]
PLOT = ROOT / "docs" / "img" / "real-answers.png"
FIELDS = ("ndcg", "calls", "tokens", "rounds")


def is_reference(method: str) -> bool:
    """A method ``PSC max_calls`` runs at the calls of: a blocks m or a peer (adaptive's or the
    sliding window's calls matching a max_calls row's budget are a coincidence, not a pair)."""
    return method.startswith("PSC blocks") or not method.startswith("PSC")


def _name(row: dict) -> str:
    return row["method"] if "budget" not in row else f"PSC max_calls={row['budget']}"


def summary(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """task -> method -> mean and 95 % bootstrap interval (over lists) of each field.
    ``PSC max_calls`` rows are grouped by the method whose calls they match (``at``)."""
    out: dict[str, dict[str, dict]] = {}
    for task in sorted({r["task"] for r in rows}):
        mine = [r for r in rows if r["task"] == task]
        groups: dict[str, list[dict]] = {}
        for r in mine:
            groups.setdefault(r["method"], []).append(r)
        for ref in [m for m in groups if is_reference(m)]:
            at = _matched(mine, ref)
            if at:
                groups[f"PSC max_calls @ {ref}"] = at
        groups.pop("PSC max_calls", None)
        out[task] = {name: _stats(g) for name, g in groups.items()}
    return out


def _matched(rows: list[dict], ref: str) -> list[dict]:
    """For each list, the PSC max_calls row at the calls ``ref`` made on it."""
    out = []
    for r in rows:
        if r["method"] == ref:
            out += [
                b for b in rows
                if b["method"] == "PSC max_calls" and b["list"] == r["list"]
                and b["budget"] == r["calls"]
            ][:1]
    return out


def _stats(rows: list[dict]) -> dict:
    stats: dict = {"lists": len(rows), "errors": sum(1 for r in rows if "error" in r)}
    for f in FIELDS:
        values = [float(r[f]) for r in rows]
        stats[f] = statistics.fmean(values)
        stats[f + "_ci"] = bootstrap(values)
    return stats


def paired(rows: list[dict], ref: str, task: str) -> tuple[float, tuple[float, float], int]:
    """PSC max_calls at ``ref``'s calls minus ``ref``, nDCG@10: mean, interval, lists."""
    mine = [r for r in rows if r["task"] == task]
    by_list = {r["list"]: r for r in mine if r["method"] == ref}
    diffs = [b["ndcg"] - by_list[b["list"]]["ndcg"] for b in _matched(mine, ref)]
    if not diffs:
        return float("nan"), (float("nan"), float("nan")), 0
    return statistics.fmean(diffs), bootstrap(diffs), len(diffs)


def _ci(s: dict, f: str, digits: int) -> str:
    lo, hi = s[f + "_ci"]
    return f"{s[f]:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def tables(rows: list[dict], results: dict[str, dict[str, dict]]) -> list[str]:
    lines = []
    for task, methods in results.items():
        lines += [
            f"**{task}**", "",
            "| method | lists | nDCG@10 | calls | tokens | rounds |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, s in sorted(methods.items(), key=lambda kv: (kv[1]["calls"], kv[0])):
            errors = f" ({s['errors']} failed)" if s["errors"] else ""
            lines.append(
                f"| {name} | {s['lists']}{errors} | {_ci(s, 'ndcg', 3)} | {_ci(s, 'calls', 1)} "
                f"| {_ci(s, 'tokens', 0)} | {_ci(s, 'rounds', 1)} |"
            )
        lines += ["", "| at the calls of | PSC max_calls - it, nDCG@10 | lists |",
                  "| --- | ---: | ---: |"]
        for ref in sorted(m for m in methods if is_reference(m)):
            mean, (lo, hi), n = paired(rows, ref, task)
            if n:
                lines.append(f"| {ref} | {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] | {n} |")
        lines.append("")
    return lines


def report(rows: list[dict], args: argparse.Namespace) -> None:
    results = summary(rows)
    settings = {k: v for k, v in vars(args).items() if isinstance(v, (int, str, float, bool))}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(
        json.dumps({"settings": settings, "summary": results, "rows": rows}, indent=1) + "\n"
    )
    lists = sorted({r["list"] for r in rows})
    intro = (
        f"Top 10 of lists longer than a window, answered by the embedded {args.model} on this "
        f"CPU (greedy, through `BackendOpenAIServer` and the answer store "
        f"`{_rel(args.store)}`, {args.store_size} answers), window 10: {len(lists)} lists "
        f"({', '.join(lists)}; {args.min_items}-{args.max_items} items, seed {args.seed}). "
        "nDCG@10 with linear gains 10 - (items strictly before it; ties kept); calls, tokens "
        "(the model's prompt + completion tokens), sequential rounds; means over lists with "
        "95 % bootstrap intervals over lists. *PSC max_calls @ X*: `max_calls` = the calls X "
        "made on the same list; the second table is the paired difference. PSC asks the "
        "paper's sorting prompt, the blitzrank peers their RankGPT prompt with the task as "
        f"the query. Rows: `{_rel(args.results)}`; plot: docs/img/real-answers.png."
    )
    body = "## Real answers (issue 39; benchmarks/real_answers.py)\n\n" + intro + "\n\n"
    write_section("real answers", body + "\n".join(tables(rows, results)))
    plot(results)


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def plot(results: dict[str, dict[str, dict]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2), squeeze=False)
    for ax, (task, methods) in zip(axes[0], results.items(), strict=True):
        for name, s in methods.items():
            style = ("o" if name.startswith("PSC max_calls") else
                     "s" if name.startswith("PSC") else "^")
            color = ("tab:blue" if name.startswith("PSC max_calls") else
                     "tab:green" if name.startswith("PSC") else "tab:red")
            lo, hi = s["ndcg_ci"]
            ax.errorbar(s["calls"], s["ndcg"], yerr=[[s["ndcg"] - lo], [hi - s["ndcg"]]],
                        fmt=style, color=color, capsize=2)
            ax.annotate(name.replace("PSC max_calls @ ", "B=@"), (s["calls"], s["ndcg"]),
                        fontsize=6, xytext=(3, -3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_title(f"{task}: embedded Qwen2.5-Coder-1.5B, window 10")
        ax.set_xlabel("calls per list (log)")
        ax.set_ylabel("nDCG@10 (95 % bootstrap over lists)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)
