"""Shared pieces of the ``permsc`` subcommands: arguments, input lines, backend, progress.

Example:
    >>> parse_line('{"query": "q", "items": ["a", "b"]}', 1).docids
    ('0', '1')
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from permsc_integrations.backends import resolve_backend
from permsc_integrations.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:  # lazy: start-up time of every permsc command
    from argparse import _ArgumentGroup, _SubParsersAction

    from permsc_integrations._options.keywords import RankingKeywords
    from permsc_integrations._options.options import RankingOptions
    from permsc_integrations.backends.base import Backend

    Subparsers = _SubParsersAction[argparse.ArgumentParser]  # what add_parser takes

__all__ = [
    "LOCAL_KINDS",
    "BACKEND_FLAGS",
    "SERVICE_FLAGS",
    "ALIASES",
    "Query",
    "LineError",
    "add_backend_arguments",
    "add_ranking_arguments",
    "ranking_flags",
    "backend_spec",
    "build_backend",
    "ranker_options",
    "cli_options",
    "read_queries",
    "load_queries",
    "read_input",
    "parse_line",
    "one_line",
    "report",
    "say",
    "show_model_progress",
]

LOCAL_KINDS = ("embedded", "transformers", "llamacpp")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


@dataclass(frozen=True, slots=True)
class Query:
    """One input line: ``items`` are what the caller gave (texts or mappings)."""

    qid: str
    query: str
    texts: tuple[str, ...]
    docids: tuple[str, ...]
    items: tuple[object, ...]
    plain: bool  # ``{"query", "items"}`` rather than ``{"qid", "query", "candidates"}``
    line: int = 0  # its line (or Parquet row), which is its qid when it names none


class LineError(ConfigurationError):
    """One bad input line; the others are still read."""


def one_line(exc: BaseException) -> str:
    """An error as one line: its first line plus the first detail line, if any."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ".join(lines[:2]) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def report(message: str) -> None:
    """One line on stderr, prefixed with the program name."""
    sys.stderr.write(f"permsc: {message}\n")
    sys.stderr.flush()


class _Report(logging.Handler):
    """Log records as :func:`report` lines (on whatever ``sys.stderr`` is at the time)."""

    def emit(self, record: logging.LogRecord) -> None:
        report(self.format(record))


def show_model_progress() -> None:
    """Show what a local model's first use does (assembling its file, reading its
    tokenizer, loading its weights) as ``permsc:`` lines on stderr: minutes on a CPU that
    would otherwise pass in silence. Once per process."""
    logger = logging.getLogger("permsc_integrations.backends.local")
    if not any(isinstance(h, _Report) for h in logger.handlers):
        logger.addHandler(_Report(logging.INFO))
        logger.setLevel(logging.INFO)


def say(text: str = "") -> None:
    """One line of command output on stdout."""
    sys.stdout.write(text + "\n")


def _flag(
    group: _ArgumentGroup,
    name: str,
    *,
    help: str | None = None,
    filled: bool = False,
    several: bool = False,
    default: object = None,
) -> None:
    """A ``--kebab-name`` flag (and its :data:`ALIASES`) for the option ``name``, from its
    declaration. Left out, it parses as None ("not given", so :func:`ranker_options` can tell
    the two apart) or, ``filled``, as the declared default; ``several``: one value or more,
    parsed as a list; ``default``: a command's own default, shown and used in place of the
    declared one."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._options.options import RankingOptions

    info = next(i for i in RankingOptions.describe() if i.name == name)
    assert info.cli_type is not None, f"{name} is not a command-line option"
    own = default is not None
    value = default if own else info.default
    shown = "" if value is None else f" (default: {value})"
    text = help or (info.cli_help or info.help) + shown
    default = ([value] if several else value) if filled or own else None
    group.add_argument(
        *ALIASES.get(name, ()),
        "--" + name.replace("_", "-"),
        dest=name,
        type=info.cli_type,
        nargs="+" if several else None,
        default=default,
        help=text,
    )


BACKEND_FLAGS = {
    "timeout": "seconds per call (default: 60; none for local models)",
    "max_tokens": "answer length cap (default: ~6 per item for local models)",
}
"""Ranking options offered among the backend's flags (:func:`add_backend_arguments`), with
their help there."""


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("backend")
    g.add_argument(
        "--backend",
        help="spec: 'openai:MODEL', 'transformers:/dir-or-file.gguf', "
        "'llamacpp:/file.gguf' or 'embedded' (default: openai when OPENAI_API_KEY or "
        "OPENAI_BASE_URL is set, else embedded)",
    )
    g.add_argument("--model", help="model name or path, when --backend names only the kind")
    g.add_argument(
        "--base-url", help="OpenAI-compatible server URL (vLLM, Ollama, llama.cpp server)"
    )
    g.add_argument("--device", help="local backends: cpu, cuda, cuda:1 (default: auto)")
    for name, text in BACKEND_FLAGS.items():
        _flag(g, name, help=text)


SERVICE_FLAGS = ("breaker_cooldown",)
"""Ranking options only ``permsc serve`` takes as flags (they matter to a long-lived process)."""


def ranking_flags(*, service: bool = False) -> tuple[str, ...]:
    """The ranking options ``permsc rank`` and ``estimate`` (and, with ``service``, ``permsc
    serve``) take as flags: every option the declaration gives a flag type, in declaration
    order, less :data:`BACKEND_FLAGS` and, unless ``service``, :data:`SERVICE_FLAGS`."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._options.options import RankingOptions

    left_out = {*BACKEND_FLAGS, *(() if service else SERVICE_FLAGS)}
    return tuple(
        info.name
        for info in RankingOptions.describe()
        if info.cli_type is not None and info.name not in left_out
    )


ALIASES = {"num_permutations": ("-m",), "max_concurrency": ("--concurrency",)}
"""Short or older names of a flag, wherever it is offered."""


def add_ranking_arguments(
    parser: argparse.ArgumentParser,
    names: Sequence[str] | None = None,
    *,
    filled: bool = False,
    several: Collection[str] = (),
    defaults: Mapping[str, object] | None = None,
) -> None:
    """The ranking options ``names`` (default: :func:`ranking_flags`) as flags, from the one
    declaration (:mod:`._options.options`): left out, None (or, ``filled``, the declared default);
    those in ``several`` take one value or more; ``defaults``: the command's own defaults (see
    :func:`_flag`)."""
    g = parser.add_argument_group("ranking")
    for name in ranking_flags() if names is None else names:
        own = (defaults or {}).get(name)
        _flag(g, name, filled=filled, several=name in several, default=own)


def backend_spec(args: argparse.Namespace) -> str:
    """The backend spec from --backend/--model, or the default for this environment."""
    spec = args.backend
    if spec is None:
        remote = (
            os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL") or args.base_url
        )
        spec = "openai" if remote else "embedded"
        if spec == "openai" and not args.model:
            spec = f"openai:{DEFAULT_OPENAI_MODEL}"
    kind, _, model = spec.partition(":")
    if args.model and not model:
        spec = f"{kind}:{args.model}"
    return spec


def is_local(spec: str) -> bool:
    return spec.partition(":")[0].strip().lower() in LOCAL_KINDS


def answer_cap(items: int) -> int:
    """A local model's answer-token cap for a ranking of ``items`` ("[12] > " is about 6
    tokens)."""
    return 8 + 6 * items


def call_limits(args: argparse.Namespace, spec: str, cap: int) -> RankingKeywords:
    """``timeout`` and ``max_tokens`` from the flags; unless they say otherwise, a local
    ``spec`` gets no per-call timeout and ``cap`` answer tokens, a served model the
    declaration's timeout and the backend's own answer limit."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._options.options import RankingOptions

    local = is_local(spec)
    timeout, max_tokens = getattr(args, "timeout", None), getattr(args, "max_tokens", None)
    return {
        "timeout": timeout if timeout is not None else (None if local else RankingOptions.timeout),
        "max_tokens": max_tokens or (cap if local else None),
    }


def build_backend(args: argparse.Namespace) -> Backend:
    """Resolve the backend with the options that apply to its kind."""

    spec = backend_spec(args)
    options: dict[str, object] = {}
    if args.base_url:
        options["base_url"] = args.base_url
    if args.device and is_local(spec) and not spec.startswith("llamacpp"):
        options["device"] = args.device
    return resolve_backend(spec, **options)


def _given(args: argparse.Namespace) -> RankingKeywords:
    """The ranking options given as flags (those left out are absent), as parsed by each
    option's flag type (the declaration validates them)."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._options.options import RankingOptions

    given = {
        info.name: getattr(args, info.name)
        for info in RankingOptions.describe()
        if info.cli_type is not None and getattr(args, info.name, None) is not None
    }
    return cast("RankingKeywords", given)  # keys: declared names, values: their flag types


def cli_options(args: argparse.Namespace, spec: str | None = None) -> RankingOptions:
    """The validated options of the flags; for a local ``spec``, no per-call timeout and an
    answer cap of ~6 tokens per item unless the flags say otherwise."""
    # lazy: start-up time of every permsc command
    from permsc_integrations._options.options import RankingOptions

    given = _given(args)
    if spec is not None and is_local(spec):
        size = given.get("window_size", RankingOptions.window_size)
        given.update(call_limits(args, spec, answer_cap(size)))
    return RankingOptions.from_kwargs(**given)


def ranker_options(args: argparse.Namespace, spec: str) -> RankingKeywords:
    """PSCRanker keywords for every command-line option (see :func:`cli_options`)."""
    options = cli_options(args, spec)
    kept = {info.name: getattr(options, info.name) for info in options.describe() if info.cli_type}
    return cast("RankingKeywords", kept)  # declared names, validated values


def _items(obj: dict[str, object], lineno: int) -> tuple[list[str], list[str], list[object], bool]:
    plain = "candidates" not in obj
    raw = obj.get("items") if plain else obj["candidates"]
    if not isinstance(raw, list) or not raw:
        raise LineError(f"line {lineno}: 'candidates' (or 'items') must be a non-empty list")
    texts, docids = [], []
    for k, item in enumerate(raw):
        text = (
            item if isinstance(item, str) else item.get("text") if isinstance(item, dict) else None
        )
        if not isinstance(text, str):
            raise LineError(
                f"line {lineno}: item {k} has no text (a string or {{'docid', 'text'}})"
            )
        docid = item.get("docid", item.get("id", k)) if isinstance(item, dict) else k
        texts.append(text)
        docids.append(str(docid))
    if len(set(docids)) != len(docids):
        raise LineError(f"line {lineno}: duplicate docids")
    return texts, docids, raw, plain


def parse_line(line: str, lineno: int) -> Query:
    """One JSONL line as a :class:`Query`; :class:`LineError` names the line on bad input."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LineError(f"line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
        raise LineError(f"line {lineno}: expected an object with a 'query' string")
    if "candidates" not in obj and "items" not in obj:
        raise LineError(f"line {lineno}: expected 'candidates' (or 'items')")
    texts, docids, raw, plain = _items(obj, lineno)
    qid = str(obj.get("qid", obj.get("id", lineno)))
    return Query(qid, obj["query"], tuple(texts), tuple(docids), tuple(raw), plain, lineno)


def read_queries(path: str) -> Iterator[Query | LineError]:
    """Every line of ``path`` as a Query or the LineError it raised (blank lines skipped)."""
    source = Path(path)
    if path != "-" and not source.is_file():
        raise ConfigurationError(f"input file not found: {path}")
    opened = nullcontext(sys.stdin) if path == "-" else source.open(encoding="utf-8")
    with opened as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield parse_line(line, lineno)
            except LineError as exc:
                yield LineError(f"{path}: {exc}")


def read_input(path: str) -> tuple[list[Query], int]:
    """The good queries of a JSONL or Parquet file and the number of bad rows (reported).

    A Parquet file has the JSONL's fields as columns (``qid``, ``query``, ``candidates`` or
    ``items``); it needs pyarrow (the ``ray`` extra brings it)."""
    if not path.endswith(".parquet"):
        return load_queries(path)
    try:
        # lazy: optional dependency (pyarrow, for .parquet input)
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "ray", purpose="Parquet input") from exc
    good: list[Query] = []
    bad = 0
    for row, record in enumerate(pq.read_table(path).to_pylist(), start=1):
        try:
            good.append(
                parse_line(json.dumps({k: v for k, v in record.items() if v is not None}), row)
            )
        except LineError as exc:
            report(f"skipped {path}: {exc}")
            bad += 1
    return good, bad


def load_queries(path: str) -> tuple[list[Query], int]:
    """The good queries of ``path`` and the number of bad lines (each reported on stderr)."""
    good: list[Query] = []
    bad = 0
    for entry in read_queries(path):
        if isinstance(entry, LineError):
            report(f"skipped {entry}")
            bad += 1
        else:
            good.append(entry)
    return good, bad
