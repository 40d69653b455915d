"""What the benchmarks that time the engine in fresh interpreters share: the child's prelude
(benchmarks/engine_versions.py, benchmarks/repack_hot_paths.py)."""

PRELUDE = r"""
import asyncio, json, sys, time
from permsc_integrations import PSCRanker
from permsc_integrations.backends.base import Completion

class Instant:
    name = "instant"
    async def acomplete(self, messages, settings):
        shown = sum(1 for m in messages if m["role"] == "user" and m["content"].startswith("["))
        await asyncio.sleep(0)
        return Completion(text=" > ".join(f"[{i}]" for i in range(1, shown + 1)))
    async def aclose(self):
        pass

def texts(n, seed):
    return [f"passage {k} of list {seed} about the topic, grade {(k * 37 + seed) % 101}"
            for k in range(n)]
"""
"""Imports, an ``Instant`` backend (every prompt answered at once, in the order shown) and
``texts(n, seed)``, the passages every timing ranks."""
