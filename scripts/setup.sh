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
  "$venv/bin/python" -m pip install -q -e "$root[dev]"
  echo "$want" >"$stamp"
fi
export PATH="$venv/bin:$PATH"
