"""docs/integrations/langchain.md's LangGraph graph (retrieve -> PSC rerank -> generate) runs as
written against the scripted loopback server: PSC's order reaches the generation prompt."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")

from permsc_integrations.testing import (  # noqa: E402
    ChatRequest,  # noqa: E402
    Reply,
    oracle_responder,
)
from permsc_integrations.testing._responders import shown_passages  # noqa: E402

DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations" / "langchain.md"


def graph_code() -> str:
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if "StateGraph" in b
    ]
    return block


def france_first(text: str) -> float:
    return ("Paris" in text) * 2 + ("France" in text)


def upstream(request: ChatRequest) -> Reply:
    """Ranking prompts get the oracle's order; the generation prompt gets an answer."""
    if shown_passages(request.messages):
        return oracle_responder(france_first)(request)  # type: ignore[return-value]
    return Reply("Paris.")


def test_the_graph_retrieves_reranks_and_generates(monkeypatch, capsys) -> None:
    from permsc_integrations.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer(upstream) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        namespace: dict[str, Any] = {"__name__": "langgraph_example"}
        exec(compile(graph_code(), str(DOC), "exec", dont_inherit=True), namespace)
        requests = list(server.requests)
    ranked = ["Paris is the capital of France.", "France borders Spain, Italy and Germany."]
    assert [d.page_content for d in namespace["result"]["documents"]] == ranked
    assert namespace["result"]["answer"] == "Paris."
    assert len(requests) == 5 + 1  # m = 5 shuffles, then one generation
    generation = requests[-1].messages[0]["content"]
    assert generation == "Answer from this context only:\n- " + "\n- ".join(ranked)
    assert "Paris." in capsys.readouterr().out
