"""COSEARCH across 2 processes (torchrun, gloo, a tiny model): the ranker's groups are formed over the whole
step's calls and its update equals one process's over all of them.

Both ranks play the same question with scripted ranker replies (a real run shards whole questions, so two
ranks meet in one cluster when `group_by_question=False` finds their sub-queries alike; one question on
both ranks makes that certain). The single-process reference plays the same 8 episodes in rank order:
its one cluster of 8 calls, advantages, metrics and updated ranker weights are what each rank must get.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from agents.learners import CoSearchConfig
from agents.policies.base import Completion
from agents.rollout.batch import token_logprobs
from agents.train.trainer import Trainer
from tests.agents.train.test_distributed import assert_update_matches, grads, run_two_ranks, weights
from tests.agents.train.test_trainer import tiny_config

REPLIES = [
    "<reason>a</reason><rerank>[1] > [2]</rerank>",
    "<reason>b</reason><rerank>[2] > [1]</rerank>",
    "<reason>c</reason><rerank>[4] > [5]</rerank>",
    "no tags at all",
]
"""Sample s of a rank replies REPLIES[(s + rank) % 4]: the ranks' calls differ, so their rewards do."""


class _Scripted:
    """The ranker's sampler: replies with `self.reply`, with the ranker model's own logprobs."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer, self.reply = model, tokenizer, REPLIES[0]

    def generate(self, prompts, params, *, max_new_tokens=None):
        out = []
        for prompt in prompts:
            ids = self.tokenizer.encode(self.reply, add_special_tokens=False)
            full = torch.tensor([list(prompt) + ids])
            with torch.no_grad():
                lp = token_logprobs(self.model, full, torch.ones_like(full))[0, len(prompt):].tolist()
            out.append([Completion(ids, lp, self.reply, "stop")])
        return out

    def describe(self):
        return {"kind": "scripted"}


def _config(out: Path, **overrides):
    learner = CoSearchConfig(ranker_cold_start_steps=0, kl_coef=0.0)
    return tiny_config(out, learner=learner, env={"top_k": 2}, steps=1, **overrides)


def _play(trainer: Trainer, rank: int) -> list[SimpleNamespace]:
    """Rank `rank`'s 4 episodes of question 0 along its oracle trajectory, the ranker replying by script."""
    env, ranker = trainer._make_env("train"), trainer.second_model
    sampler = _Scripted(trainer.models["ranker"], ranker.policy.tokenizer)
    ranker.backend.policy = sampler
    base = env.unwrapped
    episodes = []
    for s in range(4):
        sampler.reply = REPLIES[(s + rank) % 4]
        _, reset_info = env.reset(options={"index": 0})
        infos = []
        for turn in base.world.oracle_trajectory(base.record):
            *_, term, trunc, info = env.step(turn)
            infos.append(info)
            if term or trunc:
                break
        episodes.append(SimpleNamespace(step_infos=infos, gold_answers=list(base.record.answers), question_id=reset_info["question_id"]))
    env.close()
    return episodes


def _report(trainer: Trainer, metrics: dict) -> dict:
    batch = trainer.second_model.last_batch
    return {"metrics": {k: v for k, v in metrics.items() if not k.startswith("time/")}, "groups": batch.groups,
            "advantages": {str(k): v for k, v in batch.advantages.items()}}


@pytest.mark.slow
def test_two_ranks_group_the_whole_steps_ranker_calls_and_update_like_one(tmp_path):
    launcher = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if launcher is None:
        pytest.skip("torchrun is not installed here")
    ref = Trainer(_config(tmp_path / "ref"))
    try:
        episodes = _play(ref, 0) + _play(ref, 1)
        metrics = ref.second_model.train_step(episodes, ref.env)
        expected = _report(ref, metrics)
        expected_weights, expected_grads = weights(ref.models["ranker"]), grads(ref.models["ranker"])
    finally:
        ref.close()
    assert expected["groups"] == [list(range(8))] and metrics["ranker/calls"] == 8  # one cluster over both halves
    assert len(set(expected["advantages"].values())) > 1

    run_two_ranks(launcher, "tests.agents.train.test_cosearch_distributed", tmp_path, timeout_s=240)

    for rank in (0, 1):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert got["groups"] == expected["groups"]
        assert got["advantages"].keys() == expected["advantages"].keys()
        for k, v in expected["advantages"].items():
            assert got["advantages"][k] == pytest.approx(v, rel=1e-9, abs=1e-12)
        assert got["metrics"].keys() == expected["metrics"].keys()
        for k, v in expected["metrics"].items():
            assert got["metrics"][k] == pytest.approx(v, rel=1e-5, abs=1e-7), k
        assert_update_matches(torch.load(tmp_path / f"ranker-rank{rank}.pt", weights_only=True), expected_weights, expected_grads, rank)
    final = [torch.load(tmp_path / f"ranker-rank{rank}.pt", weights_only=True)["weights"] for rank in (0, 1)]
    assert all(torch.equal(final[0][k], final[1][k]) for k in final[0])  # the replicas stay equal


def test_distributed_cosearch_is_allowed_but_not_sharded(tmp_path):
    from searchgym.errors import ConfigError

    assert _config(tmp_path, distributed=True).distributed
    with pytest.raises(ConfigError, match="second model"):
        _config(tmp_path, distributed=True, sharding="fsdp2")


def _worker(folder: Path) -> None:
    """One rank of the 2-process test (run by torchrun -m tests.agents.train.test_cosearch_distributed)."""
    trainer = Trainer(_config(folder / "run", distributed=True))
    try:
        assert trainer.world == 2
        metrics = trainer.second_model.train_step(_play(trainer, trainer.rank), trainer.env)
        model = trainer.models["ranker"]
        torch.save({"weights": weights(model), "grads": grads(model)}, folder / f"ranker-rank{trainer.rank}.pt")
        (folder / f"rank{trainer.rank}.json").write_text(json.dumps(_report(trainer, metrics)))
    finally:
        trainer.close()


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
