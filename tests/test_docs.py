"""The README's and the top-level docs' Python snippets run as written.

Snippets that name an ``openai:`` backend talk to a real scripted OpenAI-compatible server on
127.0.0.1 (through ``OPENAI_BASE_URL``), whose oracle prefers passages mentioning goldfish.
Framework guides (docs/integrations/) are executed by their adapters' own tests. A snippet
whose first line is ``# not run: <reason>`` needs something a test machine lacks (a GPU, a
model directory) and is only compiled.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from permsc_integrations.errors import MissingDependencyError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _snippets() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for k, code in enumerate(BLOCK.findall(doc.read_text())):
            found.append((f"{doc.relative_to(ROOT)}#{k}", code))
    return found


def test_readme_has_snippets() -> None:
    assert any(name.startswith("README.md") for name, _ in _snippets())


SERVE_URL = "http://127.0.0.1:8080"  # docs/serve.md's snippets call this; the test's server
SERVE_CLIENTS = (
    "cohere",
    "langchain_cohere",
    "llama_index",
    "haystack",
    "haystack_integrations",
    "litellm",
)


def _point_at_a_real_serve(code: str, server, serve_process, monkeypatch) -> str:
    """docs/serve.md: start ``permsc serve`` over the scripted server and aim the code at it."""
    for module in ("prometheus_client", "pydantic"):
        pytest.importorskip(module)
    monkeypatch.setenv("PERMSC_CLIENT_KEY", "docs-client-key")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network here
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # nor LiteLLM's price list
    flags = ["--backend", "openai:scripted", "--base-url", server.base_url, "-m", "4"]
    proc = serve_process(*flags, env={"PERMSC_API_KEYS": "docs-client-key"})
    return code.replace(SERVE_URL, proc.url)


@pytest.mark.parametrize(("name", "code"), _snippets(), ids=[n for n, _ in _snippets()])
def test_snippet_runs(
    name: str, code: str, scripted_server, serve_process, monkeypatch, tmp_path
) -> None:
    from permsc_integrations.testing import oracle_responder

    if code.startswith("# not run:"):
        compile(code, name, "exec")
        return

    server = scripted_server(oracle_responder(lambda text: text.lower().count("goldfish")))
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    if name.startswith("docs/serve.md"):
        code = _point_at_a_real_serve(code, server, serve_process, monkeypatch)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        exec(compile(code, name, "exec"), namespace)  # noqa: S102 - the documented code itself
    except ModuleNotFoundError as exc:  # a framework client of docs/serve.md, test-only
        root = (exc.name or "").split(".")[0]
        if name.startswith("docs/serve.md") and root in SERVE_CLIENTS:
            pytest.skip(f"{exc.name} is not installed (the serve-test extra)")
        if name.startswith("docs/agents.md") and root in ("mcp", "opentelemetry"):
            pytest.skip(f"{exc.name} is not installed (the mcp or otel extra)")
        raise
    except MissingDependencyError as exc:  # an embedded model's package: setup.sh installs it
        if "embedded:" in code:
            pytest.skip(str(exc))
        raise
    if name.startswith("docs/serve.md"):
        assert "goldfish" in str(namespace["best"]).lower(), "the goldfish passage must win"
    if name.startswith("README.md"):
        if "result" in namespace:
            result = namespace["result"]
            assert result.order[0] == 1, "the goldfish passage must rank first"
            assert server.request_count == 6  # three passages have 3! = 6 orders (m = 20)


def test_every_guide_marks_a_plain_install_line_and_its_example(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``.ci/guides.py`` (CI stage "guides from the wheels") installs each guide's marked
    install line from the wheels into a fresh environment and runs its marked example; here,
    that the marks are in place and the lines are ones a user can run from the index."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_guides", ROOT / ".ci" / "guides.py")
    assert spec is not None and spec.loader is not None
    guides = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "ci_guides", guides)  # for its dataclass
    spec.loader.exec_module(guides)
    for path in guides.GUIDES:
        guide = guides.read_guide(path)
        assert guide.installs and all(args for args in guide.installs), path
        assert not any(a.startswith((".", "/")) for args in guide.installs for a in args), path
        compile(guide.example, path, "exec")
    langchain = guides.read_guide("docs/integrations/langchain.md")
    assert "langchain_classic" in langchain.example  # ... so its line installs it (issue 26)
    assert any("langchain-classic" in args for args in langchain.installs)
