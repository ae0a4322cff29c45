#!/usr/bin/env bash
# The main job: sets up .venv on first use, then the reference comparison on the CPU preset: GRPO, CW-GRPO,
# E-GRPO and COSEARCH trained from one cold-started SmolLM2-135M on 1- and 2-hop SearchQA-Synthetic-v0 and
# evaluated on held-out questions (results table and curves.png under results/learners).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec python -m agents.experiments.learners --preset cpu "$@"
