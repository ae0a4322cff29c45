"""The settings where each mechanism has room: their presets, the validation split and held-out questions of
a run, the cold start that shows gold passages, the premises `agents.experiments.signatures` measures, and
the paired comparison of tool calls."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from types import SimpleNamespace

import gymnasium as gym
import pytest

from agents.experiments import learners, presets, runner, signatures
from agents.experiments import report as learner_report
from agents.experiments.tool_calls import NONCONTRIBUTING, noncontributing_check, search_verdict, searches_against, tool_call_check
from agents.train import setup
from agents.train.config import EnvConfig, TrainConfig
from agents.train.sft import cold_start_env, oracle_example
from searchgym.errors import ConfigError
from tests.helpers import shared_file


def _config(name: str, tmp_path, learner: str = "grpo", **preset_changes):
    preset = replace(presets.PRESETS[name], **preset_changes)
    return runner.train_config(preset, 1, 0, tmp_path, {}, 1, learner, "tiny", learner, cold_start_steps=1)


# -- presets -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, option", [("cpu-ranker", "decoy_rate"), ("cpu-rounds", "aside_rate")])
def test_the_synthetic_setting_presets_train_on_their_world_and_report_on_its_test_split(tmp_path, name, option):
    config = _config(name, tmp_path)
    assert config.env.options[option] > 0 and config.env.options["validation_fraction"] == 0.1
    assert config.env.eval_split == "test" and setup.eval_split(config) == "test"
    env = gym.make(config.env.id, **setup.env_kwargs(config, "validation", tmp_path)).unwrapped
    if option == "decoy_rate":
        assert env.world.config.decoy_rate == 0.5
    else:
        assert sum("aside" in r.metadata for r in env.records) > 0.9 * len(env.records)
    assert {env.world.split_of(r.metadata["path_ids"][0]) for r in env.records} == {"validation"}
    assert config.optim.cold_start_shows == ("gold" if name == "cpu-ranker" else "retriever")


def test_the_hotpotqa_preset_trains_on_the_files_first_questions_and_evaluates_on_the_rest(tmp_path):
    config = _config("cpu-hotpotqa", tmp_path)
    assert (config.env.id, config.env.train_questions, setup.eval_split(config)) == ("SearchQA-HotpotQA-v0", 100, "heldout")
    train, held = setup.env_kwargs(config, "train", tmp_path), setup.env_kwargs(config, "heldout", tmp_path)
    assert train["limit"] == 100 and "offset" not in train and held["offset"] == 100 and "limit" not in held
    assert train["data_path"] == held["data_path"] == "../shared/data/hotpotqa/hotpot_train_sample_hf.jsonl"


def test_a_validation_evaluation_needs_a_validation_split():
    with pytest.raises(ConfigError, match="validation_fraction"):
        replace(presets.PRESETS["cpu-learn"], eval_split="validation")
    assert replace(presets.PRESETS["cpu-ranker"], eval_split="validation").eval_split == "validation"


def test_env_config_keeps_splits_to_the_synthetic_world_and_held_out_questions_to_files():
    with pytest.raises(ConfigError, match="train_questions"):
        EnvConfig(eval_split="validation", id="SearchQA-HotpotQA-v0")
    with pytest.raises(ConfigError, match="question files"):
        EnvConfig(train_questions=50)
    with pytest.raises(ConfigError, match="eval_split"):
        EnvConfig(eval_split="dev")


def test_the_questions_a_preset_is_scored_on_in_words():
    assert presets.eval_questions_name(presets.PRESETS["cpu-learn"]) == "test questions"
    validation = replace(presets.PRESETS["cpu-rounds"], eval_split="validation")
    assert presets.eval_questions_name(validation).startswith("validation questions (validation split")
    assert presets.eval_questions_name(presets.PRESETS["cpu-hotpotqa"]) == "questions held out (after the first 100 of the file)"


def test_start_only_on_the_validation_split_makes_and_scores_the_start_policy_and_stops(tmp_path, monkeypatch):
    tiny = replace(presets.PRESETS["tiny"], world_seed=0, shared_start=True, eval_base=False, env_options={"validation_fraction": 0.2})
    monkeypatch.setitem(presets.PRESETS, "tiny-settings", tiny)
    assert learners.main(["--preset", "tiny-settings", "--start-only", "--eval-split", "validation", "--seeds", "0", "1",
                          "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["seeds"] == [0] and saved["preset"]["eval_split"] == "validation"  # the other seeds would share this start
    results = saved["results"]["0"]
    assert set(results) == {"fingerprint", "start", "minutes"} and len(results["start"]["eval_searches"]) == tiny.eval_questions
    # The synthetic world's default judge labels every search round: each question's contributing searches are kept.
    assert all(0 <= c <= n for c, n in zip(results["start"]["eval_contributing"], results["start"]["eval_searches"], strict=True))
    assert results["fingerprint"]["make"]["split"] == "validation" and results["fingerprint"]["make"]["validation_fraction"] == 0.2
    assert (tmp_path / "seed0" / "cold_start" / "model").is_dir()
    with pytest.raises(ConfigError, match="--start-only"):
        learners.main(["--preset", "tiny-settings", "--start-only", "--learners", "grpo", "--out", str(tmp_path / "x")])


# -- the cold start's oracle trajectories -----------------------------------------------------------------

def test_the_gold_cold_start_shows_each_hops_gold_passage_where_the_retriever_shows_a_decoy(tmp_path):
    base = TrainConfig(model="tiny", env=EnvConfig(num_entities=1000, hops=(2,), num_questions=30, top_k=1, max_turns=4,
                                                   options={"decoy_rate": 1.0}))
    trainer = SimpleNamespace(config=base, out=tmp_path, env=gym.make(base.env.id, **setup.env_kwargs(base, "train", tmp_path)))
    assert cold_start_env(trainer) is trainer.env
    gold = cold_start_env(SimpleNamespace(**{**vars(trainer), "config": replace(base, optim=replace(base.optim, cold_start_shows="gold"))}))

    def first_shown(env) -> list[bool]:
        out = []
        for i, record in enumerate(env.unwrapped.records):
            env.reset(options={"index": i})
            for turn in env.unwrapped.world.oracle_trajectory(record):
                *_, info = env.step(turn)
                if info["action"] == "search":
                    out.append(info["shown"][0]["id"] in record.gold_docs)
        return out

    assert all(first_shown(gold)) and not all(first_shown(trainer.env))


def test_a_cold_start_example_of_a_question_file_searches_its_gold_titles(tmp_path):
    from agents.models import TinyModelConfig, build_tiny_model

    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps([{"_id": "h0", "question": "Which river flows through Vell?", "answer": "Oro", "type": "bridge",
                                 "level": "easy", "supporting_facts": [["Vell", 0], ["Oro", 0]],
                                 "context": [["Vell", ["Vell lies on the Oro."]], ["Oro", ["The Oro is long."]]]}]))
    tokenizer = build_tiny_model(TinyModelConfig())[1]
    env = gym.make("SearchQA-HotpotQA-v0", data_path=str(path), top_k=1, max_turns=4, cache_dir=False)
    example = oracle_example(env, tokenizer, 0)
    trained = tokenizer.decode([t for t, m in zip(example.token_ids, example.loss_mask) if m])
    shown = tokenizer.decode([t for t, m in zip(example.token_ids, example.loss_mask) if not m])
    assert trained.count("<search>") == 2 and "<search>Vell</search>" in trained and trained.endswith("<answer>Oro</answer>")
    assert "Vell lies on the Oro." in shown and "The Oro is long." in shown


# -- premises (agents.experiments.signatures) ------------------------------------------------------------

def test_a_presets_analysis_setting_is_its_validation_split_or_its_training_questions():
    ranker = signatures.Setting.from_preset(presets.PRESETS["cpu-ranker"])
    assert (ranker.split, ranker.candidates, ranker.env_options["decoy_rate"], ranker.hops) == ("validation", 5, 0.5, (2,))
    assert signatures.Setting.from_preset(presets.PRESETS["cpu-learn"]).split == "test"
    hotpot = signatures.Setting.from_preset(presets.PRESETS["cpu-hotpotqa"], candidates=50)
    assert (hotpot.env_id, hotpot.limit, hotpot.candidates, hotpot.max_response_tokens) == ("SearchQA-HotpotQA-v0", 100, 50, 640)


def _spread(share: float, rounds: int) -> dict:
    return {"contribution_spread": {"contributing_share": share, "rounds": rounds}, "setting": "synthetic (validation)"}


def test_premise_lines_compare_each_number_with_its_bound():
    results = {"oracle_ranker": [{"setting": "a", "f1_relative_change": 0.25}, {"setting": "b", "f1_relative_change": 0.05},
                                 {"setting": "c", "f1_relative_change": math.nan}],
               "sampled": [_spread(0.66, 300), _spread(0.98, 330)]}
    lines = signatures.premises(results)
    assert lines[0].endswith("on a: +25.0% (premise: >= +10%): holds")
    assert lines[1].endswith("on b: +5.0% (premise: >= +10%): does not hold") and lines[2].endswith(": -")
    assert lines[3].endswith("0.660 of 300 (premise: <= 0.70): holds") and lines[4].endswith("0.980 of 330 (premise: <= 0.70): does not hold")


def test_signatures_measure_a_presets_premise_on_its_validation_questions(tmp_path, capsys):
    out = tmp_path / "sig"
    assert signatures.main(["--model", "tiny", "--preset", "cpu-rounds", "--analyses", "sampled", "--questions", "2", "--group", "2",
                            "--threads", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("Premises:") < printed.index("E-GRPO:") and "COSEARCH:" not in printed
    results = json.loads((out / "results.json").read_text())
    assert results["oracle_ranker"] == [] and [g["setting"] for g in results["sampled"]] == ["synthetic (validation)"]
    assert results["setting"]["env_options"] == {"aside_rate": 1.0, "validation_fraction": 0.1}
    with pytest.raises(ConfigError, match="no such preset"):
        signatures.main(["--model", "tiny", "--preset", "nope", "--out", str(out)])


@pytest.mark.shared_data
def test_signatures_on_the_hotpotqa_preset_read_its_training_questions(tmp_path):
    out = tmp_path / "sig"
    data = str(shared_file("hotpotqa/hotpot_train_sample_hf.jsonl"))
    assert signatures.main(["--model", "tiny", "--preset", "cpu-hotpotqa", "--data-path", data, "--analyses", "oracle",
                            "--questions", "2", "--threads", "1", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    (gain,) = results["oracle_ranker"]
    assert gain["setting"] == "HotpotQA" and gain["questions"] == 2 and gain["candidates"] == 5


# -- tool calls, paired ----------------------------------------------------------------------------------

def _policy(em: list[float], searches: list[float], contributing: list[float] | None = None) -> dict:
    return {"eval": {"eval/em": sum(em) / len(em)}, "eval_em": em, "eval_searches": searches,
            **({"eval_contributing": contributing} if contributing is not None else {})}


def test_searches_pair_per_question_and_seed_by_hand():
    per_seed = {0: {"grpo": _policy([1, 0, 1], [2, 2, 3]), "e-grpo": _policy([1, 1, 1], [1, 2, 2])},
                1: {"grpo": _policy([1, 0, 0], [2, 3, 3]), "e-grpo": _policy([1, 0, 0], [2, 2, 2])}}
    search, em = searches_against(per_seed, "e-grpo", "grpo")
    # Seed 0: -1, 0, -1 (mean -2/3); seed 1: 0, -1, -1 (mean -2/3). Per question over seeds: -0.5, -0.5, -1.
    assert search.per_seed == pytest.approx([-2 / 3, -2 / 3]) and search.mean == pytest.approx(-2 / 3)
    assert search.se_questions == pytest.approx(math.sqrt(1 / 12) / math.sqrt(3)) and search.se_seeds == 0.0
    assert (search.up, search.down) == ([0, 0], [2, 2])
    # EM: seed 0 +1/3, seed 1 0; per question over seeds 0, 0.5, 0 (mean 1/6, SE 1/6): within noise.
    assert em.per_seed == pytest.approx([1 / 3, 0.0]) and em.verdict == "no"
    # Searches: -0.667 against twice 0.167: fewer, beyond noise; EM not worse.
    assert search_verdict(search) == "fewer"
    row = next(r for r in tool_call_check(per_seed, ["grpo", "e-grpo"]).splitlines() if r.startswith("| e-grpo |"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["e-grpo", "-0.667, -0.667", "-0.667", "0.167", "0.000", "fewer", "2/0, 2/0",
                                                              "+0.167", "no", "yes"]


def test_the_report_adds_the_searches_against_grpo_when_runs_kept_them():
    per_seed = {0: {"start": _policy([0, 0], [1, 1]), "grpo": _policy([1, 0], [2, 2]), "e-grpo": _policy([1, 0], [2, 3])}}
    text = learner_report.paired_sections(per_seed, ["grpo", "e-grpo"])
    assert "Searches per episode against GRPO" in text and "| e-grpo | +0.500 |" in text
    del per_seed[0]["grpo"]["eval_searches"]  # a run made before per-question searches were kept
    assert tool_call_check(per_seed, ["grpo", "e-grpo"]) is None
    assert "Searches per episode" not in learner_report.paired_sections(per_seed, ["grpo", "e-grpo"])


def test_non_contributing_searches_pair_per_question_against_grpo_by_hand():
    # Non-contributing searches per question: GRPO 1, 1, 2 and 0, 1, 1; CW-GRPO 0, 1, 0 and 0, 0, 1.
    per_seed = {0: {"grpo": _policy([1, 0, 1], [2, 2, 3], [1, 1, 1]), "cw-grpo": _policy([1, 0, 1], [1, 2, 1], [1, 1, 1])},
                1: {"grpo": _policy([1, 0, 0], [2, 3, 3], [2, 2, 2]), "cw-grpo": _policy([1, 1, 0], [2, 2, 3], [2, 2, 2])}}
    fewer, em = searches_against(per_seed, "cw-grpo", "grpo", NONCONTRIBUTING)
    # Differences: seed 0 -1, 0, -2 (mean -1); seed 1 0, -1, 0 (mean -1/3); per question over seeds -0.5, -0.5, -1.
    assert fewer.per_seed == pytest.approx([-1.0, -1 / 3]) and fewer.mean == pytest.approx(-2 / 3)
    assert (fewer.up, fewer.down) == ([0, 0], [2, 1]) and em.per_seed == pytest.approx([0.0, 1 / 3])
    row = next(r for r in noncontributing_check(per_seed, ["grpo", "cw-grpo"]).splitlines() if r.startswith("| cw-grpo |"))
    assert row.split("|")[2].strip() == "-1.000, -0.333" and row.split("|")[7].strip() == "2/0, 1/0"
    text = learner_report.paired_sections({s: {"start": _policy([0, 0, 0], [1, 1, 1], [1, 1, 1]), **p} for s, p in per_seed.items()},
                                          ["grpo", "cw-grpo"])
    assert "Searches the judge labelled as not contributing" in text and "| cw-grpo | -1.000, -0.333 |" in text
    # Against the start's (none not contributing): GRPO +4/3 and +2/3, CW-GRPO +1/3 on both seeds.
    against_start = text.split("against the cold start (same questions, per seed; whether training")[1]
    assert "| grpo | +1.333, +0.667 |" in against_start and "| cw-grpo | +0.333, +0.333 |" in against_start
    del per_seed[1]["grpo"]["eval_contributing"]  # a run made before the counts were kept, or an env without a judge
    assert noncontributing_check(per_seed, ["grpo", "cw-grpo"]) is None
    assert "not contributing" not in learner_report.paired_sections(per_seed, ["grpo", "cw-grpo"])


def test_the_rankers_hit_at_1_against_the_retrievers_step_by_step():
    from agents.experiments.ranker_steps import ranker_hits_table

    steps = [{"ranker/hit@1": 0.6, "ranker/retriever_hit@1": 0.6}, {"rollout/reward": 0.5},
             {"ranker/hit@1": 0.9, "ranker/retriever_hit@1": 0.7}, {"ranker/hit@1": 1.0, "ranker/retriever_hit@1": 0.6}]
    table = ranker_hits_table({0: {"cosearch": {"history": steps}}, 1: {"cosearch": {"history": steps[:1]}}, 2: {"grpo": {}}}, last=2)
    rows = table.splitlines()
    # Seed 0's last two steps that report both: +0.2 and +0.4, mean +0.3; a step without ranker calls shows a dash.
    assert rows[2] == "| 0 | 0.60 / 0.60 | - | 0.90 / 0.70 | 1.00 / 0.60 | +0.300 |"
    assert rows[3] == "| 1 | 0.60 / 0.60 | - | - | - | +0.000 |" and len(rows) == 4
    assert ranker_hits_table({0: {"grpo": {"history": steps}}}) is None
    # With the evaluation's scores of the ranker (a run since they exist), a last column; a seed without: a dash.
    scored = {"history": steps, "eval": {"eval/ranker_hit@1": 0.5, "eval/retriever_hit@1": 0.75, "eval/ranker_answerable_calls": 120.0}}
    rows = ranker_hits_table({0: {"cosearch": scored}, 1: {"cosearch": {"history": steps[:1]}}}, last=2).splitlines()
    assert rows[0].endswith("| test questions (greedy): ranker / retriever (answerable calls, kept order) |") and rows[1].count("|---") == 7
    assert rows[2] == "| 0 | 0.60 / 0.60 | - | 0.90 / 0.70 | 1.00 / 0.60 | +0.300 | 0.50 / 0.75 (120) |"
    assert rows[3] == "| 1 | 0.60 / 0.60 | - | - | - | +0.000 | - |"
    scored["eval"]["eval/ranker_kept_order_rate"] = 0.25  # evaluations since record it
    assert ranker_hits_table({0: {"cosearch": scored}}, last=2).splitlines()[2].endswith("| 0.50 / 0.75 (120, 0.25) |")


def test_retrieval_room_by_hand():
    from agents.experiments.signature_analyses import retrieval_room

    # Three questions: both searches first; first then pooled only; one search, missed entirely.
    room = retrieval_room([[(True, True), (True, True)], [(True, True), (False, True)], [(False, False)]])
    assert room.questions == 3 and room.first == pytest.approx([1 / 3 * 2, 0.5]) and room.in_pool == pytest.approx([2 / 3, 1.0])
    assert room.all_first == pytest.approx(1 / 3)


def test_retrieval_room_needs_no_model_and_sees_the_decoys(tmp_path):
    args = ["--preset", "cpu-ranker", "--analyses", "retrieval", "--questions", "40", "--out"]
    assert signatures.main([*args, str(tmp_path / "a")]) == 0
    assert signatures.main([*args, str(tmp_path / "b"), "--env-option", "decoy_rate=0"]) == 0
    decoys, none = (json.loads((tmp_path / d / "results.json").read_text())["retrieval"][0] for d in "ab")
    assert none["first"] == [1.0, 1.0] and none["in_pool"] == [1.0, 1.0]  # the oracle's query finds its fact first
    assert max(decoys["first"]) < 0.9 and decoys["in_pool"] == [1.0, 1.0]
    with pytest.raises(ConfigError, match="give --model"):
        signatures.main(["--preset", "cpu-ranker", "--analyses", "oracle", "--out", str(tmp_path / "c")])


def test_env_options_parse_on_top_of_the_presets():
    assert presets.parse_env_options(["decoy_rate=0.3", "aside_rate=1"], {"decoy_rate": 0.5, "validation_fraction": 0.1}) == {
        "decoy_rate": 0.3, "aside_rate": 1, "validation_fraction": 0.1}
    with pytest.raises(ConfigError, match="--env-option takes KEY=VALUE"):
        presets.parse_env_options(["decoy_rate"])


def test_a_run_saved_before_a_field_existed_resumes_when_the_field_is_at_its_default(tmp_path):
    from agents.experiments.resume import check_same_setting, run_setting

    config = _config("cpu-learn", tmp_path)
    now = run_setting(config)
    saved = {k: v for k, v in now.items() if k not in ("env.eval_split", "env.train_questions", "optim.cold_start_shows")}
    (tmp_path / "setting.json").write_text(json.dumps(saved))
    check_same_setting(tmp_path / "setting.json", now, "grpo")  # the new fields at their defaults: the same setting
    ranker = run_setting(_config("cpu-ranker", tmp_path))
    with pytest.raises(ConfigError, match="optim.cold_start_shows"):
        check_same_setting(tmp_path / "setting.json", {**now, "optim.cold_start_shows": ranker["optim.cold_start_shows"]}, "grpo")


def test_a_run_saved_when_a_memory_setting_was_still_part_of_the_setting_resumes_under_another_value(tmp_path):
    """An earlier version recorded glibc's mmap threshold in setting.json; it is resume-free now (the same
    numbers), so such a run resumes whatever the threshold is now."""
    from agents.experiments.resume import check_same_setting, run_setting

    now = run_setting(_config("cpu-learn", tmp_path))
    assert "malloc_mmap_threshold" not in now
    (tmp_path / "setting.json").write_text(json.dumps({**now, "malloc_mmap_threshold": 1 << 20}))
    check_same_setting(tmp_path / "setting.json", now, "grpo")
    (tmp_path / "setting.json").write_text(json.dumps({**now, "optim.lr": 1.0}))
    with pytest.raises(ConfigError, match="optim.lr"):
        check_same_setting(tmp_path / "setting.json", now, "grpo")


def test_a_run_resumes_at_the_precision_it_computed_in_not_at_what_auto_means_on_another_machine(tmp_path):
    """`dtype="auto"` is float32 on a CPU without native bfloat16 and bfloat16 on one with it: a run begun on
    one and resumed on the other is refused (naming the --dtype that resumes it), and naming that precision
    resumes it; a setting.json from before precisions were recorded resumes as before."""
    from agents.experiments.resume import check_same_setting, run_setting

    config = _config("cpu-learn", tmp_path)
    assert config.dtype == "auto"
    now = run_setting(config)
    assert now["precision"] in ("float32", "bfloat16")
    other = "bfloat16" if now["precision"] == "float32" else "float32"
    (tmp_path / "setting.json").write_text(json.dumps({**now, "precision": other}))  # the same command on the other kind of CPU
    with pytest.raises(ConfigError, match=rf"precision differ\) \(it computed in {other}, this run would compute in {now['precision']}: "
                                          rf"--dtype {other} resumes it"):
        check_same_setting(tmp_path / "setting.json", now, "grpo")
    check_same_setting(tmp_path / "setting.json", run_setting(replace(config, dtype=other)), "grpo")
    (tmp_path / "setting.json").write_text(json.dumps({k: v for k, v in now.items() if k != "precision"}))
    check_same_setting(tmp_path / "setting.json", now, "grpo")  # recorded before precisions were: dtype decides, as it did
    with pytest.raises(ConfigError, match=r"\(dtype differ\)"):
        check_same_setting(tmp_path / "setting.json", run_setting(replace(config, dtype=other)), "grpo")


def test_the_retrieval_analysis_with_a_model_counts_the_oracle_trajectories_tokens(tmp_path):
    from agents.models import TinyModelConfig, build_tiny_model
    from agents.train.sft import oracle_example

    out = tmp_path / "sig"
    assert signatures.main(["--preset", "cpu-rounds", "--analyses", "retrieval", "--model", "tiny", "--questions", "3",
                            "--out", str(out)]) == 0
    tokens = json.loads((out / "results.json").read_text())["retrieval"][0]["oracle_tokens"]
    # The same count by hand: the cold start's example of each question, after its prompt.
    setting = signatures.Setting.from_preset(presets.PRESETS["cpu-rounds"])
    (_, first), = signatures.analysis_envs(setting, 3)
    env = signatures._env_maker(first, setting, None)()
    tokenizer = build_tiny_model(TinyModelConfig())[1]
    lengths = [len(e.token_ids) - e.loss_mask.index(1) for e in (oracle_example(env, tokenizer, i) for i in range(3))]
    assert tokens["max"] == max(lengths) and tokens["mean"] == pytest.approx(sum(lengths) / 3)
    assert tokens["over_budget"] == pytest.approx(sum(n > 640 for n in lengths) / 3)
