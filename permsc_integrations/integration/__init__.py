"""The adapters' shared base: what the LangChain, LlamaIndex and Haystack packages build on.

A declared internal API for the adapters that ship with this project (in lockstep, at the
same version): it may change in any release, and users import the adapters, not this package.
It is the one place an adapter takes the core's internals from (an adapter imports no
``_private`` module of the core):

- the option checks and metadata (:mod:`._base`): ``checked_options``, ``refuse_unknown``,
  ``psc_metadata``, ``traced``, ... and the option keywords (``RankingKeywords``) and value
  checks (``at_least``, ``positive_int``);
- the way from sync code into the async core: ``run_sync``;
- for an adapter's chat backend: the home loop (``HomeLoop``), HTTP error mapping
  (``mapped_errors``), logprobs (``check_labels``, ``label_probabilities``,
  ``refused_logprobs``, ``top_list``), redaction (``public_settings``, ``is_secret_name``);
- the template prompt (``TemplatePrompt``);
- the pydantic field model (:mod:`._model`): ``AdapterModel``, ``PSCOptionsModel``, ...

The checks, metadata, keywords and redaction load with it; the rest (pydantic, numpy, anyio's
thread helpers) on first use, so an adapter without pydantic never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from permsc_integrations._calls.bridge import run_sync
from permsc_integrations._checks import at_least, positive_int
from permsc_integrations._options.keywords import RankingKeywords
from permsc_integrations._registry import lazy_exports, publish
from permsc_integrations.backends import is_secret_name, public_settings
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
    from permsc_integrations.backends import (
        HomeLoop,
        check_labels,
        label_probabilities,
        mapped_errors,
        refused_logprobs,
        top_list,
    )
    from permsc_integrations.integration._model import (
        AdapterModel,
        PSCOptionsModel,
        option_annotation,
        option_fields,
        option_types,
        typed_errors,
    )
    from permsc_integrations.prompts import TemplatePrompt

_MODEL = "permsc_integrations.integration._model"
_LAZY = {
    "AdapterModel": _MODEL,
    "PSCOptionsModel": _MODEL,
    "option_types": _MODEL,
    "option_annotation": _MODEL,
    "option_fields": _MODEL,
    "typed_errors": _MODEL,
    "HomeLoop": "permsc_integrations.backends",
    "mapped_errors": "permsc_integrations.backends",
    "check_labels": "permsc_integrations.backends",
    "label_probabilities": "permsc_integrations.backends",
    "refused_logprobs": "permsc_integrations.backends",
    "top_list": "permsc_integrations.backends",
    "TemplatePrompt": "permsc_integrations.prompts",
}

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
    "RankingKeywords",
    "at_least",
    "positive_int",
    "run_sync",
    "HomeLoop",
    "mapped_errors",
    "check_labels",
    "label_probabilities",
    "refused_logprobs",
    "top_list",
    "public_settings",
    "is_secret_name",
    "TemplatePrompt",
]

publish(__name__, *(globals()[name] for name in __all__ if name in globals()))
__getattr__ = lazy_exports(__name__, _LAZY, public=__all__)
