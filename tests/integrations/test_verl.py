"""verl: the data-prep command's parquet read back with verl's `RLHFDataset`; `SearchGymAgentLoop` driven by
verl's own `AgentLoopWorker` with verl's types (`DataProto`, `TokenOutput`, `AgentLoopOutput`) on CPU, with a
scripted server manager and with the tiny model; the GRPO config composed over verl's defaults.

The full GPU run is in docs/frameworks.md and is not run here."""

from __future__ import annotations

import asyncio
import collections
import json

import gymnasium as gym
import pyarrow.parquet as pq
import pytest

import searchgym  # noqa: F401 - registers the ids
from searchgym.errors import ConfigError
from searchgym.integrations.verl import AGENT_LOOP_CONFIG, CONFIG_DIR
from searchgym.integrations.verl.prepare import main as prepare_main
from searchgym.integrations.verl.prepare import parse_env_args, rows
from tests.integrations.scripted import scripted_action

ID = "SearchQA-Synthetic-v0"
KW = {"num_entities": 300, "cache_dir": False, "num_questions": 12}


def needs_verl():
    """verl's agent loop, or a skip that says why (a missing or broken verl install both skip)."""
    try:
        import verl.experimental.agent_loop  # noqa: F401
    except Exception as e:  # noqa: BLE001 - verl fails to import with ImportError or, e.g., an old hydra's errors
        pytest.skip(f"verl does not import here ({type(e).__name__}: {e}); pip install 'searchgym[verl]' "
                    "(verl 0.9 with hydra-core>=1.3)")


# -- data prep (pyarrow only) -------------------------------------------------------------------------------

def test_prepare_writes_one_row_per_question_with_the_envs_own_prompt(tmp_path):
    args = ["--id", ID, "--out", str(tmp_path), "--split", "train", "test"]
    args += [f"--env-arg={k}={json.dumps(v)}" for k, v in KW.items()]
    assert prepare_main(args) == 0
    for split in ("train", "test"):
        table = pq.read_table(tmp_path / f"{split}.parquet").to_pylist()
        env = gym.make(ID, split=split, **KW).unwrapped
        assert len(table) == len(env.records) == 12
        for i, (row, record) in enumerate(zip(table, env.records)):
            prompt, _ = env.reset(options={"question_id": record.id})
            assert row["prompt"] == [{"role": "user", "content": prompt}] and row["agent_name"] == "searchgym_agent"
            assert row["data_source"] == f"searchgym/{ID}" and row["reward_model"]["ground_truth"] == list(record.answers)
            extra = row["extra_info"]
            assert (extra["index"], extra["question_id"], extra["searchgym_id"], extra["split"]) == (i, record.id, ID, split)
            assert json.loads(extra["env_kwargs"]) == {**KW, "split": split}
            assert record.answers[0] not in prompt  # the gold answer is in reward_model only


def test_prepare_arguments():
    assert parse_env_args(["num_entities=300", "hops=[1, 2]", "cache_dir=false", "data_path=/d/x.jsonl"]) == {
        "num_entities": 300, "hops": [1, 2], "cache_dir": False, "data_path": "/d/x.jsonl"}
    with pytest.raises(ConfigError):
        parse_env_args(["num_entities"])
    with pytest.raises(ConfigError):
        rows("SearchQA-Nothing-v0", {})
    with pytest.raises(SystemExit):
        prepare_main(["--id", ID, "--out", "/tmp/x", "--split", "train", "--env-arg", "split=test"])


# -- verl's own classes ---------------------------------------------------------------------------------------

def compose_config(root, *overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="searchgym_grpo", overrides=[
            f"data.train_files={root / 'train.parquet'}", f"data.val_files={root / 'train.parquet'}",
            f"actor_rollout_ref.model.path={root / 'model'}", f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}",
            *overrides])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The tiny model saved where verl's HFModelConfig loads it, the prepared parquet, and the composed config
    (a response budget that fits every scripted episode: the tiny byte-level tokenizer spends a token a byte)."""
    needs_verl()

    from agents.models import TinyModelConfig, build_tiny_model

    root = tmp_path_factory.mktemp("verl")
    model, tokenizer = build_tiny_model(TinyModelConfig())
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    prepare_main(["--id", ID, "--out", str(root), "--split", "train"] + [f"--env-arg={k}={json.dumps(v)}" for k, v in KW.items()])
    cfg = compose_config(root, "data.max_response_length=8192", "data.max_prompt_length=1024")
    return {"root": root, "cfg": cfg, "model": model, "tokenizer": tokenizer}


def test_the_grpo_config_composes_over_verls_defaults(setup):
    from verl.utils.config import omega_conf_to_dataclass

    cfg = setup["cfg"]
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.actor_rollout_ref.rollout.multi_turn.enable
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "searchgym_agent"
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)  # verl's own validation of the section
    assert rollout.response_length == 8192 and rollout.n == 5


def test_prepared_data_reads_back_with_verls_dataset(setup):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    dataset = RLHFDataset([str(setup["root"] / "train.parquet")], setup["tokenizer"], setup["cfg"].data)
    env = gym.make(ID, split="train", **KW).unwrapped
    assert len(dataset) == len(env.records)
    item = dataset[3]
    prompt, _ = env.reset(options={"question_id": env.records[3].id})
    assert item["raw_prompt"] == [{"role": "user", "content": prompt}] and item["index"] == 3
    assert item["agent_name"] == "searchgym_agent" and item["extra_info"]["question_id"] == env.records[3].id


class ScriptedServer:
    """verl's server-manager interface (`generate(request_id, prompt_ids=..., sampling_params=...) -> TokenOutput`)
    playing the scripted agent: the question is found in the prompt, the turn is the request's call count."""

    def __init__(self, tokenizer, records, positions):
        self.tokenizer, self.records, self.positions = tokenizer, records, positions
        self.calls = collections.Counter()
        self.params = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.params.append(sampling_params)
        text = self.tokenizer.decode(prompt_ids)
        record = next(r for r in self.records if r.question in text)
        turn = self.calls[request_id]
        self.calls[request_id] += 1
        ids = self.tokenizer.encode(scripted_action(record, turn, self.positions[record.id]), add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def _batch(setup, n):
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    dataset = RLHFDataset([str(setup["root"] / "train.parquet")], setup["tokenizer"], setup["cfg"].data)
    return DataProto.from_single_dict(collate_fn([dataset[i] for i in range(n)]))


def test_verls_worker_plays_episodes_equal_to_the_plain_env(setup):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    tokenizer, n = setup["tokenizer"], 8
    records = gym.make(ID, split="train", **KW).unwrapped.records
    server = ScriptedServer(tokenizer, records, {r.id: i for i, r in enumerate(records)})
    out = asyncio.run(AgentLoopWorker(setup["cfg"], server).generate_sequences(_batch(setup, n)))
    assert all(p["stop"] == ["</search>", "</answer>"] and p["include_stop_str_in_output"] for p in server.params)
    batch, extra = out.batch, out.non_tensor_batch
    assert set(out.meta_info["reward_extra_keys"]) >= {"searchgym/em", "searchgym/entity_rate", "searchgym/labelled_rounds"}
    plain = gym.make(ID, split="train", **KW)
    for i in range(n):
        plain.reset(options={"question_id": records[i].id})
        infos, rewards, texts = [], [], []
        for turn in range(10):
            action = scripted_action(records[i], turn, i)
            obs, reward, terminated, truncated, info = plain.step(action)
            infos.append(info)
            rewards.append(reward)
            texts += [action] + ([obs] if not (terminated or truncated) else [])
            if terminated or truncated:
                break
        assert extra["searchgym_step_infos"][i] == infos  # labels, entities, candidates, reward parts, summary
        assert list(extra["turn_scores"][i]) == rewards
        assert float(batch["rm_scores"][i].sum()) == sum(rewards)
        summary = infos[-1]["episode"]
        assert extra["searchgym/em"][i] == summary["em"] and extra["searchgym/searches"][i] == summary["searches"]
        assert extra["searchgym/finished"][i] == 1.0
        # token level: generated tokens have mask 1, observations 0, and the response decodes to the transcript
        mask = batch["response_mask"][i].tolist()
        length = int(batch["attention_mask"][i, batch["prompts"].shape[1]:].sum())
        response = batch["responses"][i, :length].tolist()
        assert tokenizer.decode(response) == "".join(texts)
        spans = extra["searchgym_turn_spans"][i]
        assert len(spans) == len(infos) and sum(e - s for s, e in spans) == sum(mask)
        assert all(mask[s:e] == [1] * (e - s) for s, e in spans)
    # the batch saw every kind of step, with labels and entities
    kinds = {(info["action"], info["labels"] is not None, info["entities"] is not None)
             for infos in extra["searchgym_step_infos"] for info in infos}
    assert {("search", True, True), ("answer", True, True), ("invalid", True, True)} <= kinds


def test_episode_numbers_by_hand(setup):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    records = gym.make(ID, split="train", **KW).unwrapped.records
    server = ScriptedServer(setup["tokenizer"], records, {r.id: i for i, r in enumerate(records)})
    out = asyncio.run(AgentLoopWorker(setup["cfg"], server).generate_sequences(_batch(setup, 2)))
    x = out.non_tensor_batch
    # row 0: search, then the gold answer: EM 1, one search, no invalid action, one labelled round
    assert [x["searchgym/em"][0], x["searchgym/answered"][0], x["searchgym/searches"][0]] == [1.0, 1.0, 1.0]
    assert [x["searchgym/invalid_actions"][0], x["searchgym/labelled_rounds"][0], x["searchgym/format_valid"][0]] == [0.0, 1.0, 1.0]
    # row 1: search, then invalid actions until the 4 turns run out
    assert [x["searchgym/answered"][1], x["searchgym/searches"][1], x["searchgym/invalid_actions"][1]] == [0.0, 1.0, 3.0]
    assert x["searchgym/gold_entities"][1] == len(records[1].gold_entities)
    assert x["__num_turns__"].tolist() == [1 + 2 + 1, 1 + 4 + 3]  # prompt, agent turns, observations


class TinyModelServer:
    """verl's server-manager interface over the tiny random model, sampling greedily on CPU."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        import torch
        from verl.workers.rollout.replica import TokenOutput

        limit = min(int(sampling_params["max_tokens"]), 12)
        with torch.no_grad():
            out = self.model.generate(torch.tensor([prompt_ids]), max_new_tokens=limit, do_sample=False, output_scores=True,
                                      return_dict_in_generate=True, pad_token_id=self.tokenizer.pad_token_id)
        new = out.sequences[0, len(prompt_ids):].tolist()
        logprobs = [float(torch.log_softmax(s[0], -1)[t]) for s, t in zip(out.scores, new)]
        return TokenOutput(token_ids=new, log_probs=logprobs)


def test_the_tiny_model_plays_an_episode_through_verls_worker(setup):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    out = asyncio.run(AgentLoopWorker(setup["cfg"], TinyModelServer(setup["model"], setup["tokenizer"])).generate_sequences(_batch(setup, 1)))
    infos = out.non_tensor_batch["searchgym_step_infos"][0]
    # a random model writes no action: invalid turns until the env's 4 turns run out
    assert len(infos) == 4 and infos[-1]["episode"]["outcome"] == "out_of_turns"
    assert all(i["invalid_action"] for i in infos) and float(out.batch["rm_scores"][0].sum()) == 0.0
    assert out.batch["rollout_log_probs"].shape == out.batch["responses"].shape


def test_rows_without_searchgym_extra_info_are_refused(setup):
    from searchgym.integrations.verl.agent_loop import episode_of

    with pytest.raises(ConfigError, match="prepare"):
        episode_of({"index": 0})
    assert episode_of({"searchgym_id": ID, "env_kwargs": "{}", "question_id": "q"}) == (ID, {}, "q")


def test_an_episode_that_runs_out_of_response_tokens_ends_unfinished(setup):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    cfg = compose_config(setup["root"], "data.max_response_length=120", "data.max_prompt_length=1024")
    records = gym.make(ID, split="train", **KW).unwrapped.records
    server = ScriptedServer(setup["tokenizer"], records, {r.id: i for i, r in enumerate(records)})
    out = asyncio.run(AgentLoopWorker(cfg, server).generate_sequences(_batch(setup, 1)))
    x = out.non_tensor_batch
    # the first search fits in 120 tokens, its documents do not: cut there, with no second turn
    assert len(x["searchgym_step_infos"][0]) == 1 and x["searchgym_step_infos"][0][0]["action"] == "search"
    assert x["searchgym/finished"][0] == 0.0 and list(x["turn_scores"][0]) == [0.0]
    assert int(out.batch["attention_mask"][0, out.batch["prompts"].shape[1]:].sum()) == 120
