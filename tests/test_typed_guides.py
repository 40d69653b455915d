"""mypy reads the adapters' options with their types (issue 32): the integration guides' code
passes it as written, and a misspelt option, a wrong type or a write to an attribute that is
not an option fails it, on the adapters and on PSCRanker alike.

mypy runs once for the module, on every python block of the three guides and on a snippet of
mistakes, with the repository's core and adapters first on its path; its cache stays in
.mypy_cache/guides."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy")
pytest.importorskip("langchain_permsc")
pytest.importorskip("llama_index.postprocessor.permsc")
pytest.importorskip("haystack_integrations.components.rankers.permsc")

# cold (a fresh checkout, or after a change to the core), mypy reads the frameworks and the
# core: 40 s of CPU, 52 s wall on 2 shared cores at load 5 (past 120 s at load 10); warm, 4 s
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # mypy runs: minutes

ROOT = Path(__file__).resolve().parents[1]
# what the guides' fragments take from the application around them (or an earlier block)
AROUND = {
    "langchain": """
from typing import Any

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_permsc import PSCListwiseRanker, PSCReranker

from permsc_integrations.errors import InsufficientSamplesError

reranker: PSCReranker
base_retriever: Any = None
chat_model: Any = None
prompt: Any = None
to_query_and_items: Any = None
work: Any = None
docs: Any = None
q: Any = None
""",
    "llama_index": """
from llama_index.postprocessor.permsc import PSCRerank

rerank: PSCRerank
""",
    "haystack": "",
}

MISTAKES = """
from langchain_permsc import PSCListwiseRanker, PSCReranker
from haystack_integrations.components.rankers.permsc import PSCRanker as HaystackRanker
from llama_index.postprocessor.permsc import PSCRerank

from permsc_integrations import PSCRanker, RankingOptions

reranker = PSCReranker(backend="m", num_permutation=5)  # E: did you mean "num_permutations"
PSCReranker(backend="m", num_permutations="5")  # E: "num_permutations" to "PSCReranker"
PSCListwiseRanker(backend="m", aggregator=42)  # E: "aggregator" to "PSCListwiseRanker"
rerank = PSCRerank(backend="embedded", adaptive=0.5)  # E: "adaptive" to "PSCRerank"
PSCRerank(top_n=2, num_permutatoins=3)  # E: Unexpected keyword argument "num_permutatoins"
reranker.num_permutation = 3  # E: "PSCReranker" has no attribute "num_permutation"
rerank.num_permutations = "3"  # E: (expression has type "str", variable has type "int")
ranker = PSCRanker("openai:m", num_permutations="5")  # E: "num_permutations" to "PSCRanker"
ranker.num_permutations = 2  # E: "PSCRanker" has no attribute "num_permutations"
RankingOptions(request_cap=60)  # E: "request_cap" to "RankingOptions" has incompatible type
RankingOptions().replace(aggregator=None)  # E: "aggregator" to "replace" of "RankingOptions"
# what a caller may give is taken, and what is kept is typed as kept
reranker = PSCReranker(backend="m", adaptive="5,5", request_cap="calls=9", prices="1,2")
top: int = reranker.top_n  # E: (expression has type "int | None", variable has type "int")
ok = RankingOptions(adaptive=True, request_cap="calls=60", prices="0.15,0.60", retry=None)
kept: int = ok.adaptive  # E: (expression has type "Adaptive | None", variable has type "int")
HaystackRanker(backend="m", num_permutation=5)  # E: Unexpected keyword argument "num_permutation"
HaystackRanker(backend="m", num_permutations="5")  # E: "num_permutations" to "PSCRanker"
HaystackRanker(backend="m", max_calls=12, adaptive=True, top_k=5, strategy="sliding")
"""


def guide_module(name: str) -> str:
    """Each python block of a guide as the body of an async function of its own (fragments
    await), after what the blocks take from around them."""
    text = (ROOT / "docs" / "integrations" / f"{name}.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    functions = [
        f"async def block_{k}() -> None:\n{textwrap.indent(code, '    ')}\n"
        for k, code in enumerate(blocks)
    ]
    return AROUND[name] + "\n\n" + "\n\n".join(functions)


def errors_by_file(tmp_path: Path, files: dict[str, str]) -> dict[str, list[str]]:
    for file, source in files.items():
        (tmp_path / file).write_text(source)
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    adapters = ROOT / "adapters"
    paths = [ROOT, adapters / "langchain", adapters / "llama_index", adapters / "haystack"]
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(tmp_path / "mypy.ini"),
        "--cache-dir",
        str(ROOT / ".mypy_cache" / "guides"),
        "--explicit-package-bases",
        "--show-error-codes",
        *files,
        # a namespace package: given as a source, so that this checkout's is read
        str(adapters / "llama_index" / "llama_index" / "postprocessor" / "permsc"),
        str(adapters / "haystack" / "haystack_integrations" / "components" / "rankers" / "permsc"),
    ]
    env = {**os.environ, "MYPYPATH": ":".join(map(str, paths))}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    found: dict[str, list[str]] = {file: [] for file in files}
    for line in done.stdout.splitlines():
        file = line.split(":", 1)[0]
        if file in found and ": error:" in line:
            found[file].append(line)
    return found


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    files = {f"{name}_guide.py": guide_module(name) for name in AROUND}
    return errors_by_file(tmp_path_factory.mktemp("mypy"), {**files, "mistakes.py": MISTAKES})


@pytest.mark.parametrize("name", AROUND)
def test_the_guides_code_passes_mypy_as_written(checked: dict[str, list[str]], name: str) -> None:
    assert checked[f"{name}_guide.py"] == []


def test_mypy_reads_the_installed_packages_as_an_application_does(tmp_path: Path) -> None:
    """An application's ``mypy app.py`` in the environment scripts/setup.sh builds, with no
    MYPYPATH: the core must be visible to mypy, or the adapters' option fields come from an
    ``Any`` base and a misspelt attribute write passes (it did: setuptools' default editable
    install is an import hook mypy cannot follow; the set-up installs the core in compat mode,
    a plain .pth entry)."""
    app = tmp_path / "app.py"
    app.write_text(
        "from langchain_permsc import PSCReranker\n\n"
        'reranker = PSCReranker(backend="m")\n'
        "reranker.num_permutation = 3\n"
    )
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    command = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "app.py"]
    cache = ["--cache-dir", str(ROOT / ".mypy_cache" / "installed"), "--show-error-codes"]
    done = subprocess.run([*command, *cache], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert '"PSCReranker" has no attribute "num_permutation"' in done.stdout, done.stdout


def test_mistakes_fail_mypy_each_with_its_message(checked: dict[str, list[str]]) -> None:
    expected = {
        number: line.split("# E: ", 1)[1]
        for number, line in enumerate(MISTAKES.splitlines(), start=1)
        if "# E: " in line
    }
    errors: dict[int, list[str]] = {}
    for error in checked["mistakes.py"]:
        errors.setdefault(int(error.split(":")[1]), []).append(error)
    assert sorted(errors) == sorted(expected), "\n".join(checked["mistakes.py"])
    for number, message in expected.items():
        assert any(message in error for error in errors[number]), errors[number]
