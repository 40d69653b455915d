"""The guide's examples run: the offline one on the embedded model (slow), and the same code
with the ranking model swapped for the scripted server (default suite)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "llama_index.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
EXAMPLE, PROMPT_EXAMPLE = BLOCKS[0], BLOCKS[1]


def _run(code: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


def _goldfish_first(text: str) -> float:
    return 2.0 if "eat" in text else 1.0 if "goldfish" in text.lower() else 0.0


def test_example_runs_against_the_scripted_server(kit, capsys):
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    assert 'backend="embedded"' in EXAMPLE
    with ScriptedOpenAIServer(oracle_responder(_goldfish_first)) as server:
        code = EXAMPLE.replace('backend="embedded"', "backend=SCRIPTED")
        ns = _run(code, {"SCRIPTED": kit.openai_like(server)})
        assert server.request_count == 3  # num_permutations=3, one window
        # The prompt example swaps the wording on the same reranker and still ranks.
        _run(PROMPT_EXAMPLE, ns)
        again = ns["query_engine"].query("What do goldfish eat?")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "1.00  Goldfish eat flakes, pellets and blanched vegetables."
    assert printed[1] == "0.67  A goldfish can live for twenty years in a pond."
    assert "{context_str}" in "\n".join(printed[2:])  # the default template, printed to edit
    assert [n.node.get_content() for n in again.source_nodes] == [
        "Goldfish eat flakes, pellets and blanched vegetables.",
        "A goldfish can live for twenty years in a pond.",
    ]
    assert set(ns["rerank"].get_prompts()) == {"rerank_prompt"}


@pytest.mark.slow
@pytest.mark.integration
def test_offline_example_runs_on_the_embedded_model(capsys):
    pytest.importorskip("transformers")
    from permsc_integrations.backends.local._embedded import embedded_model_path

    embedded_model_path()  # raises MissingDependencyError naming the install line
    ns = _run(EXAMPLE, {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and len(ns["response"].source_nodes) == 2
    scores = [n.score for n in ns["response"].source_nodes]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(1.0)
    texts = {n.node.get_content() for n in ns["response"].source_nodes}
    assert texts <= {d.text for d in ns["documents"]}
