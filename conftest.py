"""Collection settings for the whole repository. pytest also collects the library's own modules, for their
doctests (pyproject's `testpaths`); an integration's modules import their framework, so they are left out
where that framework is not installed (their tests under tests/integrations skip with the reason)."""

import importlib.util

INTEGRATIONS = {
    "searchgym/integrations/openenv": "openenv",
    "searchgym/integrations/verifiers.py": "verifiers",
}
"""Integration module or package (relative to this file) -> the framework it imports."""

collect_ignore = [path for path, framework in INTEGRATIONS.items() if importlib.util.find_spec(framework) is None]
