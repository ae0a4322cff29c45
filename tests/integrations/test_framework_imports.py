"""Importing searchgym, its vector env, the integrations package and verl's data prep imports no RL framework."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("openenv", "verifiers", "skyrl_gym", "gem", "verl", "hydra", "ray", "trl")


def test_import_searchgym_loads_no_framework():
    code = ("import sys, searchgym, searchgym.vector, searchgym.integrations, searchgym.integrations.verl, "
            "searchgym.integrations.verl.prepare, searchgym.integrations._common\n"
            f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "[]"
