"""docs/integrations/haystack.md runs as written: its example (the one CI's guides stage
runs from the wheels), the YAML snippet and the agent snippet, with OPENAI_BASE_URL and
OPENAI_API_KEY pointing Haystack's OpenAIChatGenerator at the scripted server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "haystack.md"
TEXT = DOC.read_text()
EXAMPLE = re.findall(r"<!-- ci: example -->\n```python\n(.*?)```", TEXT, re.S)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def _run(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the documented code
    return namespace


def _goldfish_first(text: str) -> float:
    return 2.0 if "eat flakes" in text else 1.0 if "goldfish" in text.lower() else 0.0


def test_the_guide_runs_against_the_scripted_server(monkeypatch, capsys):
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    assert len(BLOCKS) == 3 and BLOCKS[0] == EXAMPLE
    with ScriptedOpenAIServer(oracle_responder(_goldfish_first)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "docs-test-key")
        _run(EXAMPLE)
        assert server.request_count == 4  # num_permutations=4, one window
        saved = _run(BLOCKS[1])
        agent = _run(BLOCKS[2])
        assert server.request_count == 4  # saving and building an agent send nothing
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == [
        "1.00  Goldfish eat flakes, pellets and blanched vegetables.",
        "0.67  A goldfish can grow old in a pond: twenty years or more.",
    ]
    assert "docs-test-key" not in saved["text"]
    assert printed[2] == "['query', 'documents']" and agent["agent"] is not None
