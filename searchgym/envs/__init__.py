"""Environments: `SearchQAEnv` and its registered variants."""

from searchgym.envs.registration import ENV_IDS, register_envs
from searchgym.envs.search_qa import SearchQAEnv
from searchgym.envs.spaces import UnicodeText

__all__ = ["ENV_IDS", "SearchQAEnv", "UnicodeText", "register_envs"]
