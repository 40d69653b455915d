"""Follow each guide literally: its install line from the built wheels, then its example.

``.ci/run`` (stage "guides from the wheels") runs this with the main environment's Python
after the wheels stage built the four wheels::

    python .ci/guides.py DIST_DIR [GUIDE.md ...]

For each guide (the README's quickstart and the three framework guides) it reads the code
blocks marked in the Markdown (``<!-- ci: install -->`` before the ``bash`` block of
``pip install`` lines, ``<!-- ci: example -->`` before the ``python`` block), so the page and
this check cannot drift. Each guide gets a fresh virtual environment (``$PYTHON``, default
``python3``) with only its install lines, resolved from the index with our four
distributions taken from ``DIST_DIR`` (``--find-links``, pinned to the built versions; an
editable install is refused). The example then runs with ``python -I`` outside the checkout
against :class:`permsc_integrations.testing.ScriptedOpenAIServer`, served from this process:
``OPENAI_BASE_URL``/``OPENAI_API_KEY`` point ``"openai:..."`` specs at it, and an example on
the embedded model (``backend="embedded"``, 1.1 GB and torch) is run on ``"openai:scripted"``
instead, with ``permsc-integrations[openai]`` added to its environment for that backend. A
guide passes when its install succeeds, its example exits 0, and the server was asked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDES = (
    "README.md",
    "docs/integrations/langchain.md",
    "docs/integrations/llama_index.md",
    "docs/integrations/haystack.md",
)
EMBEDDED = 'backend="embedded"'
SCRIPTED = 'backend="openai:scripted"'
OWN = (
    "permsc_integrations",
    "langchain_permsc",
    "llama_index_postprocessor_permsc",
    "permsc_haystack",
)
KEYWORDS = {"paris", "capital", "france", "goldfish", "eat", "grow", "flakes", "tank"}


@dataclass(frozen=True)
class Guide:
    path: str
    installs: tuple[tuple[str, ...], ...]  # the arguments of each `pip install` line
    example: str


def marked(text: str, marker: str, language: str, path: str) -> str:
    found = re.findall(rf"<!-- ci: {marker} -->\n```{language}\n(.*?)```", text, re.S)
    if len(found) != 1:
        raise SystemExit(f"{path}: want one ```{language} block marked <!-- ci: {marker} -->")
    return found[0]


def read_guide(path: str) -> Guide:
    text = (ROOT / path).read_text()
    installs = []
    for line in marked(text, "install", "bash", path).splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[:2] != ["pip", "install"] or {"-e", "--editable"} & set(words):
            raise SystemExit(f"{path}: not a plain `pip install` line: {line!r}")
        installs.append(tuple(words[2:]))
    if not installs:
        raise SystemExit(f"{path}: its marked install block has no `pip install` line")
    return Guide(path, tuple(installs), marked(text, "example", "python", path))


def pins(dist: Path) -> list[str]:
    """``name==version`` of each built wheel: an index release of the same name never wins."""
    found = []
    for wheel in sorted(dist.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if name in OWN:
            found.append(f"{name.replace('_', '-')}=={version}")
    if len(found) != len(OWN):
        raise SystemExit(f"{dist}: want the {len(OWN)} wheels, found {found}")
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without PYTHONPATH (pip would count what it names as
    installed), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **extra}


def install(guide: Guide, venv: Path, dist: Path) -> tuple[bool, str]:
    python = os.environ.get("PYTHON", "python3")
    log = []
    commands = [[python, "-m", "venv", str(venv)]]
    (venv.parent / f"{venv.name}.txt").write_text("\n".join(pins(dist)) + "\n")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    common = ["--find-links", str(dist), "-c", str(venv.parent / f"{venv.name}.txt")]
    for args in guide.installs:
        commands.append([*pip, "install", *common, *args])
    if EMBEDDED in guide.example:  # the stand-in backend's own requirement
        commands.append([*pip, "install", *common, "permsc-integrations[openai]"])
    for command in commands:
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=venv.parent, env=clean_env()
        )
        log.append("$ " + " ".join(command))
        noise = [ln for ln in done.stderr.splitlines() if not ln.startswith("WARNING: Location")]
        log += [*done.stdout.splitlines(), *noise]
        if done.returncode != 0:
            return False, "\n".join(log)
    return True, "\n".join(log)


def run_example(guide: Guide, venv: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    script = venv.parent / f"{venv.name}_example.py"
    script.write_text(guide.example.replace(EMBEDDED, SCRIPTED))
    env = clean_env(
        HAYSTACK_TELEMETRY_ENABLED="False",  # the Haystack guide: no network here
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="ci-scripted",
        PERMSC_CACHE_DIR=str(venv.parent / "cache"),
    )
    command = [str(venv / "bin" / "python"), "-I", str(script)]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=venv.parent, env=env, timeout=300
    )


def relevance(text: str) -> float:
    """The scripted model's preference: passages sharing more of the guides' query words."""
    return float(len(KEYWORDS & set(re.findall(r"[a-z]+", text.lower()))))


def main(dist: Path, paths: list[str]) -> int:
    guides = [read_guide(path) for path in paths or GUIDES]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="permsc-guides-") as work:
        status = check(guides, dist, Path(work))
    print(f"{len(guides)} guides checked in {time.perf_counter() - began:.0f} s")
    return status


def check(guides: list[Guide], dist: Path, work: Path) -> int:
    from permsc_integrations.testing import ScriptedOpenAIServer, oracle_responder

    venvs = {g.path: work / re.sub(r"\W", "_", g.path) for g in guides}
    began = time.perf_counter()
    with ThreadPoolExecutor(len(guides)) as pool:  # pip waits on the network: overlap them
        results = pool.map(lambda g: install(g, venvs[g.path], dist), guides)
        installed = dict(zip(venvs, results, strict=True))
    print(f"installed {len(guides)} environments in {time.perf_counter() - began:.0f} s")
    failed = 0
    with ScriptedOpenAIServer(oracle_responder(relevance)) as server:
        for guide in guides:
            ok, log = installed[guide.path]
            if not ok:
                failed += 1
                print(f"FAIL {guide.path}: its install line\n{log}")
                continue
            before, started = server.request_count, time.perf_counter()
            done = run_example(guide, venvs[guide.path], server.base_url)
            asked = server.request_count - before
            took = time.perf_counter() - started
            if done.returncode != 0 or asked == 0:
                failed += 1
                print(f"FAIL {guide.path}: example exit {done.returncode}, {asked} requests")
                print(done.stdout + done.stderr)
            else:
                print(f"ok   {guide.path}: installed, example ran ({asked} requests, {took:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python .ci/guides.py DIST_DIR [GUIDE.md ...]  (default: every guide)")
    sys.exit(main(Path(sys.argv[1]).resolve(), sys.argv[2:]))
