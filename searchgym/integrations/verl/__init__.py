"""verl: searchgym episodes in verl's multi-turn agent-loop rollout, with GRPO.

- `agent_loop.SearchGymAgentLoop`: verl's `AgentLoopBase`, registered as `searchgym_agent`, that plays one
  searchgym episode per sample and returns the episode's return as the sample's reward, and the per-turn
  rewards, labels, entities and candidate pools in verl's extra fields (its docstring lists them).
- `prepare`: `python -m searchgym.integrations.verl.prepare --id ID --out DIR [--split ...] [--env-arg k=v]`
  writes verl parquet (`prompt`, `data_source`, `reward_model`, `extra_info`, `agent_name`) from any id.
- `CONFIG_DIR` holds `searchgym_grpo.yaml` (GRPO over verl's `ppo_trainer` defaults, the agent-loop rollout
  with this loop) and `agent_loops.yaml` (the loop's registration, which verl's workers read), for
  `python -m verl.trainer.main_ppo --config-path $CONFIG_DIR --config-name searchgym_grpo ...`
  (docs/frameworks.md has the whole command).

Importing this package imports neither verl nor the agent loop: `prepare` needs only pyarrow.
"""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
"""The folder of `searchgym_grpo.yaml` and `agent_loops.yaml`."""
AGENT_LOOP_CONFIG = CONFIG_DIR / "agent_loops.yaml"

__all__ = ["AGENT_LOOP_CONFIG", "CONFIG_DIR"]
