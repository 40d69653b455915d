"""The ``permsc`` command line: ``rank``, ``demo``, ``estimate`` (and ``eval`` when present).

Each subcommand lives in its own module exposing ``add_parser(subparsers)``; errors print
one line on stderr and exit with status 2, never a traceback.

Example:
    >>> main(["estimate", "--input", "/no/such/file.jsonl"])
    2
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from permsc_integrations.backends import MASK, is_secret_name, redact_text
from permsc_integrations.cli._common import one_line, report, show_model_progress
from permsc_integrations.errors import PermscError

__all__ = ["main"]

_SUBCOMMANDS = ("rank", "demo", "estimate", "eval", "models", "serve", "mcp")


class _Parser(argparse.ArgumentParser):
    """A parser that takes no abbreviated flag: ``--max-call`` is not silently
    ``--max-calls`` (a later flag sharing the prefix would change what it means); it gets the
    closest flags instead. Subcommands' parsers are of the same class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """argparse's error (usage, message, exit 2), with every URL's credentials masked: a
        message quotes what was typed (``--base-url http://user:password@...``)."""
        super().error(redact_text(message))


def build_parser() -> argparse.ArgumentParser:
    """The parser with every available subcommand (``eval`` only if its module exists)."""
    parser = _Parser(
        prog="permsc",
        description="Permutation self-consistency for LLM listwise ranking.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBCOMMANDS:
        module_name = f"{__name__}._{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # an optional subcommand not shipped
                continue
            raise
        command = module.add_parser(subparsers)
        command.set_defaults(command_parser=command)
    return parser


def _unknown_flags(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """argparse's message for arguments ``parser`` does not take, each flag with the closest
    flags it does take."""
    known = [s for action in parser._actions for s in action.option_strings]
    words, secret = [], False  # secret: the word follows a secret-named flag (--api-key)
    for word in extra:
        flag, equals, value = word.partition("=")
        if not word.startswith("-"):
            words.append(MASK if secret else word)
            secret = False
            continue
        close = difflib.get_close_matches(flag, known, n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        secret = is_secret_name(flag.lstrip("-"))
        words.append(flag + (equals + MASK if secret and equals else equals + value) + hint)
        secret = secret and not equals
    return f"unrecognized arguments: {' '.join(words)}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``permsc`` with ``argv`` (default: the process arguments); returns the exit status.
    A flag the subcommand does not take gets that subcommand's usage and the closest flags."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "command_parser", parser)
        command.error(_unknown_flags(command, extra))  # exits 2, as argparse does
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    if args.command != "serve":  # serve configures its own logging
        show_model_progress()
    try:
        return int(args.run(args))
    except (PermscError, OSError) as exc:
        report(f"error: {one_line(exc)}")
        return 2
    except KeyboardInterrupt:
        report("interrupted")
        return 130
