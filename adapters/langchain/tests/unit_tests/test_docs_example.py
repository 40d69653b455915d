"""The RAG example of docs/integrations/langchain.md runs: on the embedded model (slow) and,
in the default suite, the same code against the scripted loopback server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

DOC = Path(__file__).resolve().parents[4] / "docs" / "integrations" / "langchain.md"
EMBEDDED = 'backend="embedded"'


def example_code() -> str:
    """The last python block of the page: the runnable RAG example."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks and EMBEDDED in blocks[-1]
    return blocks[-1]


def run(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


def context_lines(namespace: dict[str, Any]) -> list[str]:
    text = namespace["answer_prompt"].to_string()
    assert "What is the capital of France?" in text
    return [line for line in text.splitlines() if line.startswith("- ")]


def test_example_against_the_scripted_server(capsys: pytest.CaptureFixture[str]) -> None:
    # the oracle ranks passages that mention France first, the Paris one above all
    score = lambda text: ("Paris" in text) * 2 + ("France" in text)  # noqa: E731
    with ScriptedOpenAIServer(oracle_responder(score)) as server:
        options = {"base_url": server.base_url, "api_key": "t"}
        spec = f'backend="openai:m", backend_options={options!r}'
        namespace = run(example_code().replace(EMBEDDED, spec))
        assert server.request_count == 3  # m = 3, one window
    assert context_lines(namespace) == [
        "- Paris is the capital of France. (score 1.00)",
        "- France borders Spain, Italy and Germany. (score 0.75)",
    ]
    assert "Paris is the capital" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_example_runs_offline_on_the_embedded_model() -> None:
    pytest.importorskip("transformers")
    namespace = run(example_code())
    lines = context_lines(namespace)  # the tiny model ranks poorly: check shape, not order
    assert (
        len(lines) == 2 and lines[0].endswith("(score 1.00)") and lines[1].endswith("(score 0.75)")
    )
    assert all(any(fact in line for fact in namespace["facts"]) for line in lines)


def app_code() -> str:
    """The page's web-app example (the block that shares one reranker between endpoints)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    [block] = [b for b in blocks if b.startswith("# an app with a sync and an async endpoint")]
    return block


def test_the_app_example_serves_sync_and_async_endpoints_at_once() -> None:
    import threading

    from starlette.testclient import TestClient

    score = lambda text: ("Paris" in text) * 2 + ("France" in text)  # noqa: E731
    with ScriptedOpenAIServer(oracle_responder(score)) as server:
        spec = f'backend="openai:m", backend_options={{"base_url": "{server.base_url}"}}'
        namespace = run(app_code().replace('backend="openai:gpt-4o-mini"', spec))
        answers: list[Any] = []
        with TestClient(namespace["app"]) as client:  # one app: its loop and its thread pool

            def call(path: str) -> None:
                answers.append(client.get(path, params={"q": "capital of France"}).json())

            threads = [threading.Thread(target=call, args=(p,)) for p in ("/sync", "/async") * 3]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        assert answers == [["Paris is the capital of France.", "France borders Spain."]] * 6
        assert server.max_in_flight <= 8 and server.request_count == 6 * 4
