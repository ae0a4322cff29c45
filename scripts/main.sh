#!/usr/bin/env bash
# The main job: sets up .venv on first use, then evaluates the baseline agents on SearchQA-Synthetic-v0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec python -m benchmarks.baseline "$@"
