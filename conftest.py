"""Collection settings for the whole repository (pytest reads this before any test).

The framework adapters below import their framework (SkyRL-gym, GEM, verl) when imported, and hold no
doctests: `--doctest-modules` leaves them out, so that the suite collects where a framework is absent. Their
tests are `tests/integrations/test_<framework>.py`, which skip with a reason where it is absent.
"""

collect_ignore = [
    "searchgym/integrations/skyrl.py",
    "searchgym/integrations/gem.py",
    "searchgym/integrations/verl/agent_loop.py",
]
