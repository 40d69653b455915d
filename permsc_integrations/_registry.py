"""Name → object registries (aggregators, backends, prompts), extended by entry points.

Built-ins are ``"module:attr"`` strings imported on first use, so that importing the package
stays fast; :meth:`Registry.register` and an entry-point group add more.

Example:
    >>> reg = Registry("colour", "example.colours", {"pi": "math:pi"})
    >>> reg.register("e", lambda: 2.718)
    >>> reg.available(), round(reg.get("pi"), 2)
    (['e', 'pi'], 3.14)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Generic, TypeVar, cast

from permsc_integrations.errors import ConfigurationError, UnknownNameError

__all__ = ["Registry"]

T = TypeVar("T")


def _load(path: str) -> object:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class Registry(Generic[T]):
    """Objects of one ``kind`` by name; unknown names raise :class:`UnknownNameError`."""

    def __init__(
        self,
        kind: str,
        group: str,
        builtin: Mapping[str, T | str],
        *,
        normalize: Callable[[str], str] = str.strip,
    ) -> None:
        self.kind, self.group, self._normalize = kind, group, normalize
        self._entries: dict[str, T | str] = dict(builtin)
        self._scanned = False

    def register(self, name: str, obj: T) -> None:
        """Register ``obj`` (a callable) as ``name``, replacing any entry of that name."""
        if not callable(obj):
            raise ConfigurationError(
                f"{self.kind} {name!r} must be callable, got {type(obj).__name__}"
            )
        self._entries[self._normalize(name)] = obj

    def available(self) -> list[str]:
        """Every registered name, sorted (entry points included)."""
        if not self._scanned:
            self._scanned = True
            for ep in entry_points(group=self.group):
                self._entries.setdefault(self._normalize(ep.name), ep.value)
        return sorted(self._entries)

    def get(self, name: str) -> T:
        """The object registered as ``name``."""
        key = self._normalize(name)
        if key not in self._entries and key not in self.available():  # scan only if unknown
            raise UnknownNameError(self.kind, name, self.available())
        entry = self._entries[key]
        if isinstance(entry, str):  # what an import path names is taken to be a T
            entry = self._entries[key] = cast(T, _load(entry))
        return entry

    def copy(self) -> Registry[T]:
        """An independent copy that scans entry points afresh (for tests and sandboxes)."""
        return Registry(self.kind, self.group, self._entries, normalize=self._normalize)
