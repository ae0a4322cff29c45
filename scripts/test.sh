#!/usr/bin/env bash
# The test suite: sets up .venv on first use, then runs pytest. Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec python -m pytest "$@"
