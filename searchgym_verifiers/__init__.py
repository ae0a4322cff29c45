"""The verifiers plugin `searchgym-verifiers`: verifiers loads tasksets, environments and harnesses by
installed top-level module name, so this module re-exports `searchgym.integrations.verifiers`, where
everything is defined and documented."""

from searchgym.integrations.verifiers import SearchQAHarness, SearchQATaskset, SearchQAVerifiersEnv, load_environment

__all__ = ["SearchQAHarness", "SearchQATaskset", "SearchQAVerifiersEnv", "load_environment"]
