"""`Trajectory`: one multi-turn episode as the learner sees it, token by token.

`token_ids` is the concatenation of the segments' ids, in order: the chat-templated prompt, then for each
turn the tokens the policy sampled (an `agent` segment) and, unless the episode ended, the env's
observation tokenized on its own (an `observation` segment). Ids are built by concatenating segment ids
and never by re-encoding text, so what the learner scores is exactly what the sampler produced.

Per token, aligned with `token_ids` (all the same length):
- `loss_mask[t]` is 1 when the policy sampled token t and 0 for prompt and observation tokens;
- `logprobs[t]` is the sampler's logprob of token t given tokens[:t] (0.0 where the mask is 0).

`rounds[k]` is the token span (start, end) of the agent's k-th turn; `step_infos[k]` is the env's step info
for that turn (the two lists have the same length, except that an `over_long` episode may end with a round
the env never saw).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from searchgym.info import Outcome, ResetInfo, StepInfo

EpisodeEnd = Literal[Outcome, "over_long", "format_error"]
"""Why the episode ended:
- `answered`: the agent gave an answer (the env terminated);
- `out_of_turns`: the env truncated it after `max_turns` turns whose last action was well formed;
- `over_long`: the episode's token budget ran out while the agent was writing, or the next observation did
  not fit in it; the env did not end the episode (a turn cut by the per-turn budget is sent to the env,
  which treats it like any other text);
- `format_error`: the episode ended on an unparseable action (the last turn, or the first one when the
  rollout stops on invalid actions)."""

SegmentKind = Literal["prompt", "agent", "observation"]


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    start: int
    """First token index in `Trajectory.token_ids`."""
    end: int
    """One past the last token index."""
    text: str
    """Agent: the decoding of the sampled ids (what the env received). Prompt and observation: the text
    that was tokenized (after truncation to `max_obs_tokens`, the decoding of the kept ids)."""
    turn: int
    """The turn the segment belongs to (-1 for the prompt)."""
    finish: str | None = None
    """For agent segments: the sampler's finish reason (`stop`, `length`)."""


@dataclass
class Trajectory:
    group: int
    """Index of the question in the rollout batch (the GRPO group)."""
    sample: int
    """Index of this sample within its group (0..G-1)."""
    question_id: str
    question: str | None
    gold_answers: list[str] | None
    """The record's gold answers, for traces and analysis only (never shown to the policy)."""
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    segments: list[Segment]
    step_infos: list[StepInfo]
    reset_info: ResetInfo
    reward: float
    """Sum of the env's rewards over the episode (0 for an over-long episode that never answered)."""
    finish_reason: EpisodeEnd
    weight_version: int = 0
    """The policy's weight version that sampled this trajectory."""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not len(self.token_ids) == len(self.loss_mask) == len(self.logprobs):
            raise ValueError("token_ids, loss_mask and logprobs must have the same length")

    @property
    def prompt_length(self) -> int:
        return self.segments[0].end

    @property
    def rounds(self) -> list[tuple[int, int]]:
        """Token span (start, end) of each agent turn, in turn order."""
        return [(s.start, s.end) for s in self.segments if s.kind == "agent"]

    @property
    def agent_texts(self) -> list[str]:
        return [s.text for s in self.segments if s.kind == "agent"]

    @property
    def num_turns(self) -> int:
        return sum(s.kind == "agent" for s in self.segments)

    @property
    def num_sampled_tokens(self) -> int:
        return sum(self.loss_mask)

    @property
    def format_valid(self) -> bool:
        """The env's verdict on the whole trajectory's format (False when it never ended the episode)."""
        if not self.step_infos or "episode" not in self.step_infos[-1]:
            return False
        return bool(self.step_infos[-1]["episode"]["format_valid"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        data["segments"] = [Segment(**s) for s in data["segments"]]
        return cls(**data)
