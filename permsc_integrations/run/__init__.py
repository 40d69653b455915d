"""Deprecated: the engine moved to ``permsc_integrations._run`` (internal); ``run.bridge`` is
kept, forwarding, for one deprecation period (the adapters imported it)."""

__all__: list[str] = []
