"""TRL's GRPOTrainer on searchgym episodes: the dataset, the rollout's output contract, the reward
functions, and two real training steps with a tiny model on SearchQA-Synthetic-v0."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import pytest

pytest.importorskip("torch", reason="the TRL integration needs torch (pip install searchgym[agents])")
pytest.importorskip("trl", minversion="1.0", reason="the TRL integration needs TRL 1.x (pip install searchgym[trl])")

import torch
from trl import GRPOConfig

import searchgym  # noqa: F401  (registers the ids)
from agents.integrations.trl import (
    SearchQARollout,
    TRLRolloutConfig,
    answer_reward,
    env_reward,
    format_reward,
    make_grpo_trainer,
    reward_part,
)
from agents.models import TinyModelConfig, build_tiny_model
from agents.policies.base import Completion, check_budgets
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.rollout import Segment, Trajectory, credit_metrics
from searchgym.errors import BatchError, ConfigError

ENV_KWARGS = {"num_entities": 300, "num_questions": 20, "hops": (1,), "max_turns": 3, "top_k": 1, "retriever": "rank_bm25", "cache_dir": False}


def make_env() -> gym.Env:
    return gym.make("SearchQA-Synthetic-v0", **ENV_KWARGS)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads and on a shared CPU spin-waiting slows them down."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class OracleFirstSample:
    """A policy whose first sample of every group follows the synthetic world's oracle trajectory (two
    turns: a search, then the right answer) while every other episode is sampled by the trainer's model
    (`HFPolicy` over the shared weights). A random tiny model never writes a search or a right answer on
    its own; this gives each group one rewarded, searching episode next to sampled ones, so the group's
    rewards differ and TRL's update has a nonzero advantage to follow."""

    def __init__(self, model, tokenizer):
        self.inner = HFPolicy(model, tokenizer, config=HFPolicyConfig(seed=0, dtype="float32"))
        self.tokenizer = tokenizer
        env = make_env()
        world, records = env.unwrapped.world, env.unwrapped.records
        self.oracle = {r.question: world.oracle_trajectory(r) for r in records}
        self.oracle_episodes = 0

    def _turns(self, context: str) -> list[str]:
        return next(turns for question, turns in self.oracle.items() if f"Question: {question}" in context)

    def generate(self, prompts, params, *, max_new_tokens=None):
        budgets = check_budgets(prompts, params, max_new_tokens)
        out = self.inner.generate(prompts, params, max_new_tokens=max_new_tokens)
        for i, prompt in enumerate(prompts):
            context = self.tokenizer.decode(list(prompt))
            turns = self._turns(context)
            done = sum(t in context for t in turns)
            if params.n > 1:  # first turn: the group's sample 0 starts the oracle episode
                out[i][0] = self._completion(turns[0], budgets[i])
                self.oracle_episodes += 1
            elif done and done < len(turns):  # an oracle episode continues
                out[i][0] = self._completion(turns[done], budgets[i])
        return out

    def _completion(self, text: str, budget: int) -> Completion:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) > budget:  # cut like any sampler at the budget
            ids = ids[:budget]
            return Completion(ids, [-1.0] * len(ids), self.tokenizer.decode(ids), "length")
        return Completion(ids, [-1.0] * len(ids), text, "stop", text[text.rindex("</"):])

    def load_weights(self, path) -> None:
        raise NotImplementedError

    def update_weights(self, named_tensors) -> None:
        raise NotImplementedError

    @property
    def weight_version(self) -> int:
        return self.inner.weight_version

    def mark_updated(self) -> None:
        self.inner.mark_updated()

    def describe(self):
        return {"policy": "oracle-first-sample"}


def grpo_args(tmp_path, **overrides) -> GRPOConfig:
    settings = {"output_dir": str(tmp_path / "trl"), "per_device_train_batch_size": 4, "num_generations": 2, "max_completion_length": 512,
                "max_steps": 2, "learning_rate": 1e-3, "logging_steps": 1, "report_to": [], "save_strategy": "no", "use_cpu": True,
                "bf16": False, "seed": 0}
    settings.update(overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers' renaming of gradient_checkpointing
        return GRPOConfig(**settings)


def build_trainer(tmp_path, *, reward_funcs=None, policy=True, **overrides):
    model, tokenizer = build_tiny_model(TinyModelConfig(seed=0))
    rollout = SearchQARollout(make_env, TRLRolloutConfig(max_turn_tokens=96), policy_factory=OracleFirstSample if policy else None)
    trainer = make_grpo_trainer(model, tokenizer, make_env, grpo_args(tmp_path, **overrides), rollout=rollout, limit=8, reward_funcs=reward_funcs)
    return trainer, model, tokenizer


# -- the dataset --------------------------------------------------------------------------------------------


def test_dataset_rows_are_the_env_questions():
    env = make_env()
    rollout = SearchQARollout(make_env)
    data = rollout.dataset(limit=5)
    assert data.column_names == ["prompt", "question_index", "question_id"] and len(data) == 5
    for i, row in enumerate(data):
        obs, info = env.reset(options={"index": i})
        assert row["prompt"] == [{"role": "user", "content": obs}]
        assert row["question_index"] == i and row["question_id"] == info["question_id"]
    raw = SearchQARollout(make_env, TRLRolloutConfig(use_chat_template=False)).dataset(limit=2)
    assert raw[1]["prompt"] == env.reset(options={"index": 1})[0]
    with pytest.raises(ConfigError, match="limit"):
        rollout.dataset(limit=0)


# -- reward functions ---------------------------------------------------------------------------------------


def episode(question_id: str, turns: list[str], infos: list[dict], reward: float, end: str, golds=("Paris",)) -> Trajectory:
    segments = [Segment("prompt", 0, 2, "p", -1)] + [Segment("agent", 2 + k, 3 + k, text, k) for k, text in enumerate(turns)]
    n = 2 + len(turns)
    return Trajectory(0, 0, question_id, "q?", list(golds), list(range(n)), [0, 0] + [1] * len(turns), [0.0] * n, segments, infos, {}, reward, end)


ANSWERED = episode("a", ["<think>t</think><search>x</search>", "<think>t</think><answer>the Paris</answer>"],
                   [{"action": "search"}, {"action": "answer", "answer": "the Paris"}], 1.0, "answered")
PARTIAL = episode("b", ["<answer>Paris France</answer>"], [{"action": "answer", "answer": "Paris France"}], 0.0, "answered")
UNFINISHED = episode("c", ["<search>x</search>", "no tags"], [{"action": "search"}, {"action": "invalid", "invalid_action": True}], 0.0, "format_error")


def test_reward_functions_score_literal_episodes():
    batch = [ANSWERED, PARTIAL, UNFINISHED]
    logged: dict[str, float] = {}
    assert env_reward([None] * 3, searchgym_trajectory=batch, log_metric=logged.__setitem__) == [1.0, 0.0, 0.0]
    assert logged["rollout/searches_mean"] == pytest.approx(2 / 3) and logged["rollout/end/answered"] == pytest.approx(2 / 3)
    assert answer_reward("em")([None] * 3, searchgym_trajectory=batch) == [1.0, 0.0, 0.0]
    # F1 of "Paris France" against "Paris": precision 1/2, recall 1 -> 2/3.
    assert answer_reward("f1")([None] * 3, searchgym_trajectory=batch) == pytest.approx([1.0, 2 / 3, 0.0])
    assert answer_reward("cover_em")([None] * 3, searchgym_trajectory=batch) == [1.0, 1.0, 0.0]
    assert answer_reward("f1").__name__ == "searchgym_f1"
    assert format_reward([None] * 3, searchgym_trajectory=batch) == [1.0, 1.0, 0.0]


def labels(u, v, **flags) -> dict:
    return {"retrieval_utility": u, "reasoning_correctness": v, "contribution": None if u is None else u * v,
            "pending": False, "failed": False, **flags}


# Two searches (u, v) = (1, 1) and (1, 0), then an answer with F1 0.5; the summary holds the final labels.
LABELLED = episode("d", ["s1", "s2", "a"], [
    {"action": "search", "labels": labels(1, 1), "entities": {"rate": 0.5}},
    {"action": "search", "labels": labels(1, 0), "entities": {"rate": 0.5}},
    {"action": "answer", "labels": labels(None, None), "entities": {"rate": 1.0}, "reward": {"answer": 0.0, "f1": 0.5, "format": 1.0},
     "episode": {"turn_labels": [labels(1, 1), labels(1, 0), labels(None, None)], "entity_rate": 1.0}},
], 0.0, "answered")
# Over-long: no summary; one search labelled (0, 1) and one whose deferred label is still pending.
OVER_LONG = episode("e", ["s1", "s2"], [
    {"action": "search", "labels": labels(0, 1), "entities": {"rate": 0.0}},
    {"action": "search", "labels": labels(None, None, pending=True), "entities": {"rate": 0.0}},
], 0.0, "over_long")


def test_credit_metrics_and_reward_parts_of_literal_episodes():
    metrics = credit_metrics([LABELLED, OVER_LONG])
    # Labelled rounds: (1, 1), (1, 0) and (0, 1); the answer's and the pending label are no rounds.
    assert metrics == pytest.approx({
        "credit/labelled_rounds": 3 / 2, "credit/judge_failures": 0.0, "credit/retrieval_utility": 2 / 3,
        "credit/reasoning_correctness": 2 / 3, "credit/contribution": 1 / 3, "credit/entity_rate": (1.0 + 0.0) / 2,
    })
    assert credit_metrics([ANSWERED]) == {"credit/labelled_rounds": 0.0, "credit/judge_failures": 0.0}
    assert credit_metrics([]) == {}
    logged: dict[str, float] = {}
    env_reward([None] * 2, searchgym_trajectory=[LABELLED, OVER_LONG], log_metric=logged.__setitem__)
    assert logged["credit/contribution"] == pytest.approx(1 / 3)
    assert reward_part("f1")([None] * 2, searchgym_trajectory=[LABELLED, OVER_LONG]) == [0.5, 0.0]
    assert reward_part("format")([None] * 2, searchgym_trajectory=[LABELLED, OVER_LONG]) == [1.0, 0.0]
    assert reward_part("f1").__name__ == "env_f1"
    with pytest.raises(ConfigError, match="unknown reward part"):
        reward_part("bleu")


def test_reward_functions_reject_missing_or_misaligned_episodes():
    with pytest.raises(ConfigError, match="SearchQARollout"):
        env_reward(["text"])
    with pytest.raises(BatchError, match="out of step"):
        format_reward([None] * 2, searchgym_trajectory=[ANSWERED, PARTIAL], question_id=["a", "c"])
    with pytest.raises(ConfigError, match="unknown answer reward"):
        answer_reward("bleu")


def test_config_errors():
    with pytest.raises(ConfigError, match="max_turn_tokens"):
        TRLRolloutConfig(max_turn_tokens=0)
    with pytest.raises(ConfigError, match="max_batch_rows"):
        TRLRolloutConfig(max_batch_rows=0)


# -- the rollout against a real GRPOTrainer -----------------------------------------------------------------


@pytest.mark.slow
def test_rollout_output_contract(tmp_path):
    trainer, _, tokenizer = build_trainer(tmp_path)
    rollout = trainer.rollout_func
    data = trainer.train_dataset
    prompts = [data[0]["prompt"]] * 2 + [data[3]["prompt"]] * 2  # TRL's layout: G copies of each prompt
    out = rollout(prompts, trainer)
    trajectories = out["searchgym_trajectory"]
    assert [t.question_id for t in trajectories] == [data[0]["question_id"]] * 2 + [data[3]["question_id"]] * 2
    assert [t.sample for t in trajectories] == [0, 1, 0, 1]  # one group of 2 per question
    eos = tokenizer.eos_token_id
    for t, prompt_ids, completion, logprobs, mask in zip(trajectories, out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"]):
        p = t.prompt_length
        assert prompt_ids == t.token_ids[:p] and tokenizer.decode(prompt_ids).count("Question:") == 1
        assert len(completion) == len(logprobs) == len(mask)
        ended = t.finish_reason != "over_long"
        extra = int(ended and t.token_ids[-1] != eos)  # the EOS marking an ended episode, never trained on
        assert completion == t.token_ids[p:] + [eos] * extra and mask == t.loss_mask[p:] + [0] * extra
        for s in t.segments[1:]:
            assert set(mask[s.start - p : s.end - p]) == ({1} if s.kind == "agent" else {0})
    oracle = trajectories[0]
    assert oracle.finish_reason == "answered" and oracle.reward == 1.0
    assert [s.kind for s in oracle.segments] == ["prompt", "agent", "observation", "agent"]
    assert "<information>" in oracle.segments[2].text and oracle.step_infos[0]["action"] == "search"

    # A prompt that is not one of the env's questions is named, not guessed.
    with pytest.raises(BatchError, match="not the reset prompt"):
        rollout([[{"role": "user", "content": "What is the capital of France?"}]], trainer)
    # The sampler cannot honour these TRL settings.
    trainer.min_p = 0.1
    with pytest.raises(ConfigError, match="min_p"):
        rollout(prompts, trainer)


@pytest.mark.slow
def test_over_long_episodes_get_no_eos(tmp_path):
    # 40 tokens do not hold the oracle's first turn (60 tokens): it is cut and the episode is over-long.
    trainer, _, _ = build_trainer(tmp_path, max_completion_length=40)
    data = trainer.train_dataset
    out = trainer.rollout_func([data[1]["prompt"]] * 2, trainer)
    trajectories = out["searchgym_trajectory"]
    assert trajectories[0].finish_reason == "over_long"
    for t, completion in zip(trajectories, out["completion_ids"]):
        if t.finish_reason == "over_long":
            assert completion == t.token_ids[t.prompt_length :]


# -- training end to end ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_grpo_trainer_trains_on_multi_turn_episodes(tmp_path):
    trainer, model, _ = build_trainer(tmp_path, reward_funcs=[env_reward, answer_reward("f1"), format_reward])
    rollout = trainer.rollout_func
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    batches, seen = [], []
    generate = trainer._generate_and_score_completions

    def capture(inputs):  # what TRL builds from the rollout: the masks its loss uses
        out = generate(inputs)
        batches.append(out)
        seen.append(list(rollout.trajectories))
        return out

    trainer._generate_and_score_completions = capture
    trainer.train()

    logs = [entry for entry in trainer.state.log_history if "rewards/env_reward/mean" in entry]
    assert len(logs) == 2 and len(batches) == 2
    for log, batch, episodes in zip(logs, batches, seen):
        assert len(episodes) == 4
        # Rewards are the env's returns and searchgym's metrics of the same episodes.
        assert log["rewards/env_reward/mean"] == pytest.approx(sum(t.reward for t in episodes) / 4)
        assert log["rewards/searchgym_f1/mean"] == pytest.approx(sum(answer_reward("f1")([None] * 4, searchgym_trajectory=episodes)) / 4)
        assert log["reward_std"] > 0 and math.isfinite(log["loss"])
        assert log["rollout/turns_mean"] == pytest.approx(sum(t.num_turns for t in episodes) / 4)
        # Multi-turn episodes happened: the env was stepped several times and its observations were appended.
        oracle, sampled = episodes[0], episodes[1]
        assert oracle.finish_reason == "answered" and len(oracle.step_infos) == 2 and oracle.step_infos[0]["shown"]
        assert sampled.num_turns >= 1 and len(sampled.step_infos) >= 1
        # TRL's loss mask (completion_mask * tool_mask) is 0 on every observation token and 1 on every sampled one.
        loss_mask = (batch["completion_mask"] * batch["tool_mask"]).tolist()
        for row, t in zip(loss_mask, episodes):
            p = t.prompt_length
            for s in t.segments[1:]:
                assert set(row[s.start - p : s.end - p]) == ({1} if s.kind == "agent" else {0}), s.kind
            assert sum(row) == t.num_sampled_tokens
        observation_tokens = sum(s.end - s.start for t in episodes for s in t.segments if s.kind == "observation")
        assert observation_tokens > 0
    assert rollout.policy_factory is OracleFirstSample and rollout._engine.policy.oracle_episodes == 4
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    rollout.close()
