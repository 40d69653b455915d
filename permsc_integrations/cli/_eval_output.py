"""What ``permsc eval`` shows and keeps, shared by its sorting and TREC paths: the progress bar,
the reports (stdout, ``--markdown``, ``--json``, ``--sweep-png``) and the ``--samples`` log."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from permsc_integrations.errors import ConfigurationError

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations.eval import EvalReport, ListSamples, RunRecord, SampleLog

__all__ = ["progress", "emit_reports", "samples_log"]


def progress(args: argparse.Namespace, label: str) -> Callable[[int, int], None] | None:
    if args.no_progress:
        return None
    try:
        # lazy: optional dependency (the eval extra)
        from tqdm import tqdm
    except ImportError:
        return None
    bar = tqdm(desc=label, file=sys.stderr, unit="list")

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return update


def emit_reports(args: argparse.Namespace, reports: list[EvalReport]) -> None:
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import EvalReport

    parts = []
    for r in reports:
        if isinstance(r, EvalReport):
            ndcg = r.metric.startswith("ndcg")
            parts.append(r.to_markdown(scale=100.0 if ndcg else 1.0, digits=2 if ndcg else 3))
    markdown = "\n".join(parts)
    sys.stdout.write(markdown)
    if args.sweep_png:
        # lazy: matplotlib, only for --sweep-png
        from permsc_integrations.eval import sweep_png

        sweep_png(reports[-1], args.sweep_png)
    if args.markdown:
        Path(args.markdown).write_text(markdown, encoding="utf-8")
    if args.json:
        payload = [r.to_dict() for r in reports]
        Path(args.json).write_text(
            json.dumps(payload if len(payload) > 1 else payload[0], indent=2) + "\n"
        )


def samples_log(
    args: argparse.Namespace, config: RunRecord
) -> tuple[SampleLog | None, dict[str, ListSamples]]:
    """The --samples log (new, or resumed with the lists it already holds)."""
    # lazy: start-up time of every permsc command
    from permsc_integrations.eval import SampleLog

    if not args.samples:
        if args.resume:
            raise ConfigurationError("--resume continues a --samples file: name it")
        return None, {}
    if len(args.temperature) > 1:
        raise ConfigurationError("--samples holds one temperature: run one at a time")
    if args.resume and Path(args.samples).exists():
        extend = config.get("task") == "trec" and config.get("scoring") == "first_token"
        return SampleLog.resume(args.samples, config, extend=extend)
    return SampleLog.create(args.samples, config), {}
