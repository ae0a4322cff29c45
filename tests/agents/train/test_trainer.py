"""End-to-end training on CPU with a tiny random model and the synthetic world, and exact resume."""

import json
import math

import pytest
import torch

from agents.train import TrainConfig
from agents.learners import CoSearchConfig, CWGRPOConfig
from agents.train.checkpoint import CheckpointError, list_checkpoints
from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
from agents.train.trainer import Trainer
from searchgym.errors import ConfigError


def tiny_config(tmp_path, *, env: dict | None = None, rollout: dict | None = None, optim: dict | None = None, **top) -> TrainConfig:
    """A tiny random model on a small synthetic world; `env`, `rollout` and `optim` change those sections. In
    float32, whose arithmetic the equivalence checks hold to tight tolerances, whatever the CPU (bfloat16 runs
    are asked for by name)."""
    return TrainConfig(**{"model": "tiny", "steps": 2, "questions_per_step": 2, "out_dir": str(tmp_path / "run"), "dtype": "float32", **top},
                       env=EnvConfig(**{"num_entities": 300, "num_questions": 20, "hops": (1,), "max_turns": 2, **(env or {})}),
                       rollout=RolloutConfig(**{"group_size": 2, "max_turn_tokens": 12, "max_response_tokens": 64, **(rollout or {})}),
                       optim=OptimConfig(**{"micro_batch": 2, "lr": 1e-3, **(optim or {})}))


@pytest.mark.parametrize("learner", ["grpo", "cw-grpo", "e-grpo", "cosearch"])
def test_each_learner_trains_end_to_end(tmp_path, learner):
    # Two of the ranker's cold-start steps (the default's many cost seconds and show nothing more here).
    config = CoSearchConfig(ranker_cold_start_steps=2) if learner == "cosearch" else learner
    trainer = Trainer(tiny_config(tmp_path, learner=config))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    history = trainer.run()
    trainer.close()
    assert [m["step"] for m in history] == [1, 2]
    for m in history:
        assert math.isfinite(m["loss/policy"]) and m["rollout/sampled_tokens"] > 0
        assert 0.0 <= m["rollout/em"] <= 1.0
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    # COSEARCH's ranker has a cold start by default; its losses are the step-0 line.
    assert [json.loads(x)["step"] for x in lines] == ([0, 1, 2] if learner == "cosearch" else [1, 2])
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["step-000001", "step-000002"]
    # Random rewards on a random model can all be equal (zero advantage); the update still ran when any
    # trajectory had a nonzero advantage, which the learner-specific metrics below tell apart.
    if any(m["loss/tokens"] > 0 and m["loss/grad_norm"] > 0 for m in history):
        assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    for m in history:
        # The trainer's own step split: the parts are measured separately and never exceed the whole.
        parts = [m["time/generate_s"], m["time/env_s"], m["time/update_s"], m["time/other_s"]]
        assert all(p >= 0 for p in parts) and m["time/generate_s"] > 0 and m["time/update_s"] > 0
        assert sum(parts[:3]) <= m["time/step_s"]
        assert m["perf/sampled_tok_s"] > 0 and m["perf/prefill_tok_s"] > 0 and m["perf/peak_rss_gb"] > 0
    # What each learner asked of the env, and its official KL default (a reference model only with KL).
    env = trainer.env.unwrapped
    assert (trainer.reference is not None) == (learner in ("cw-grpo", "cosearch"))
    if learner == "cw-grpo":
        assert "cw_grpo/contributing_round_share" in history[-1] and env.judge is not None
    if learner == "e-grpo":
        assert "e_grpo/entity_rate" in history[-1] and env.entity_match == "exact"
    if learner == "cosearch":
        assert "ranker/calls" in history[-1] and type(env.ranker).__name__ == "LLMRanker"
        # A turn's ranker calls go to the ranker's sampler as one batch (tests/agents/test_rollout_engine.py).
        assert trainer.engine.config.gather_env_calls and type(env.ranker.backend).__name__ == "GatheringBackend"
        assert trainer.second_model.reference is not None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_resume_reproduces_the_next_step(tmp_path, dtype):
    straight = Trainer(tiny_config(tmp_path / "a", learner="grpo", steps=2, rollout={"temperature": 1.0}, dtype=dtype))
    full = straight.run()
    straight.close()

    first = Trainer(tiny_config(tmp_path / "b", learner="grpo", steps=1, dtype=dtype))
    first.run()
    first.close()
    # A new process would start here: a fresh Trainer finds the step-1 checkpoint and continues.
    resumed = Trainer(tiny_config(tmp_path / "b", learner="grpo", steps=2, dtype=dtype))
    assert resumed.compute_dtype == getattr(torch, dtype) and resumed.policy.compute_dtype == resumed.compute_dtype
    assert resumed.step == 1 and resumed.position == 2
    second = resumed.run()
    resumed.close()
    assert len(second) == 1
    assert second[0]["rollout/sampled_tokens"] == full[1]["rollout/sampled_tokens"]
    assert second[0]["loss/policy"] == pytest.approx(full[1]["loss/policy"], rel=1e-5, abs=1e-7)
    for (n, a), (_, b) in zip(straight.model.named_parameters(), resumed.model.named_parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=n)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_kl_reference_is_the_cold_started_policy_and_survives_a_resume(tmp_path, dtype):
    """With a KL term, the reference is the policy RL starts from: the cold start's result, not the model as
    loaded; COSEARCH's ranker likewise. A resumed run cannot remake it, so it comes back from the checkpoint,
    in the precision it computes with (bfloat16: its linear weights are the cold start's rounded to bfloat16),
    and a resume in the other precision is refused with the setting to use."""
    learner = CoSearchConfig(kl_coef=0.01, ranker_cold_start_steps=2)
    optim = {"cold_start_steps": 2, "cold_start_batch": 2, "cold_start_lr": 3e-3}
    first = Trainer(tiny_config(tmp_path / "run", learner=learner, steps=1, optim=optim, dtype=dtype))
    loaded = {n: p.detach().clone() for n, p in first.reference.named_parameters()}
    ranker_loaded = {n: p.detach().clone() for n, p in first.second_model.reference.named_parameters()}
    first.cold_start()
    cold = {n: p.detach().clone() for n, p in first.model.named_parameters()}
    ranker_cold = {n: p.detach().clone() for n, p in first.second_model.models["ranker"].named_parameters()}
    for n, p in first.reference.named_parameters():
        torch.testing.assert_close(p, cold[n].to(p.dtype), rtol=0, atol=0, msg=n)
    assert any(not torch.equal(loaded[n], cold[n].to(loaded[n].dtype)) for n in cold)  # the cold start moved the policy
    for n, p in first.second_model.reference.named_parameters():
        torch.testing.assert_close(p, ranker_cold[n].to(p.dtype), rtol=0, atol=0, msg=n)
    assert any(not torch.equal(ranker_loaded[n], ranker_cold[n].to(ranker_loaded[n].dtype)) for n in ranker_cold)
    if dtype == "bfloat16":
        assert first.reference.get_input_embeddings().weight.dtype == torch.float32
        assert first.reference.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
    first.train_step()
    first.save()
    first.close()
    resumed = Trainer(tiny_config(tmp_path / "run", learner=learner, steps=2, optim=optim, dtype=dtype))
    assert resumed.step == 1
    for n, p in resumed.reference.named_parameters():
        torch.testing.assert_close(p, cold[n].to(p.dtype), rtol=0, atol=0, msg=n)
    for n, p in resumed.second_model.reference.named_parameters():
        torch.testing.assert_close(p, ranker_cold[n].to(p.dtype), rtol=0, atol=0, msg=n)
    resumed.close()
    other = "float32" if dtype == "bfloat16" else "bfloat16"
    with pytest.raises(CheckpointError, match=f"computed in {dtype} .* resume with TrainConfig.dtype='{dtype}'"):
        Trainer(tiny_config(tmp_path / "run", learner=learner, steps=2, optim=optim, dtype=other))


def test_cold_start_lowers_the_oracle_loss(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, optim={"cold_start_steps": 4, "cold_start_batch": 4, "cold_start_lr": 3e-3}))
    losses = trainer.cold_start()
    trainer.close()
    assert len(losses) == 4 and losses[-1] < losses[0]


def test_a_continued_cold_start_takes_up_where_the_first_stopped(tmp_path, monkeypatch):
    """`cold_start_skip` passes over an earlier cold start's batches of the same seeded stream: 2 steps, then 1
    more with skip 2, train on the questions of one 3-step cold start, in order."""
    from dataclasses import replace

    import agents.train.sft as sft

    seen: list[int] = []
    example = sft.oracle_example
    monkeypatch.setattr(sft, "oracle_example", lambda env, tok, i: seen.append(i) or example(env, tok, i))

    def questions(steps: int, skip: int = 0) -> list[int]:
        seen.clear()
        config = tiny_config(tmp_path, optim={"cold_start_steps": steps, "cold_start_batch": 2})
        trainer = Trainer(replace(config, optim=replace(config.optim, cold_start_skip=skip)))
        trainer.cold_start()
        trainer.close()
        return list(seen)

    whole = questions(3)
    assert len(whole) == 6 and whole[:4] == questions(2) and whole[4:] == questions(1, skip=2)
    assert questions(1) != whole[4:]  # without the skip the continuation would repeat the first batch
    with pytest.raises(ConfigError, match="cold_start_skip must be >= 0"):
        OptimConfig(cold_start_skip=-1)


def test_config_errors():
    with pytest.raises(ConfigError, match="learner"):
        TrainConfig(learner="ppo")
    with pytest.raises(ConfigError, match="group_size"):
        TrainConfig(rollout=RolloutConfig(group_size=1))
    with pytest.raises(ConfigError, match="TrainConfig.env must be an EnvConfig"):
        TrainConfig(env={"hops": (1,)})
    with pytest.raises(TypeError, match="'hop'"):
        EnvConfig(hop=(1,))


def test_each_option_has_its_one_nested_place():
    config = TrainConfig(learner=CWGRPOConfig(kl_coef=0.0), env=EnvConfig(hops=(1, 2), id="SearchQA-Synthetic-v0"), optim=OptimConfig(lr=1e-5),
                         rollout=RolloutConfig(group_size=3), steps=5)
    assert (config.env.hops, config.optim.lr, config.rollout.group_size, config.steps) == ((1, 2), 1e-5, 3, 5)
    assert config.learner == CWGRPOConfig(kl_coef=0.0)


def test_a_checkpoint_of_the_old_config_layout_is_refused_by_version(tmp_path):
    from agents.train.checkpoint import CheckpointError

    first = Trainer(tiny_config(tmp_path, steps=1))
    first.run()
    first.close()
    (state_path,) = (tmp_path / "run" / "checkpoints").glob("step-*/state.json")
    state = json.loads(state_path.read_text())
    assert state["config"]["version"] == 2 and state["config"]["learner_name"] == "grpo"
    # What a checkpoint written before the learner registry holds (and before checkpoints had manifests).
    del state["config"]["version"], state["checkpoint_format"]
    state_path.write_text(json.dumps(state))
    (state_path.parent / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="config version 1, this is version 2"):
        Trainer(tiny_config(tmp_path, steps=2))


def test_a_learner_is_named_or_given_as_its_config():
    assert TrainConfig(learner="cw-grpo").learner == CWGRPOConfig()
    config = TrainConfig(learner=CWGRPOConfig(alpha=2.0))
    assert config.learner_name == "cw-grpo" and config.learner.alpha == 2.0
    with pytest.raises(ConfigError, match="unknown learner 'ppo'; registered: .*cw-grpo"):
        TrainConfig(learner="ppo")


def test_evaluation_reports_each_questions_greedy_em_and_avg_at_k(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, eval_questions=3))
    try:
        result = trainer.evaluation(samples=2)
        again = trainer.evaluation()
    finally:
        trainer.close()
    assert len(result.em) == 3 and set(result.em) <= {0.0, 1.0}
    assert result.metrics["eval/em"] == sum(result.em) / 3
    assert result.metrics["eval/questions"] == 3.0
    assert 0.0 <= result.metrics["eval/avg@2/em"] <= 1.0 and "eval/avg@2/f1" in result.metrics
    # Greedy evaluation is deterministic: without samples, the same per-question EMs and no Avg@k.
    assert again.em == result.em and "eval/avg@2/em" not in again.metrics
    with pytest.raises(ValueError, match="samples"):
        trainer.evaluation(samples=1)


def test_evaluation_counts_each_questions_contributing_searches_when_judged():
    from agents.train.evaluate import evaluation_of

    def label(contribution, failed=False):
        return {"retrieval_utility": contribution, "reasoning_correctness": 1, "contribution": contribution, "pending": False, "failed": failed}

    answer = {**label(None), "retrieval_utility": None}
    episodes = [{"em": 1.0, "searches": 2, "turn_labels": [label(1), label(0), answer]},
                {"em": 0.0, "searches": 3, "turn_labels": [label(1), label(1, failed=True), label(1), answer]},
                {"em": 0.0, "searches": 0, "turn_labels": [answer]}]
    result = evaluation_of(episodes, [])
    # A failed label counts as not contributing (CW-GRPO's p_t = 0); an answer turn is no search.
    assert result.contributing == [1.0, 2.0, 0.0] and result.metrics["eval/contributing_searches"] == 1.0
    # An episode that searched without labels (an env made with judge=None): nothing is counted for any question.
    unjudged = evaluation_of([*episodes, {"em": 0.0, "searches": 1, "turn_labels": [None, None]}], [])
    assert unjudged.contributing is None and "eval/contributing_searches" not in unjudged.metrics


def test_the_runs_rollout_settings_reach_the_engine(tmp_path):
    from dataclasses import replace

    from agents.train.config import EnvConfig, training_rollout

    rollout = training_rollout(group_size=2, max_turn_tokens=12, max_response_tokens=64, max_obs_tokens=20)
    config = TrainConfig(model="tiny", steps=1, questions_per_step=2, seed=7, out_dir=str(tmp_path / "run"), rollout=rollout,
                         env=EnvConfig(num_entities=300, num_questions=20, max_turns=2))
    trainer = Trainer(config)
    try:
        # The run seeds its rollouts; COSEARCH alone asks for gathered env calls.
        assert trainer.engine.config == replace(rollout, seed=7)
        # A random model writes no action: the env's explanation (longer than 20 tokens) is cut to 20.
        observations = [s for t in trainer.rollout_share([0, 1], step=0) for s in t.segments if s.kind == "observation"]
        assert observations and {s.end - s.start for s in observations} == {20}
    finally:
        trainer.close()


def test_bfloat16_reaches_every_trained_model_and_the_checkpoint(tmp_path):
    """One setting for the policy, its KL reference, the cold start and COSEARCH's ranker (its sampler, its
    reference, its update); the weights and optimizer states stay float32, and the checkpoint records it."""
    config = tiny_config(tmp_path, learner=CoSearchConfig(ranker_cold_start_steps=1), steps=1, dtype="bfloat16",
                         optim={"cold_start_steps": 1, "cold_start_batch": 2})
    trainer = Trainer(config)
    bf16 = torch.bfloat16
    ranker = trainer.second_model
    assert trainer.compute_dtype == trainer.policy.compute_dtype == ranker.policy.compute_dtype == bf16
    for reference, trained in ((trainer.reference, trainer.model), (ranker.reference, ranker.models["ranker"])):
        projections = [m for m in reference.modules() if isinstance(m, torch.nn.Linear) and m is not reference.get_output_embeddings()]
        assert projections and all(m.weight.dtype == bf16 for m in projections)
        assert reference.get_input_embeddings().weight.dtype == torch.float32
        assert reference.get_input_embeddings().weight.data_ptr() != trained.get_input_embeddings().weight.data_ptr()
    history = trainer.run()
    trainer.close()
    assert math.isfinite(history[0]["loss/policy"]) and history[0]["rollout/sampled_tokens"] > 0 and "ranker/calls" in history[0]
    for name, model in trainer.models.items():
        if name.endswith("reference"):  # frozen, checkpointed as it computes (linear weights in bfloat16)
            continue
        assert all(p.dtype == torch.float32 for p in model.parameters()), name
        optimizer = trainer.optimizers[name][0]
        assert all(t.dtype == torch.float32 for s in optimizer.state.values() for k, t in s.items() if k != "step"), name
    state = json.loads((list_checkpoints(tmp_path / "run" / "checkpoints")[-1] / "state.json").read_text())
    assert state["dtype"] == "bfloat16" and state["config"]["dtype"] == "bfloat16"
