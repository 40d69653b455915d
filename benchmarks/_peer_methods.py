"""The ``blitzrank`` package's methods (BlitzRank, SlidingWindow, SetWise, PairWise, TourRank,
AcuRank), each at its defaults and one other setting, run against the simulated judge.

blitzrank installs offline only with care (issue 31, item 7): ``pip install --no-deps
blitzrank`` plus its requirements but ``pytrec-eval`` (an sdist that downloads from GitHub;
``pytrec-eval-terrier`` provides the module its import needs), ``trueskill`` for AcuRank;
it loads tiktoken's ``o200k_base`` at import, which LiteLLM ships (``TIKTOKEN_CACHE_DIR``,
set here). LiteLLM reaches the judge's loopback server through ``OPENAI_BASE_URL``;
:func:`in_process` instead answers LiteLLM's calls from the judge in process (for the quick
simulations of benchmarks/frontier_sim.py), with the same prompts.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from permsc_integrations.testing import ChatRequest, Reply, SimulatedJudge
from permsc_integrations.testing._judge_prompts import count_tokens

MODEL = "openai/judge"


def _tiktoken_dir() -> str:
    import litellm  # lazy: a heavy import, only the peers need it

    return str(Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers")


def setup() -> Any:
    """Import blitzrank offline; returns the module."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", _tiktoken_dir())
    os.environ.setdefault("OPENAI_API_KEY", "none")
    import blitzrank  # lazy: installed in the peers' environment only
    from loguru import logger

    logger.remove()  # blitzrank logs every retry at warning level
    return blitzrank


def peers(blitzrank: Any) -> dict[str, Callable[[], Any]]:
    """Name -> a fresh ranker: each method's defaults, and one other setting."""
    b = blitzrank
    return {
        "BlitzRank": lambda: b.BlitzRank(),
        "BlitzRank w=10": lambda: b.BlitzRank(window_size=10),
        "SlidingWindow": lambda: b.SlidingWindow(),
        "SlidingWindow rank_end=50": lambda: b.SlidingWindow(rank_end=50),
        "SetWise": lambda: b.SetWise(),
        "SetWise nc=4": lambda: b.SetWise(num_child=4),
        "TourRank": lambda: b.TourRank(),
        "TourRank R2": lambda: b.TourRank(num_rounds=2),
        "AcuRank": lambda: b.AcuRank(),
        "AcuRank hc=8": lambda: b.AcuRank(hard_constraint=8),
        "PairWise": lambda: b.PairWise(),
    }


def in_process(judge: SimulatedJudge) -> None:
    """Answer blitzrank's LiteLLM calls from ``judge`` in process (no HTTP)."""
    from blitzrank.engine.comparer.client import LitellmClient  # lazy: peers only

    async def get_response(
        self: Any, model: str, messages: list[dict], temperature: Any, fallback_enabled: bool = True
    ) -> tuple[str, float, Any]:
        reply = await judge.respond(ChatRequest(0, model, tuple(messages)))
        if not isinstance(reply, Reply):
            raise RuntimeError(reply.message)
        text = "\n".join(str(m.get("content") or "") for m in messages)
        usage = SimpleNamespace(
            prompt_tokens=count_tokens(text), completion_tokens=count_tokens(reply.text)
        )
        return reply.text, 0.0, usage

    LitellmClient.get_response = get_response


def rank(ranker: Any, query: str, texts: list[str], seed: int, top: int = 10) -> list[int]:
    """One peer's ranking of ``texts`` (its top ``top``), with Python's ``random`` seeded
    (TourRank shuffles with it)."""
    random.seed(seed)
    return list(asyncio.run(ranker(query, list(texts), top, MODEL)))
