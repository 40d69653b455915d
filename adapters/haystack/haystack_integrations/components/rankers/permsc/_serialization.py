"""What ``PSCRanker.to_dict``/``from_dict`` need besides Haystack's own helpers: the ranking
options as plain YAML values, and the secrets among ``backend_options`` as Haystack
``Secret``s (serialised as the environment variable's name, never the value).

Example:
    >>> from haystack.utils import Secret
    >>> data = options_to_dict({"num_permutations": 5,
    ...     "backend_options": {"api_key": Secret.from_env_var("OPENAI_API_KEY")}})
    >>> data["backend_options"]["api_key"]["env_vars"]
    ['OPENAI_API_KEY']
    >>> options_from_dict(data)["backend_options"]["api_key"].type.value
    'env_var'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from haystack.utils import Secret

from permsc_integrations.errors import ConfigurationError
from permsc_integrations.integration import is_secret_name

__all__ = ["options_to_dict", "options_from_dict", "resolved_backend_options"]

_PLAIN = (str, int, float, bool, type(None))
# options whose value type the declaration also accepts as a mapping (an Adaptive, a RetryPolicy)
_AS_MAPPING = frozenset({"adaptive", "retry"})


def options_to_dict(given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given at construction as plain values; an object that has no plain form
    is refused with the option's name and what to give instead."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name == "backend_options":
            out[name] = {key: _backend_option(key, v) for key, v in value.items()}
        elif (
            name in _AS_MAPPING and dataclasses.is_dataclass(value) and not isinstance(value, type)
        ):
            out[name] = dataclasses.asdict(value)
        else:
            out[name] = _plain(name, value)
    return out


def _plain(name: str, value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(name, v) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _plain(name, v) for k, v in value.items()}
    raise ConfigurationError(
        f"option {name}={type(value).__name__}(...) cannot be serialised (Pipeline.dumps, "
        f"to_dict): give it by name or as a string (docs/options.md), or build the ranker in code"
    )


def _backend_option(key: str, value: Any) -> Any:
    if isinstance(value, Secret):
        return value.to_dict()  # Haystack refuses to serialise a token secret, with the fix
    if is_secret_name(key) and value is not None:
        raise ConfigurationError(
            f"backend_options[{key!r}] is a plain value and would be serialised in clear: give "
            f"it as a Haystack Secret, e.g. Secret.from_env_var('OPENAI_API_KEY')"
        )
    return _plain(f"backend_options[{key!r}]", value)


def options_from_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`options_to_dict`: each serialised ``Secret`` back as one."""
    out = dict(data)
    backend_options = out.get("backend_options")
    if isinstance(backend_options, Mapping):
        out["backend_options"] = {
            key: Secret.from_dict(v) if _is_secret_dict(v) else v
            for key, v in backend_options.items()
        }
    return out


def _is_secret_dict(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") in ("env_var", "token")


def resolved_backend_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``backend_options`` for the core's backend factory: each ``Secret`` resolved."""
    return {k: v.resolve_value() if isinstance(v, Secret) else v for k, v in options.items()}
