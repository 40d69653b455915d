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


@pytest.mark.parametrize(("name", "code"), _snippets(), ids=[n for n, _ in _snippets()])
def test_snippet_runs(name: str, code: str, scripted_server, monkeypatch, tmp_path) -> None:
    from permsc_integrations.testing import oracle_responder

    if code.startswith("# not run:"):
        compile(code, name, "exec")
        return

    server = scripted_server(oracle_responder(lambda text: text.lower().count("goldfish")))
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(code, name, "exec"), namespace)  # noqa: S102 - the documented code itself
    if name.startswith("README.md"):
        if "result" in namespace:
            result = namespace["result"]
            assert result.order[0] == 1, "the goldfish passage must rank first"
            assert server.request_count == 20


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
