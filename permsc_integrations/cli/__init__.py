"""The ``permsc`` command line: ``rank``, ``demo``, ``estimate`` (and ``eval`` when present).

Each subcommand lives in its own module exposing ``add_parser(subparsers)``; errors print
one line on stderr and exit with status 2, never a traceback.

Example:
    >>> main(["estimate", "--input", "/no/such/file.jsonl"])
    2
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import PermscError
from ._common import one_line, report

__all__ = ["main", "build_parser"]

_SUBCOMMANDS = ("rank", "demo", "estimate", "eval", "models", "serve", "mcp")


def build_parser() -> argparse.ArgumentParser:
    """The parser with every available subcommand (``eval`` only if its module exists)."""
    parser = argparse.ArgumentParser(
        prog="permsc",
        description="Permutation self-consistency for LLM listwise ranking.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBCOMMANDS:
        module_name = f"{__name__}.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # an optional subcommand not shipped
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``permsc`` with ``argv`` (default: the process arguments); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except (PermscError, OSError) as exc:
        report(f"error: {one_line(exc)}")
        return 2
    except KeyboardInterrupt:
        report("interrupted")
        return 130
