"""SGLangPolicy against a fake SGLang server on loopback (same JSON shapes), and the server launcher.

The fake answers `/generate` with a tiny HF model, so ids and logprobs can be checked against forward
passes; error paths (retries, timeouts, a killed server, a failed start) must end in typed errors within
a bounded time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model, save_model
from agents.policies import Policy, SamplingParams
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.policies.http import HTTPConfig
from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
from agents.policies.sglang_server import SGLangServer, SGLangServerConfig
from agents.rollout import RolloutConfig, RolloutEngine
from searchgym.errors import BackendError, BackendTimeout, ConfigError
from tests.agents.fake_sglang import FakeSGLang
from tests.agents.test_hf_policy import rescored
from tests.agents.test_rollout_exact import check_sampler_logprobs, check_token_exact

ROOT = Path(__file__).resolve().parents[2]
FAST = HTTPConfig(timeout_s=10.0, connect_timeout_s=1.0, retries=2, backoff_s=0.05)


@pytest.fixture
def served():
    """(fake server, client policy, backing model, tokenizer): the fake samples with a fresh tiny model."""
    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    with FakeSGLang(HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype="float32"))) as fake:
        policy = SGLangPolicy(SGLangPolicyConfig(url=fake.url, http=FAST), tokenizer=tok)
        yield fake, policy, model, tok
        policy.close()


def test_generate_sends_native_requests_and_reads_logprobs(served):
    fake, policy, model, tok = served
    assert isinstance(policy, Policy)
    prompts = [tok.encode("Who discovered radioactivity?", add_special_tokens=False), tok.encode("x", add_special_tokens=False)]
    params = SamplingParams(n=2, temperature=0.8, top_p=0.9, max_new_tokens=9, stop=("</search>",), stop_token_ids=())
    outs = policy.generate(prompts, params, max_new_tokens=[9, 4])
    assert [[len(c.token_ids) for c in g] for g in outs] == [[9, 9], [4, 4]]
    for prompt, group in zip(prompts, outs):
        for c in group:
            assert torch.allclose(rescored(model, prompt, c.token_ids, 0.8), torch.tensor(c.logprobs), atol=1e-4)
            assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
    bodies = sorted((b for _, p, b in fake.calls if p == "/generate"), key=lambda b: len(b["input_ids"]))
    assert [b["input_ids"] for b in bodies] == sorted(prompts, key=len)
    sp = bodies[1]["sampling_params"]
    assert bodies[1]["return_logprob"] is True and bodies[1]["logprob_start_len"] == -1
    assert sp["n"] == 2 and sp["temperature"] == 0.8 and sp["top_p"] == 0.9 and sp["top_k"] == -1
    assert sp["max_new_tokens"] == 9 and sp["stop"] == ["</search>"] and sp["no_stop_trim"] is True
    assert sp["stop_token_ids"] == [] and sp["ignore_eos"] is True
    assert "sampling_seed" not in sp


def test_rollouts_through_the_server_are_token_exact(served, make_env):
    fake, policy, model, tok = served
    config = RolloutConfig(group_size=2, temperature=1.0, max_turn_tokens=10, max_response_tokens=300)
    trajectories = RolloutEngine(policy, make_env(max_turns=2), config).rollout([{"options": {"index": 1}}])
    for t in trajectories:
        check_token_exact(t, tok)
    check_sampler_logprobs(trajectories, model, tok.pad_token_id, atol=1e-4)
    assert fake.calls[0][2]["sampling_params"]["n"] == 2  # the group's first turn is one request with n=G


def test_weight_sync_from_disk_changes_logprobs_as_the_new_weights_predict(served, tmp_path):
    fake, policy, _, tok = served
    new_model, _ = build_tiny_model(TinyModelConfig(seed=1))
    save_model(new_model, tok, tmp_path / "step-1")
    prompt = tok.encode("Which river flows through Rome?", add_special_tokens=False)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=8, stop_token_ids=())
    before = policy.generate([prompt], greedy)[0][0]
    fake.calls.clear()
    policy.load_weights(tmp_path / "step-1")
    assert fake.paths() == ["/pause_generation", "/flush_cache", "/update_weights_from_disk", "/continue_generation"]
    assert fake.calls[2][2] == {"model_path": str(tmp_path / "step-1"), "weight_version": "1"}
    assert policy.weight_version == 1
    after = policy.generate([prompt], greedy)[0][0]
    assert torch.allclose(rescored(new_model, prompt, after.token_ids, 0.0), torch.tensor(after.logprobs), atol=1e-4)
    assert after.logprobs != before.logprobs
    assert after.meta["weight_version"] == "1"


def test_a_failed_update_is_typed_and_generation_continues(served, tmp_path):
    fake, policy, _, _ = served
    with pytest.raises(BackendError, match="update_weights_from_disk"):
        policy.load_weights(tmp_path / "no-such-checkpoint")
    assert fake.paths()[-1] == "/continue_generation" and not fake.paused


def test_tensor_path_needs_sglang_in_process(served):
    pytest.importorskip("torch")
    try:
        import sglang  # noqa: F401
    except ImportError:
        _, policy, model, _ = served
        with pytest.raises(ConfigError, match="sglang importable"):
            policy.update_weights(model.state_dict().items())
    else:
        pytest.skip("sglang is installed here; the tensor path is covered by the server tests")


def test_retries_then_success_and_bounded_retries(served):
    fake, policy, _, tok = served
    prompt = tok.encode("retry", add_special_tokens=False)
    fake.fail_next = [503, 500]
    assert len(policy.generate([prompt], SamplingParams(max_new_tokens=3))[0][0].token_ids) <= 3
    assert fake.paths().count("/generate") == 3
    fake.fail_next = [503, 503, 503]
    with pytest.raises(BackendError, match="503"):
        policy.generate([prompt], SamplingParams(max_new_tokens=3))


def test_client_errors_are_not_retried(served):
    fake, policy, _, _ = served
    fake.fail_next = [400]
    fake.calls.clear()
    with pytest.raises(BackendError, match="400"):
        policy.generate([[5, 6]], SamplingParams(max_new_tokens=3))
    assert fake.paths() == ["/generate"]


def test_aborted_requests_are_sent_again(served):
    fake, policy, _, _ = served
    fake.abort_next = 2
    out = policy.generate([[5, 6]], SamplingParams(max_new_tokens=3))[0][0]
    assert out.finish_reason in ("stop", "length") and out.token_ids
    fake.abort_next = 10
    with pytest.raises(BackendError, match="aborted"):
        policy.generate([[5, 6]], SamplingParams(max_new_tokens=3))


def test_malformed_answers_are_typed_errors(served):
    fake, policy, _, _ = served
    fake.generate = lambda body: {"text": "no meta"}  # type: ignore[method-assign]
    with pytest.raises(BackendError, match="output_token_logprobs"):
        policy.generate([[5, 6]], SamplingParams(max_new_tokens=3))


def test_a_hanging_server_times_out_within_the_bound(served):
    fake, _, _, tok = served
    fake.hang_s = 30.0  # the handler thread is a daemon: the server closes without waiting for it
    policy = SGLangPolicy(SGLangPolicyConfig(url=fake.url, http=HTTPConfig(timeout_s=0.3, connect_timeout_s=0.3, retries=1, backoff_s=0.0)), tokenizer=tok)
    start = time.monotonic()
    with pytest.raises(BackendTimeout):
        policy.generate([[5, 6]], SamplingParams(max_new_tokens=3))
    assert time.monotonic() - start < 10.0  # two attempts of 0.3 s, not the server's 30 s
    policy.close()


def test_the_tokenizer_comes_from_the_server_by_default(tmp_path):
    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    save_model(model, tok, tmp_path / "m")
    with FakeSGLang(HFPolicy(model, tok), tokenizer_path=str(tmp_path / "m")) as fake:
        policy = SGLangPolicy(SGLangPolicyConfig(url=fake.url, http=FAST))
        assert policy.tokenizer.encode("river") == tok.encode("river")
        assert policy.health()
        policy.close()


def fake_server_config(**kwargs) -> SGLangServerConfig:
    extra = kwargs.pop("extra_args", ())
    return SGLangServerConfig(
        model_path="scripted", python=sys.executable, module="tests.agents.fake_sglang", extra_args=extra,
        env={"PYTHONPATH": str(ROOT)}, startup_timeout_s=kwargs.pop("startup_timeout_s", 30.0), stop_timeout_s=5.0, **kwargs,
    )


def test_launcher_starts_waits_for_health_and_stops(tiny):
    _, tok = tiny
    server = SGLangServer(fake_server_config())
    with server:
        assert server.process is not None and server.process.poll() is None
        policy = SGLangPolicy(SGLangPolicyConfig(url=server.url, http=FAST), tokenizer=tok)
        assert policy.generate([[1, 2]], SamplingParams(max_new_tokens=3))[0][0].token_ids == [5, 6, 7]
        pid = server.process.pid
        log = server.log_path
        assert log is not None and "listening" in log.read_text()
    assert server.process is None
    assert not log.exists()  # the temporary log goes with the server
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
    assert not policy.health(timeout_s=1.0)
    policy.close()


def test_a_killed_server_gives_a_typed_error_quickly(tiny):
    _, tok = tiny
    server = SGLangServer(fake_server_config())
    server.start()
    try:
        policy = SGLangPolicy(SGLangPolicyConfig(url=server.url, http=HTTPConfig(timeout_s=30.0, connect_timeout_s=10.0, retries=2, backoff_s=0.1)), tokenizer=tok)
        assert policy.generate([[1]], SamplingParams(max_new_tokens=3))[0][0].token_ids == [5, 6, 7]
        server.process.kill()  # the process this test started, by its id
        server.process.wait(timeout=10)
        start = time.monotonic()
        with pytest.raises(BackendError, match="is the server running"):
            policy.generate([[1]], SamplingParams(max_new_tokens=3))
        assert time.monotonic() - start < 8.0  # refused at once, three times: not a 10 s connect or 30 s read timeout
        policy.close()
    finally:
        server.stop()


def test_launcher_reports_a_failed_start_with_the_log():
    server = SGLangServer(fake_server_config(extra_args=("--exit-code", "3")))
    with pytest.raises(BackendError, match="exited with code 3") as info:
        server.start()
    assert "failing on purpose" in str(info.value)
    assert server.process is None


def test_launcher_gives_up_after_its_startup_timeout():
    server = SGLangServer(fake_server_config(extra_args=("--startup-delay", "60"), startup_timeout_s=1.0))
    start = time.monotonic()
    with pytest.raises(BackendTimeout, match="did not become healthy"):
        server.start()
    assert time.monotonic() - start < 15.0
    assert server.process is None


def test_config_validation():
    with pytest.raises(ConfigError):
        SGLangPolicyConfig(max_concurrency=0)
    with pytest.raises(ConfigError):
        SGLangPolicyConfig(pause_mode="stop")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        HTTPConfig(retries=-1)
    with pytest.raises(ConfigError):
        SGLangServerConfig(model_path="")
    with pytest.raises(ConfigError):
        SGLangPolicy(SGLangPolicyConfig(url="localhost:30000"), tokenizer=object())  # type: ignore[arg-type]
    assert SGLangServer(SGLangServerConfig(model_path="m", port=31234)).command()[-6:] == ["--model-path", "m", "--host", "127.0.0.1", "--port", "31234"]
