"""The real-answer benchmark's report (benchmarks/real_answers.py)."""

from __future__ import annotations

import argparse
import json


def report(rows: list[dict], args: argparse.Namespace) -> None:
    args.results.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
