"""The learners benchmark's GPU preset path on CPU: the TrainConfig fields it sets, and a run of the tiny
preset with the GPU preset's rollout backend (two loopback SGLang stand-ins) and the HotpotQA evaluation
over a small file in HotpotQA's official format."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agents.models import TinyModelConfig, build_tiny_model
from agents.policies.hf import HFPolicy
from agents.train import TrainConfig
from agents.train.config import EnvConfig, training_rollout
from agents.experiments import learners, presets, runner
from tests.agents.fake_sglang import FakeSGLang

HOTPOTQA = [
    {"_id": "q1", "question": "Which river flows through the capital of France?", "answer": "Seine", "type": "bridge", "level": "easy",
     "supporting_facts": [["Paris", 0], ["Seine", 0]],
     "context": [["Paris", ["Paris is the capital of France.", " The Seine flows through Paris."]],
                 ["Seine", ["The Seine is a river in northern France."]]]},
    {"_id": "q2", "question": "Who discovered radioactivity?", "answer": "Henri Becquerel", "type": "bridge", "level": "easy",
     "supporting_facts": [["Radioactivity", 0]],
     "context": [["Radioactivity", ["Radioactivity was discovered by Henri Becquerel in 1896."]],
                 ["Rome", ["The Tiber flows through Rome."]]]},
    {"_id": "q3", "question": "Which river flows through Rome?", "answer": "Tiber", "type": "bridge", "level": "easy",
     "supporting_facts": [["Rome", 0]],
     "context": [["Rome", ["The Tiber flows through Rome."]], ["Paris", ["Paris is the capital of France."]]]},
]


def test_the_gpu_preset_rolls_out_through_sglang_on_cuda():
    preset = presets.PRESETS["gpu"]
    options = runner.backend_options(preset)
    assert options == {"device": "cuda", "rollout": {"backend": "sglang", "sglang_urls": ("http://127.0.0.1:30000",), "weight_sync": "tensors"}}
    config = TrainConfig(model=preset.model, env=EnvConfig(hops=preset.hops), rollout=training_rollout(**options["rollout"]),
                         device=options["device"])  # valid as a TrainConfig
    assert config.rollout.backend == "sglang" and preset.model == "Qwen/Qwen2.5-0.5B-Instruct" and set(preset.hops) == {1, 2}
    two = runner.backend_options(preset, ["http://10.0.0.2:30000", "http://10.0.0.3:30000"])
    assert two["rollout"]["sglang_urls"] == ("http://10.0.0.2:30000", "http://10.0.0.3:30000")
    assert runner.backend_options(presets.PRESETS["cpu"]) == {"device": "cpu", "rollout": {"backend": "hf"}}


@pytest.mark.slow
def test_tiny_preset_with_sglang_rollouts_and_a_hotpotqa_eval(tmp_path, monkeypatch):
    data = tmp_path / "hotpot_dev_distractor.json"
    data.write_text(json.dumps(HOTPOTQA))
    monkeypatch.setitem(presets.PRESETS, "tiny-sglang", replace(presets.PRESETS["tiny"], rollout_backend="sglang", servers=2))
    servers = [FakeSGLang(HFPolicy(*build_tiny_model(TinyModelConfig(seed=5)))) for _ in range(2)]
    with servers[0], servers[1]:
        code = learners.main(["--preset", "tiny-sglang", "--learners", "grpo", "--out", str(tmp_path / "out"),
                              "--hotpotqa", str(data), "--sglang-urls", servers[0].url, servers[1].url])
    assert code == 0
    for s in servers:
        paths = s.paths()
        assert paths.count("/generate") > 0 and paths.count("/update_weights_from_disk") >= 3  # base, cold start, grpo start + step
    # HotpotQA questions reached the servers: the first prompt of one of its questions is among the requests.
    prompts = [b["input_ids"] for s in servers for _, p, b in s.calls if p == "/generate"]
    tok = build_tiny_model(TinyModelConfig(seed=0))[1]
    assert any("Who discovered radioactivity?" in tok.decode(ids) for ids in prompts)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["0"]
    for name in ("start", "grpo"):
        h = saved[name]["hotpotqa"]
        assert h["hotpotqa/questions"] == 3.0 and 0.0 <= h["hotpotqa/em"] <= 1.0
    report = (tmp_path / "out" / "results.md").read_text()
    assert "HotpotQA (greedy, first 3 questions of the file)" in report and "| grpo |" in report
