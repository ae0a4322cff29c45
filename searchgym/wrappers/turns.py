"""`TurnLimitAsTerminal`: report running out of turns as a terminal step, for learners that bootstrap."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class TurnLimitAsTerminal(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Returns `terminated=True, truncated=False` where the env ran out of turns.

    searchgym's envs end an unanswered episode after `max_turns` with `truncated=True`, the Gymnasium
    signal for a time limit that is not part of the task. Learners such as stable-baselines3's PPO then
    bootstrap: they add gamma * V(last observation) to the reward of that step. But the turn limit *is*
    part of the task (an agent that never answers earns nothing), and an observation that shows the turn
    counter (`HashedFeatureObservation`) makes it Markov, so the right target is no bootstrap (Pardo et
    al., "Time Limits in Reinforcement Learning", 2018). Without this, V of the never-trained last
    observation leaks into the return, and on hard questions a policy can learn that stalling until the
    limit pays more than answering.

    `info["episode"]["outcome"]` still says `out_of_turns`, and `info["turn_limit"]` is True on that step.
    """

    def __init__(self, env: gym.Env):
        # Recorded so that `env.spec` can re-create the wrapper (Gymnasium's check_env does).
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated:
            info = dict(info)
            info["turn_limit"] = True
            return obs, reward, True, False, info
        return obs, reward, terminated, truncated, info
