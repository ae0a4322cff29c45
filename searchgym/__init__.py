"""searchgym: Gymnasium environments for training and evaluating LLM search agents.

`import searchgym` registers every environment id (`searchgym.ENV_IDS`) with Gymnasium:

>>> import gymnasium as gym, searchgym
>>> "SearchQA-HotpotQA-v0" in searchgym.ENV_IDS
True
"""

from searchgym.envs import ENV_IDS, SearchQAEnv, register_envs

__version__ = "0.1.0"

register_envs()

__all__ = ["ENV_IDS", "SearchQAEnv", "__version__"]
