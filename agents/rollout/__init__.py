"""Multi-turn rollouts over searchgym envs: token ids, loss masks, sampler logprobs and per-round spans.

- `RolloutEngine` / `RolloutConfig`: B questions x G samples with any `Policy` (`RolloutConfig` is also a
  training run's `TrainConfig.rollout`).
- `Trajectory`, `Segment`: what one episode yields; `collate` turns a batch into tensors.
- `TraceWriter`, `read_trace`: readable JSONL traces (`python -m agents rollouts show FILE`).
- `run_chat_episodes`: text-level episodes for chat-API policies (evaluation).
"""

from agents.rollout.config import RolloutConfig
from agents.rollout.engine import RolloutEngine, RolloutTiming
from agents.rollout.stats import credit_metrics, rollout_metrics
from agents.rollout.trace import TraceWriter, read_trace
from agents.rollout.trajectory import EpisodeEnd, Segment, Trajectory

__all__ = ["EpisodeEnd", "RolloutConfig", "RolloutEngine", "RolloutTiming", "Segment", "TraceWriter", "Trajectory", "credit_metrics", "read_trace",
           "rollout_metrics"]
