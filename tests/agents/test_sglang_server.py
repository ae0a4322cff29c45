"""SGLangPolicy against a real SGLang server (CPU build from ../shared/tools/sglang-cpu), serving a tiny model.

Skipped with a reason unless a venv built by that tool's `setup.sh` is found: `$SEARCHGYM_SGLANG_VENV`, or
`/tmp/sglang-cpu-venv`. Starting the server takes about 30 s.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model, save_model
from agents.policies import SamplingParams
from agents.policies.http import HTTPConfig
from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
from agents.policies.sglang_server import SGLangServer, SGLangServerConfig
from agents.rollout import RolloutConfig, RolloutEngine
from tests.agents.test_hf_policy import rescored
from tests.agents.test_rollout_exact import check_sampler_logprobs, check_token_exact

pytestmark = [pytest.mark.server, pytest.mark.slow]

VENV = Path(os.environ.get("SEARCHGYM_SGLANG_VENV", "/tmp/sglang-cpu-venv"))
TOL = 2e-3  # SGLang's CPU kernels sum in a different order than transformers


def _server_venv() -> Path:
    if not (VENV / "bin" / "python").is_file() or not (VENV / "sglang-cpu-stubs").is_dir():
        pytest.skip(
            f"no SGLang CPU venv at {VENV}: build one with ../shared/tools/sglang-cpu/setup.sh {VENV} "
            "(or set SEARCHGYM_SGLANG_VENV) to run the real-server tests"
        )
    return VENV


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    venv = _server_venv()
    folder = tmp_path_factory.mktemp("sglang-models")
    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    save_model(model, tok, folder / "v0")
    save_model(build_tiny_model(TinyModelConfig(seed=1))[0], tok, folder / "v1")
    config = SGLangServerConfig(
        model_path=str(folder / "v0"),
        python=str(venv / "bin" / "python"),
        env={"SGLANG_USE_CPU_ENGINE": "1", "PYTHONPATH": str(venv / "sglang-cpu-stubs")},
        extra_args=("--device", "cpu", "--max-total-tokens", "8192", "--disable-overlap-schedule", "--dtype", "float32", "--random-seed", "0"),
        startup_timeout_s=600.0,
    )
    with SGLangServer(config) as running:
        policy = SGLangPolicy(SGLangPolicyConfig(url=running.url, http=HTTPConfig(timeout_s=120.0, retries=1)), tokenizer=tok)
        yield running, policy, model, tok, folder
        policy.close()


def test_server_logprobs_match_a_forward_pass(server):
    _, policy, model, tok, _ = server
    prompts = [tok.encode("Which river flows through Rome?", add_special_tokens=False), tok.encode("Paris", add_special_tokens=False)]
    outs = policy.generate(prompts, SamplingParams(n=2, temperature=1.0, max_new_tokens=8, stop_token_ids=()))
    for prompt, group in zip(prompts, outs):
        assert len(group) == 2
        for c in group:
            assert len(c.token_ids) == 8 and c.finish_reason == "length"
            assert torch.allclose(rescored(model, prompt, c.token_ids, 1.0), torch.tensor(c.logprobs), atol=TOL)


def test_server_rollouts_are_token_exact(server, make_env):
    _, policy, model, tok, _ = server
    trajectories = RolloutEngine(policy, make_env(max_turns=2), RolloutConfig(group_size=2, max_turn_tokens=10, max_response_tokens=300)).rollout(1)
    for t in trajectories:
        check_token_exact(t, tok)
    check_sampler_logprobs(trajectories, model, tok.pad_token_id, atol=TOL)


def test_server_weight_update_changes_logprobs_as_predicted(server):
    _, policy, model, tok, folder = server
    prompt = tok.encode("Who discovered radioactivity?", add_special_tokens=False)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6, stop_token_ids=())
    before = policy.generate([prompt], greedy)[0][0]
    assert torch.allclose(rescored(model, prompt, before.token_ids, 0.0), torch.tensor(before.logprobs), atol=TOL)
    policy.load_weights(folder / "v1")
    after = policy.generate([prompt], greedy)[0][0]
    new_model, _ = build_tiny_model(TinyModelConfig(seed=1))
    assert torch.allclose(rescored(new_model, prompt, after.token_ids, 0.0), torch.tensor(after.logprobs), atol=TOL)
    assert not torch.allclose(rescored(model, prompt, after.token_ids, 0.0), torch.tensor(after.logprobs), atol=TOL)
    policy.load_weights(folder / "v0")  # leave the module's server as the other tests expect


TENSOR_CHECK = """
import json, sys, torch
from agents.models import TinyModelConfig, build_tiny_model
from agents.policies import SamplingParams
from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
model, tok = build_tiny_model(TinyModelConfig(seed=2))
policy = SGLangPolicy(SGLangPolicyConfig(url=sys.argv[1]), tokenizer=tok)
policy.update_weights(model.state_dict().items())
prompt = tok.encode("Who discovered radioactivity?", add_special_tokens=False)
c = policy.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=6, stop_token_ids=()))[0][0]
with torch.no_grad():
    lp = torch.log_softmax(model(torch.tensor([prompt + c.token_ids])).logits[0].float(), -1)
ref = lp[len(prompt) - 1 : -1].gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
print(json.dumps({"max_diff": (ref - torch.tensor(c.logprobs)).abs().max().item(), "version": policy.model_info().get("weight_version")}), flush=True)
policy.close()
"""


def test_server_tensor_weight_path(server):
    """The tensor path (begin/end_weight_update around /update_weights_from_tensor) needs sglang in the
    trainer's process, so the trainer here is a child process running the server venv's python."""
    import json
    import subprocess

    running, policy, _, _, folder = server
    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": f"{root}:{VENV / 'sglang-cpu-stubs'}", "SGLANG_USE_CPU_ENGINE": "1", "PATH": os.environ.get("PATH", "")}
    probe = subprocess.run([str(VENV / "bin" / "python"), "-c", "import gymnasium, bm25s"], env=env, capture_output=True, check=False, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"the server venv cannot import searchgym's dependencies: {VENV}/bin/pip install gymnasium bm25s PyStemmer rank-bm25 pyarrow")
    # Output to a file, not a pipe: the torch_shm_manager daemon that CPU tensor sharing starts inherits the
    # child's streams and lives as long as the server holds the shared segments.
    log = folder / "tensor-check.log"
    with open(log, "w") as out:
        done = subprocess.run([str(VENV / "bin" / "python"), "-c", TENSOR_CHECK, running.url], env=env, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=240)
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    result = json.loads(text.strip().splitlines()[-1])
    assert result["max_diff"] < TOL and result["version"] is not None
    policy.load_weights(folder / "v0")
