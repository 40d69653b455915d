"""The ranking and backend flags of the ``permsc`` subcommands, from the one declaration of the
options (:class:`~permsc_integrations._options.options.RankingOptions`).

Example:
    >>> "num_permutations" in ranking_flags() and "breaker_cooldown" not in ranking_flags()
    True
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argparse import _ArgumentGroup

__all__ = [
    "BACKEND_FLAGS",
    "SERVICE_FLAGS",
    "ALIASES",
    "add_backend_arguments",
    "add_ranking_arguments",
    "ranking_flags",
]


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
    declaration. Left out, it parses as None ("not given", so
    :func:`~permsc_integrations.cli._common.ranker_options` can tell the two apart) or,
    ``filled``, as the declared default; ``several``: one value or more, parsed as a list;
    ``default``: a command's own default, shown and used in place of the declared one."""
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
    declaration (:mod:`permsc_integrations._options.options`): left out, None (or, ``filled``,
    the declared default); those in ``several`` take one value or more; ``defaults``: the
    command's own defaults (see :func:`_flag`)."""
    g = parser.add_argument_group("ranking")
    for name in ranking_flags() if names is None else names:
        own = (defaults or {}).get(name)
        _flag(g, name, filled=filled, several=name in several, default=own)
