"""The adapters' shared base: what the LangChain, LlamaIndex and Haystack packages build on.

A declared internal API for the adapters that ship with this project (in lockstep, at the
same version): it may change in any release, and users import the adapters, not this package.
The option checks and metadata (:mod:`._base`) load with it; the pydantic field model
(:mod:`._model`) loads on first use, so an adapter without pydantic never imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from permsc_integrations.integration._base import (
    Done,
    OneRanker,
    Trace,
    TracedBackend,
    TracedFirstTokenBackend,
    check_backend,
    checked_options,
    psc_metadata,
    public_backend_options,
    refuse_unknown,
    refuse_unknown_attribute,
    repr_args,
    traced,
    usage_dict,
)

if TYPE_CHECKING:
    from permsc_integrations.integration._model import (
        AdapterModel,
        PSCOptionsModel,
        option_annotation,
        option_fields,
        option_types,
        typed_errors,
    )

_LAZY = frozenset(
    {
        "AdapterModel",
        "PSCOptionsModel",
        "option_types",
        "option_annotation",
        "option_fields",
        "typed_errors",
    }
)

__all__ = [
    "checked_options",
    "refuse_unknown",
    "refuse_unknown_attribute",
    "check_backend",
    "public_backend_options",
    "usage_dict",
    "psc_metadata",
    "repr_args",
    "OneRanker",
    "Done",
    "Trace",
    "TracedBackend",
    "TracedFirstTokenBackend",
    "traced",
    "AdapterModel",
    "PSCOptionsModel",
    "option_types",
    "option_annotation",
    "option_fields",
    "typed_errors",
]


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("permsc_integrations.integration._model"), name)
    globals()[name] = value
    return value
