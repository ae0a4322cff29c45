"""Collection settings for the whole repository (pytest reads this before any test).

pytest also collects the library's own modules, for their doctests (pyproject's `testpaths`). An
integration's modules import their framework and hold no doctests, so they are left out where that framework
is not installed; their tests (`tests/integrations/test_<framework>.py`) skip with the reason.
"""

import importlib.util

INTEGRATIONS = {
    "searchgym/integrations/openenv": "openenv",
    "searchgym/integrations/verifiers.py": "verifiers",
    "searchgym/integrations/skyrl.py": "skyrl_gym",
    "searchgym/integrations/gem.py": "gem",
    "searchgym/integrations/verl/agent_loop.py": "verl",
}
"""Integration module or package (relative to this file) -> the framework it imports."""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# skyrl, gem and verl adapters have no doctests and import heavy frameworks: never collected for doctests.
collect_ignore = [path for path, framework in INTEGRATIONS.items()
                  if framework in {"skyrl_gym", "gem", "verl"} or not _importable(framework)]
