"""`python -m agents.experiments.compare`: a new agent (a Python callable, an OpenAI-compatible endpoint, a model)
scored on the fingerprinted env of a learners benchmark's results.json, and the refusals."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

import searchgym  # noqa: F401 (registers the env ids)
from agents.rollout import RolloutConfig
from agents.experiments import compare
from agents.experiments.agent_spec import chat_base_url
from agents.experiments.examples.scripted_agent import NameInFirstDocument, _question, name_in_first_document
from agents.experiments.fingerprint import make_fingerprint
from searchgym.errors import ConfigError

SCRIPTED = "agents.experiments.examples.scripted_agent:NameInFirstDocument"
REFERENCE_EM = {"0": {"base": 0.0, "start": 0.25, "grpo": 0.25}, "1": {"base": 0.0, "start": 0.25, "grpo": 0.75}}


def _make(seed: int, top_k: int = 1) -> dict:
    return {"num_entities": 300, "hops": [1], "split": "test", "seed": seed, "num_questions": 4, "max_turns": 3, "top_k": top_k}


def write_reference(path, seeds=(0, 1), with_fingerprint=True) -> None:
    """A results.json as the learners benchmark writes it: literal reference numbers, real fingerprints."""
    results = {}
    for seed in seeds:
        env = gym.make("SearchQA-Synthetic-v0", cache_dir=False, **_make(seed))
        rollout = RolloutConfig(max_turn_tokens=16, max_response_tokens=64)
        results[str(seed)] = {name: {"eval": {"eval/em": em, "eval/f1": em, "eval/searches": 1.0, "eval/questions": 4.0}}
                              for name, em in REFERENCE_EM[str(seed)].items()}
        if with_fingerprint:
            results[str(seed)]["fingerprint"] = make_fingerprint(env, env_id="SearchQA-Synthetic-v0", make=_make(seed), eval_questions=4,
                                                                 rollout=rollout)
    path.write_text(json.dumps({"preset": {}, "steps": 1, "seeds": list(seeds), "results": results}))


def direct_em(seed: int) -> float:
    """The scripted agent's EM on a seed's env built by hand, episode by episode."""
    env = gym.make("SearchQA-Synthetic-v0", cache_dir=False, **_make(seed))
    total = 0.0
    for index in range(4):
        agent = NameInFirstDocument()
        obs, info = env.reset(options={"index": index})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            done = terminated or truncated
        total += info["episode"]["em"]
    return total / 4


@pytest.fixture
def reference(tmp_path):
    path = tmp_path / "results.json"
    write_reference(path)
    return path


def _row(table: str, name: str) -> list[str]:
    line = next(row for row in table.splitlines() if row.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_scripted_agent_is_scored_beside_the_reference_learners(reference, tmp_path, capsys):
    assert compare.main(["--reference", str(reference), "--agent", SCRIPTED, "--cache-dir", str(tmp_path / "cache"),
                         "--out", str(tmp_path / "agent.json")]) == 0
    table = capsys.readouterr().out
    # grpo: EM 0.25 and 0.75 over the two seeds -> mean 0.5, sample std 0.354.
    assert _row(table, "grpo") == ["grpo", "0.500 ± 0.354", "0.500 ± 0.354", "1.000 ± 0.000", "4"]
    assert _row(table, "base")[1] == "0.000 ± 0.000" and _row(table, "start")[1] == "0.250 ± 0.000"
    saved = json.loads((tmp_path / "agent.json").read_text())
    ems = [saved["per_seed"][s]["eval/em"] for s in ("0", "1")]
    # The agent played each seed's own env: its EM there equals a hand-run of the same agent on that env.
    assert ems == [direct_em(0), direct_em(1)]
    assert sum(ems) > 0  # the scripted agent answers some 1-hop questions: the check above compares something
    agent = _row(table, f"agent: {SCRIPTED}")
    assert agent[1].startswith(f"{(ems[0] + ems[1]) / 2:.3f} ± ") and agent[3] == "1.000 ± 0.000" and agent[4] == "4"
    assert "SearchQA-Synthetic-v0 test split, first 4 questions per seed" in table


def test_one_seed_and_fewer_questions(reference, tmp_path):
    result = compare.compare(reference, "agents.experiments.examples.scripted_agent:first_title", seeds=["1"], questions=2, cache_dir=False)
    assert list(result["per_seed"]) == ["1"] and result["per_seed"]["1"]["eval/questions"] == 2.0
    table = compare.table(compare.load_reference(reference), result)
    assert _row(table, "grpo")[1] == "0.750"  # one seed: the value, no spread
    assert "only the first 2 of the reference's 4 questions" in table
    with pytest.raises(ConfigError, match=r"--questions 5.*first 4 questions.*eval_questions"):
        compare.compare(reference, SCRIPTED, questions=5, cache_dir=False)
    with pytest.raises(ConfigError, match="no seed 7; it has seeds 0, 1"):
        compare.compare(reference, SCRIPTED, seeds=["7"], cache_dir=False)


def test_samples_add_an_avg_at_k_column(reference, tmp_path):
    result = compare.compare(reference, SCRIPTED, samples=3, cache_dir=False)
    assert result["samples"] == 3 and result["temperature"] == 1.0
    for seed in ("0", "1"):
        m, q = result["per_seed"][seed], result["per_question"][seed]
        assert len(q["em"]) == len(q["avg_em"]) == 4
        # The scripted agent is deterministic: each of its 3 samples of a question is its greedy episode.
        assert q["avg_em"] == q["em"] and m["eval/avg@3/em"] == m["eval/em"] == direct_em(int(seed))
        assert m["eval/avg@3/em"] == sum(q["avg_em"]) / 4
    table = compare.table(compare.load_reference(reference), result)
    assert "| policy | test EM | Avg@3 EM | test F1 |" in table and "Avg@3 of 3 samples at temperature 1" in table
    assert _row(table, "grpo")[2] == "-"  # the reference evaluated greedily only
    assert _row(table, f"agent: {SCRIPTED}")[2] == _row(table, f"agent: {SCRIPTED}")[1]
    for bad, message in (({"samples": 1}, "--samples 1: give 0"), ({"samples": -2}, "--samples -2"),
                         ({"samples": 4, "temperature": 0.0}, "temperature 0 would all be the greedy")):
        with pytest.raises(ConfigError, match=message):
            compare.compare(reference, SCRIPTED, cache_dir=False, **bad)


def test_two_agents_are_paired_question_by_question(reference, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert compare.main(["--reference", str(reference), "--agent", SCRIPTED, "--samples", "2", "--cache-dir", str(tmp_path / "c"),
                         "--out", str(a)]) == 0
    assert compare.main(["--reference", str(reference), "--agent", "agents.experiments.examples.scripted_agent:first_title", "--samples", "2",
                         "--cache-dir", str(tmp_path / "c"), "--out", str(b)]) == 0
    capsys.readouterr()
    assert compare.main(["--paired", str(a), str(b)]) == 0
    table = capsys.readouterr().out
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    per_seed = [sum(x - y for x, y in zip(ra["per_question"][s]["em"], rb["per_question"][s]["em"])) / 4 for s in ("0", "1")]
    by_question = [(ra["per_question"]["0"]["em"][i] - rb["per_question"]["0"]["em"][i]
                    + ra["per_question"]["1"]["em"][i] - rb["per_question"]["1"]["em"][i]) / 2 for i in range(4)]
    mean = sum(by_question) / 4
    se_q = (sum((x - mean) ** 2 for x in by_question) / 3) ** 0.5 / 2
    row = _row(table, "test EM")
    assert row[1] == ", ".join(f"{x:+.3f}" for x in per_seed) and row[2] == f"{mean:+.3f}" and row[3] == f"{se_q:.3f}"
    assert _row(table, "Avg@2 EM")[1:3] == row[1:3]  # deterministic agents: their samples are their greedy episodes
    assert max(per_seed) > 0  # the two agents differ on some question: the rows above compare something

    one_seed = compare.compare(reference, SCRIPTED, cache_dir=False, seeds=["1"], questions=2)
    with pytest.raises(ConfigError, match="answered 2 questions per seed, B 4"):
        compare.paired(one_seed, rb)
    other = {**rb, "per_question": {"7": rb["per_question"]["0"]}}
    with pytest.raises(ConfigError, match="none in common"):
        compare.paired(ra, other)
    moved = json.loads(json.dumps(rb))
    moved["fingerprints"]["0"]["make"]["top_k"] = 3
    with pytest.raises(ConfigError, match=r"(?s)seed 0: A and B were evaluated on different envs.*make.top_k: A 1, B 3"):
        compare.paired(ra, moved)
    greedy = compare.compare(reference, SCRIPTED, cache_dir=False)
    assert "No Avg@k row: A sampled 0" in compare.paired(greedy, rb) and "| Avg@2 EM |" not in compare.paired(greedy, rb)
    with pytest.raises(ConfigError, match="no such file"):
        compare.main(["--paired", str(a), str(tmp_path / "missing.json")])


def test_a_policy_of_a_learners_results_json_pairs_as_an_operand(reference, tmp_path, capsys):
    run = json.loads(reference.read_text())
    per_question = {"0": {"start": [0, 1, 0, 0], "grpo": [1, 1, 0, 0]}, "1": {"start": [0, 1, 0, 0], "grpo": [1, 1, 1, 0]}}
    for seed, policies in per_question.items():
        for name, em in policies.items():
            run["results"][seed][name]["eval_em"] = em
    reference.write_text(json.dumps(run))
    assert compare.main(["--paired", f"{reference}:grpo", f"{reference}:start"]) == 0
    # Seed 0: +1 on question 0; seed 1: +1 on questions 0 and 2.
    assert _row(capsys.readouterr().out, "test EM")[1:3] == ["+0.250, +0.500", "+0.375"]
    # Against an agent's --out file on the same envs: the agent's greedy EM question by question, minus the start's.
    mine = tmp_path / "mine.json"
    assert compare.main(["--reference", str(reference), "--agent", SCRIPTED, "--cache-dir", str(tmp_path / "c"), "--out", str(mine)]) == 0
    capsys.readouterr()
    assert compare.main(["--paired", str(mine), f"{reference}:start"]) == 0
    agent = json.loads(mine.read_text())["per_question"]
    expected = [sum(agent[s]["em"]) / 4 - sum(per_question[s]["start"]) / 4 for s in ("0", "1")]
    assert _row(capsys.readouterr().out, "test EM")[1] == ", ".join(f"{x:+.3f}" for x in expected)
    with pytest.raises(ConfigError, match="no seed there evaluated 'e-grpo'.*policies with per-question results: grpo, start"):
        compare.main(["--paired", f"{reference}:e-grpo", f"{reference}:start"])
    with pytest.raises(ConfigError, match="not an agents.experiments.learners results.json"):
        compare.main(["--paired", f"{mine}:start", f"{reference}:start"])


def test_a_requested_setting_that_differs_is_refused_naming_the_keys(reference):
    with pytest.raises(ConfigError) as e:
        compare.compare(reference, SCRIPTED, requests={"top_k": 3}, cache_dir=False)
    message = str(e.value)
    assert "make.top_k: reference 1, requested 3" in message and "setting.env.top_k: reference 1, requested 3" in message
    assert "seed 0" in message
    # A full key, and a request that holds, pass this check (the second fails on hops instead).
    with pytest.raises(ConfigError, match=r"make\.hops: reference \[1\], requested \[2\]"):
        compare.compare(reference, SCRIPTED, requests={"make.top_k": 1, "make.hops": [2]}, cache_dir=False)
    with pytest.raises(ConfigError, match=r"no fingerprint key 'topk'.*make\.top_k"):
        compare.compare(reference, SCRIPTED, requests={"topk": 1}, cache_dir=False)


def test_fingerprint_flag_values_are_json():
    assert compare.parse_requests(["top_k=3", "make.hops=[1, 2]", "split=test"]) == {"top_k": 3, "make.hops": [1, 2], "split": "test"}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        compare.parse_requests(["top_k"])


def test_a_rebuilt_env_that_differs_from_the_reference_is_refused(reference):
    saved = json.loads(reference.read_text())
    saved["results"]["1"]["fingerprint"]["setting"]["dataset"]["synthetic"] = "0123456789abcdef"
    reference.write_text(json.dumps(saved))
    with pytest.raises(ConfigError, match=r"(?s)seed 1\).*setting\.dataset\.synthetic: reference '0123456789abcdef', rebuilt '[0-9a-f]{16}'"):
        compare.compare(reference, SCRIPTED, cache_dir=False)


def test_a_reference_without_fingerprints_is_refused(tmp_path):
    path = tmp_path / "old.json"
    write_reference(path, seeds=(0,), with_fingerprint=False)
    with pytest.raises(ConfigError, match=r"seed\(s\) 0 carry no env fingerprint.*re-run the learners benchmark"):
        compare.compare(path, SCRIPTED)
    with pytest.raises(ConfigError, match="no such reference file"):
        compare.compare(tmp_path / "missing.json", SCRIPTED)


def three_args(observation, info, extra):
    return "<answer>x</answer>"


def returns_none(observation):
    return None


@pytest.mark.parametrize("spec,message", [
    ("no_such_module_for_compare:agent", r"cannot import module 'no_such_module_for_compare'"),
    ("agents.experiments.examples.scripted_agent:nope", r"has no attribute 'nope' \(it defines .*first_title"),
    ("agents.experiments.examples.scripted_agent:re", r"names a module, which is neither callable nor has an act method"),
    ("tests.agents.experiments.test_compare:three_args", r"takes 3 positional arguments; an agent is called as agent\(observation\)"),
    ("tests.agents.experiments.test_compare:returns_none", r"returned a NoneType on question 0 .*returns the action text, a str"),
])
def test_a_bad_agent_gives_a_clear_error(reference, spec, message):
    with pytest.raises(ConfigError, match=message):
        compare.compare(reference, spec, cache_dir=False)


def test_a_python_agent_object_is_called_as_its_module_callable_spec_would_be(reference):
    by_object = compare.compare(reference, NameInFirstDocument, cache_dir=False)
    by_spec = compare.compare(reference, SCRIPTED, cache_dir=False)
    assert by_object["per_seed"] == by_spec["per_seed"] and by_object["agent"] == SCRIPTED

    def always_paris(observation):
        return "<answer>Paris</answer>"

    result = compare.compare(reference, always_paris, cache_dir=False)
    assert result["agent"].endswith("always_paris") and result["per_seed"]["0"]["eval/searches"] == 0.0


def test_checkpoint_applies_to_models_only(reference):
    with pytest.raises(ConfigError, match="--checkpoint loads weights on top of a model"):
        compare.compare(reference, SCRIPTED, checkpoint="runs/x/step-000001", cache_dir=False)


@pytest.mark.parametrize("url,base", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
    ("http://h:1/v1/", "http://h:1/v1"),
    ("https://api.example.com/v1/chat/completions", "https://api.example.com/v1"),
    ("http://h:1/openai/v1", "http://h:1/openai/v1"),
])
def test_chat_base_url(url, base):
    assert chat_base_url(url) == base


def test_an_openai_compatible_endpoint_is_scored_like_the_same_policy_in_python(reference):
    from tests.agents.fake_sglang import FakeSGLang

    def script(messages):
        """The scripted agent's decision, served as chat replies (the stop string cut off, as SGLang does)."""
        question = _question(messages[0]["content"])
        if len(messages) == 1:
            return f"<search>{question}", "stop", "</search>"
        action = name_in_first_document(question, messages[-1]["content"])
        return action.removesuffix("</answer>"), "stop", "</answer>"

    with FakeSGLang() as server:
        server.chat_script = script
        served = compare.compare(reference, server.url, cache_dir=False)
        requests = [body for _, path, body in server.calls if path == "/v1/chat/completions"]
    in_python = compare.compare(reference, SCRIPTED, cache_dir=False)
    assert served["per_seed"] == in_python["per_seed"]
    assert served["describe"] == {"policy": "openai", "base_url": server.url + "/v1", "model": "default"}
    # 2 seeds x 4 questions x (search, answer); greedy, with the reference's turn budget.
    assert len(requests) == 16
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 16 and b["stop"] == ["</search>", "</answer>"] for b in requests)

    # Avg@2: two more episodes per question, at the requested temperature.
    with FakeSGLang() as server:
        server.chat_script = script
        sampled = compare.compare(reference, server.url, cache_dir=False, samples=2, temperature=0.7, seeds=["0"])
        requests = [body for _, path, body in server.calls if path == "/v1/chat/completions"]
    assert sampled["per_seed"]["0"]["eval/avg@2/em"] == in_python["per_seed"]["0"]["eval/em"]  # the script does not sample
    assert sampled["per_question"]["0"]["avg_em"] == sampled["per_question"]["0"]["em"]
    assert sorted(b["temperature"] for b in requests) == [0.0] * 8 + [0.7] * 16


@pytest.mark.slow
def test_the_learners_benchmark_writes_what_compare_rebuilds(tmp_path, capsys, monkeypatch):
    """End to end on the tiny preset: the cold-started model, given as a model folder, scores exactly what
    the reference recorded for it (sampling the same tokens for Avg@2), and the scripted agent's row lands
    in the same table."""
    import agents.train.evaluate as evaluate
    from agents.experiments import learners, presets

    sampled: list[list[list[int]]] = []  # the token ids of every sampled (Avg@k) evaluation, in call order

    class Recording(evaluate.RolloutEngine):
        def rollout(self, resets):
            out = super().rollout(resets)
            if self.config.temperature > 0:
                sampled.append([t.token_ids for t in out])
            return out

    monkeypatch.setattr(evaluate, "RolloutEngine", Recording)
    out = tmp_path / "ref"
    assert learners.main(["--preset", "tiny", "--learners", "grpo", "--no-eval-base", "--eval-samples", "2", "--out", str(out)]) == 0
    saved = json.loads((out / "results.json").read_text())
    fingerprint = saved["results"]["0"]["fingerprint"]
    assert fingerprint["make"]["split"] == "test" and fingerprint["make"]["seed"] == 0 and fingerprint["eval_questions"] == 4
    assert fingerprint["rollout"]["max_turn_tokens"] == presets.PRESETS["tiny"].max_turn_tokens
    assert fingerprint["make"]["template"] == presets.SHORT_TEMPLATE
    capsys.readouterr()

    model = compare.compare(out / "results.json", str(out / "seed0" / "cold_start" / "model"), cache_dir=tmp_path / "cache", samples=2)
    # Greedy and Avg@2 alike: the same episodes as the learners benchmark's own evaluation of that policy.
    assert "eval/avg@2/em" in model["per_seed"]["0"] and model["per_seed"]["0"] == saved["results"]["0"]["start"]["eval"]
    assert model["per_question"]["0"]["em"] == saved["results"]["0"]["start"]["eval_em"]
    assert model["per_question"]["0"]["avg_em"] == saved["results"]["0"]["start"]["eval_avg_em"]
    assert "Paired against the cold start on Avg@2" in (out / "results.md").read_text()
    # Three sampled evaluations: the start and grpo's final policy by the benchmark, the start again by compare.
    assert len(sampled) == 3 and sampled[2] == sampled[0] and len(sampled[0]) == 2 * 4
    # grpo's final checkpoint on top of the start model: grpo's row, greedy and sampled alike.
    checkpoint = out / "seed0" / "grpo" / "checkpoints" / "step-000001"
    final = compare.compare(out / "results.json", str(out / "seed0" / "cold_start" / "model"), cache_dir=tmp_path / "cache", samples=2,
                            checkpoint=str(checkpoint))
    assert final["per_seed"]["0"] == saved["results"]["0"]["grpo"]["eval"] and sampled[3] == sampled[1]
    # The tiny model's rewards are all 0, so that step left the weights as they were; a checkpoint whose final
    # norm is zeroed (every logit 0: uniform sampling) shows that compare loads the checkpoint's weights.
    import shutil

    from safetensors.torch import load_file, save_file

    broken = tmp_path / "broken" / "step-000001"
    shutil.copytree(checkpoint, broken)
    weights = load_file(str(broken / "policy.safetensors"))
    weights["model.norm.weight"].zero_()
    save_file(weights, str(broken / "policy.safetensors"))
    compare.compare(out / "results.json", str(out / "seed0" / "cold_start" / "model"), cache_dir=tmp_path / "cache", samples=2,
                    checkpoint=str(broken))
    assert len(sampled) == 5 and sampled[4] != sampled[1]
    assert final["agent"].endswith(f"with checkpoint {checkpoint}")
    assert compare.main(["--reference", str(out / "results.json"), "--agent", SCRIPTED, "--cache-dir", str(tmp_path / "cache")]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^\| start \| ", table, re.M) and re.search(r"^\| grpo \| ", table, re.M)
    assert re.search(rf"^\| agent: {re.escape(SCRIPTED)} \| \d\.\d{{3}} \|", table, re.M)
