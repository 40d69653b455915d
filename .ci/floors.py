"""Print the constraints that install one distribution's declared floors: ``name==floor``.

The floors live in one place, the requirements in the ``pyproject.toml`` files; this reads
them. ``.ci/run`` installs each distribution (the core, each adapter) with its own floors in
a fresh virtual environment and runs its fast tests there: a floor that is declared but does
not work fails CI. Each distribution gets its own environment, as its users have: the
adapters' test tools need newer releases than some of the core's floors (langchain-openai
1.0 needs openai 1.109.1, the core's floor is 1.40), and what the adapters do not pin
resolves to today's releases. Usage::

    python .ci/floors.py core > floors.txt         # or: langchain, llama_index, haystack
    pip install -c floors.txt -e '.[openai,test]'

Every requirement must have a floor (``>=``) or an exact pin (``==``, for tools such as
ruff), and a package has the same floor in every file. Extras left out of the floors
environments are listed in ``SKIPPED_EXTRAS`` with the reason.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = {
    "core": "pyproject.toml",
    "langchain": "adapters/langchain/pyproject.toml",
    "llama_index": "adapters/llama_index/pyproject.toml",
    "haystack": "adapters/haystack/pyproject.toml",
}
OWN = {
    "permsc-integrations",
    "langchain-permsc",
    "llama-index-postprocessor-permsc",
    "permsc-haystack",
}
SKIPPED_EXTRAS = {
    # torch's floor is a multi-GB CUDA download (only 2.13.0 has a CPU wheel on disk here):
    # the local backend's tests run in the main environment instead.
    "local": "torch",
    "embedded": "the local extra (torch) and 1.1 GB of model files at exact pins",
    "llamacpp": "llama-cpp-python compiles llama.cpp (~18 min)",
    "lint": "exact pins, not floors; run in the main environment",
    "ray": "a large wheel with pyarrow and pandas; its tests run in the main environment",
    # the SDK's own aiohttp extra is newer than the core's openai floor (1.40): its floor is
    # openai 2.0; the aiohttp tests run in the main environment and skip without it
    "aiohttp": "openai[aiohttp] needs openai >= 2.0, above the core's floor",
    "all": "an alias of other extras",
    # test-only clients of permsc serve (cohere, LangChain, LlamaIndex, Haystack, schemathesis)
    # with frameworks far above the adapters' floors; their tests run in the main environment
    "serve-test": "framework clients for permsc serve's tests",
    # LangGraph needs langchain-core >= 1.4.7, above the LangChain adapter's floor (1.0.0);
    # the tracing, MCP and LangGraph tests run in the main environment and skip without them
    "agents-test": "test-only: the OpenTelemetry SDK, the MCP client and LangGraph",
}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*)(;.*)?$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: Path) -> list[tuple[str, str]]:
    """``(file, requirement)`` for the dependencies and every extra not skipped."""
    project = tomllib.loads(pyproject.read_text())["project"]
    found = [(str(pyproject.relative_to(ROOT)), r) for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        if extra not in SKIPPED_EXTRAS:
            found += [(f"{pyproject.relative_to(ROOT)}[{extra}]", r) for r in reqs]
    return found


def floor_of(requirement: str) -> tuple[str, str | None, str]:
    """``(name, floor, marker)``, floor None for an exact pin or one of our own
    distributions; raises on a requirement with no floor."""
    match = _REQUIREMENT.match(requirement)
    if match is None:
        raise ValueError(f"cannot parse requirement {requirement!r}")
    name, _, specs, marker = match.groups()
    clauses = [c.strip() for c in specs.split(",") if c.strip()]
    floors = [c[2:].strip() for c in clauses if c.startswith(">=")]
    if canonical(name) in OWN or any(c.startswith("==") for c in clauses):
        return canonical(name), None, marker or ""
    if len(floors) != 1:
        raise ValueError(f"{requirement!r} needs one floor (>=X): undeclared floors go untested")
    return canonical(name), floors[0], marker or ""


def constraints(distribution: str) -> list[str]:
    """The floors of ``distribution``, after checking every file's (one floor a package)."""
    floors: dict[str, tuple[str, str, str]] = {}  # name -> (floor, marker, where)
    errors, own = [], set()
    for key, path in PYPROJECTS.items():
        for where, requirement in requirements(ROOT / path):
            name, floor, marker = floor_of(requirement)
            if floor is None:
                continue
            seen = floors.setdefault(name, (floor, marker, where))
            if seen[0] != floor:
                errors.append(f"{name}: floor {seen[0]} in {seen[2]} but {floor} in {where}")
            if key == distribution:
                own.add(name)
    if errors:
        raise ValueError("one package, one floor:\n  " + "\n  ".join(errors))
    return [f"{name}=={floors[name][0]}{floors[name][1]}" for name in sorted(own)]


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in PYPROJECTS:
        sys.exit(f"usage: python .ci/floors.py {'|'.join(PYPROJECTS)}")
    try:
        print("\n".join(constraints(sys.argv[1])))
    except ValueError as exc:
        sys.exit(f"floors: {exc}")
