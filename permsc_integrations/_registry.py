"""Name → object registries (aggregators, backends, prompts), extended by entry points.

Built-ins are ``"module:attr"`` strings imported on first use, so that importing the package
stays fast; :meth:`Registry.register` and an entry-point group add more.

The packages' own names are registered too: :func:`publish` shows a public object as its
public module's (``PSCRanker.__module__ == "permsc_integrations"``), and :func:`lazy_exports`
is a package's ``__getattr__`` that imports a name's module on first use (and publishes it).

Example:
    >>> reg = Registry("colour", "example.colours", {"pi": "math:pi"})
    >>> reg.register("e", lambda: 2.718)
    >>> reg.available(), round(reg.get("pi"), 2)
    (['e', 'pi'], 3.14)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from importlib.metadata import entry_points
from typing import ForwardRef, Generic, TypeVar, cast

from permsc_integrations.errors import ConfigurationError, UnknownNameError

__all__ = ["Registry", "publish", "origin", "lazy_exports"]

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


_ORIGINS: dict[int, str] = {}  # id of a published object -> the module that defines it


def _is_private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "permsc_integrations" and any(p.startswith("_") for p in parts[1:])


def publish(public: str, *objects: object) -> None:
    """Show each of ``objects`` (a class or function of this package defined in a private
    module) as ``public``'s: its ``__module__`` becomes ``public``, so reprs, tracebacks, docs
    and pickles (by reference: ``public`` must export it) name what users import. A class's
    string annotations are pinned to the module that defines them, so
    ``typing.get_type_hints`` still resolves them. Anything else is left as it is."""
    for obj in objects:
        defined = getattr(obj, "__module__", None)
        if not callable(obj) or not isinstance(defined, str) or not _is_private(defined):
            continue
        if isinstance(obj, type):
            annotations = obj.__dict__.get("__annotations__", {})
            for name, hint in list(annotations.items()):
                if isinstance(hint, str):
                    annotations[name] = ForwardRef(hint, False, defined, is_class=True)
        _ORIGINS[id(obj)] = defined
        obj.__module__ = public


def origin(obj: object) -> str | None:
    """The module that defines ``obj`` (its ``__module__`` before :func:`publish`)."""
    return _ORIGINS.get(id(obj), getattr(obj, "__module__", None))


def lazy_exports(
    package: str, exports: Mapping[str, str], public: Collection[str] = ()
) -> Callable[[str], object]:
    """A ``__getattr__`` for ``package``: ``exports`` maps a name to the module that defines
    it, imported on first access and kept in the package; names in ``public`` are published
    under ``package``."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        if name in public:
            publish(package, value)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
