"""The old import path of :class:`TransformersBackend`, now in
:mod:`permsc_integrations.backends.local.transformers`; kept because docs/local.md named it
(before the backends moved into folders). New code imports from the new path."""

from .local.transformers import TransformersBackend

__all__ = ["TransformersBackend"]
