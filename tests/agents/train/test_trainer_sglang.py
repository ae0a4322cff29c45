"""Training with rollouts served over HTTP (`rollout_backend="sglang"`).

Most tests run the trainer against `FakeSGLang` on loopback: real HTTP, SGLang's JSON shapes, and
`/generate` answered by an HFPolicy over its own tiny model, so what the server samples from can be
compared with the trainer's weights tensor by tensor. The servers start from other weights than the
trainer (seed 5), so nothing matches unless the trainer pushed its weights.

The updates must change the weights for the sync checks to mean anything, and a random model's rewards
are usually all 0 (a zero advantage, a zero gradient). So these runs take one cold-start step and a k3
KL term against the weights from before it (`cold_start_away_from_reference`: the trainer's own reference
is the cold-started policy, where the KL's gradient is zero), whose gradient is then nonzero at every step
whatever the rewards.

A run whose rollouts are sampled by the fake does not draw the same tokens as an in-process run with
the same seed, and it is not expected to: the server samples each prompt in a request of its own, the
in-process sampler draws a whole batch from one generator. What must hold, and is checked: the same
questions each step, greedy rollouts that are token-identical, the same cold start, and sampler logprobs
that equal the trainer's own (policy ratio 1, nothing clipped).

The last test trains one step against a real SGLang CPU server when `/tmp/sglang-cpu-venv` exists.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model, save_model
from agents.policies.fanout import FanOutPolicy
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.rollout import RolloutEngine
from agents.learners import GRPOConfig
from agents.train import TrainConfig
from agents.train.config import EnvConfig, OptimConfig, RolloutConfig, training_rollout
from agents.train.trainer import Trainer
from searchgym.errors import BackendError, ConfigError
from tests.agents.fake_sglang import FakeSGLang

SERVER_SEED = 5  # the fakes' starting weights; the trainer's tiny model is seed 0


BASE = {
    # float32 on both sides: the fake servers sample in float32, as a real server samples in its own --dtype.
    "model": "tiny", "steps": 2, "questions_per_step": 2, "learner": GRPOConfig(kl_coef=0.5), "dtype": "float32",
    "env": {"num_entities": 300, "num_questions": 20, "hops": (1,), "max_turns": 2},
    "rollout": {"group_size": 2, "max_turn_tokens": 12, "max_response_tokens": 64, "backend": "sglang", "sglang_timeout_s": 30.0},
    "optim": {"micro_batch": 4, "lr": 1e-2, "cold_start_steps": 1, "cold_start_batch": 4, "cold_start_lr": 1e-2},
}
SECTIONS = ("env", "rollout", "optim")


def sglang_config(tmp_path, urls, *, rollout: dict | None = None, optim: dict | None = None, **top) -> TrainConfig:
    """`BASE` rolled out by the servers at `urls`; `rollout` and `optim` change those sections."""
    return TrainConfig(**{**{k: v for k, v in BASE.items() if k not in SECTIONS}, "out_dir": str(tmp_path / "run"), **top},
                       env=EnvConfig(**BASE["env"]),
                       rollout=RolloutConfig(**{**BASE["rollout"], "sglang_urls": tuple(urls), **(rollout or {})}),
                       optim=OptimConfig(**{**BASE["optim"], **(optim or {})}))


def fake_server() -> FakeSGLang:
    model, tok = build_tiny_model(TinyModelConfig(seed=SERVER_SEED))
    return FakeSGLang(HFPolicy(model, tok, config=HFPolicyConfig(seed=SERVER_SEED, dtype="float32")))


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def cold_start_away_from_reference(trainer: Trainer) -> None:
    """The cold start, with the KL reference set back to the weights from before it, so that the KL term's
    gradient moves the weights at every RL step whatever the rewards."""
    start = weights(trainer.model)
    trainer.cold_start()
    trainer.reference.load_state_dict(start)


def generate_bodies(fake: FakeSGLang) -> list[dict]:
    return [body for _, path, body in fake.calls if path == "/generate"]


@pytest.fixture
def fakes():
    servers = [fake_server(), fake_server()]
    for s in servers:
        s.__enter__()
    yield servers
    for s in servers:
        s.__exit__(None, None, None)


@pytest.mark.slow
def test_two_steps_roll_out_on_the_server_and_sync_after_each(tmp_path, fakes):
    fake = fakes[0]
    assert not same_weights(weights(fake.policy.model), weights(build_tiny_model(TinyModelConfig(seed=0))[0]))
    trainer = Trainer(sglang_config(tmp_path, [fake.url], eval_questions=2))
    try:
        assert isinstance(trainer.engine.policy, FanOutPolicy) and trainer.engine.policy is trainer.rollout_policy
        # The start: the trainer's weights are pushed through the disk path and the version is checked.
        assert fake.paths() == ["/health", "/pause_generation", "/flush_cache", "/update_weights_from_disk", "/continue_generation", "/model_info"]
        load = fake.calls[3][2]
        assert load == {"model_path": str((tmp_path / "run" / "rollout-weights").resolve()), "weight_version": "1"}
        assert same_weights(weights(fake.policy.model), weights(trainer.model))

        cold_start_away_from_reference(trainer)
        assert fake.weight_version == "2" and same_weights(weights(fake.policy.model), weights(trainer.model))

        for step in (1, 2):
            fake.calls.clear()
            before = weights(trainer.model)
            metrics = trainer.train_step()
            paths = fake.paths()
            bodies = generate_bodies(fake)
            # Rollouts went to the server: seeded, so one request per sample (n = 1, each with its own seed).
            assert len(bodies) >= 4 and {b["sampling_params"]["n"] for b in bodies} == {1}
            assert len({b["sampling_params"]["sampling_seed"] for b in bodies[:4]}) == 4
            assert metrics["rollout/sampled_tokens"] > 0
            # ... and the sync came after the last of them.
            assert paths.index("/update_weights_from_disk") > max(i for i, p in enumerate(paths) if p == "/generate")
            assert paths[-1] == "/model_info" and fake.weight_version == str(2 + step)
            assert not same_weights(before, weights(trainer.model)), "the update did not change the weights"
            assert same_weights(weights(fake.policy.model), weights(trainer.model))
            # The sampler's logprobs are the trainer's own: what the server sampled came from these weights.
            assert metrics["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
            assert metrics["loss/clip_frac_high"] == 0.0 and metrics["loss/clip_frac_low"] == 0.0
            assert metrics["time/sync_s"] > 0
        # Evaluation samples on the server too.
        fake.calls.clear()
        assert trainer.evaluate(2)["eval/questions"] == 2.0
        assert [b["sampling_params"]["temperature"] for b in generate_bodies(fake)][:2] == [0.0, 0.0]
    finally:
        trainer.close()


def test_two_servers_both_get_prompts_and_weights(tmp_path, fakes):
    trainer = Trainer(sglang_config(tmp_path, [f.url for f in fakes], steps=1, questions_per_step=4))
    try:
        cold_start_away_from_reference(trainer)
        for f in fakes:
            f.calls.clear()
        before = weights(trainer.model)
        metrics = trainer.train_step()
        # Each server's first four requests are its first turn: two questions (dealt round robin) x G = 2
        # samples, one seeded request per sample.
        first_turns = [{tuple(b["input_ids"]) for b in generate_bodies(f)[:4]} for f in fakes]
        assert [len(q) for q in first_turns] == [2, 2] and not first_turns[0] & first_turns[1]
        for f in fakes:
            assert {b["sampling_params"]["n"] for b in generate_bodies(f)} == {1}
            assert f.paths()[-1] == "/model_info" and f.weight_version == "3"
            assert same_weights(weights(f.policy.model), weights(trainer.model))
        assert not same_weights(before, weights(trainer.model))
        # A first-turn prompt is G = 2 requests, a later turn's prompt one.
        assert trainer.rollout_policy.prompts_sent == [len(generate_bodies(f)) - 2 for f in fakes]
        assert metrics["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    finally:
        trainer.close()


@pytest.mark.slow
def test_a_resumed_run_pushes_its_restored_weights(tmp_path, fakes):
    fake = fakes[0]
    first = Trainer(sglang_config(tmp_path, [fake.url], steps=1))
    first.run()  # cold start, one step, checkpoint
    saved = weights(first.model)
    first.close()
    # The server restarts with its original weights, as a new job would find it.
    fake.policy.update_weights(build_tiny_model(TinyModelConfig(seed=SERVER_SEED))[0].state_dict().items())
    fake.weight_version = "default"
    fake.calls.clear()
    resumed = Trainer(sglang_config(tmp_path, [fake.url], steps=2))
    try:
        assert resumed.step == 1 and same_weights(weights(resumed.model), saved)
        assert "/update_weights_from_disk" in fake.paths() and fake.weight_version == "1"
        assert same_weights(weights(fake.policy.model), saved)
    finally:
        resumed.close()


def test_what_must_match_an_in_process_run(tmp_path, fakes):
    fake = fakes[0]
    local = Trainer(sglang_config(tmp_path / "hf", [], rollout={"backend": "hf"}, steps=1))
    served = Trainer(sglang_config(tmp_path / "sg", [fake.url], steps=1))
    try:
        # Greedy rollouts from equal weights are token-identical, wherever they are sampled.
        greedy = [RolloutEngine(t.rollout_policy, lambda t=t: t._make_env("train"), replace(t.engine.config, temperature=0.0, group_size=1, seed=None))
                  for t in (local, served)]
        a, b = (e.rollout([{"options": {"index": i}} for i in range(4)]) for e in greedy)
        for e in greedy:
            e.close()
        assert [t.token_ids for t in a] == [t.token_ids for t in b]
        assert [t.finish_reason for t in a] == [t.finish_reason for t in b]
        for x, y in zip(a, b):
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)

        assert local.cold_start() == served.cold_start()  # in process on both sides, from the same weights
        fake.calls.clear()
        m_local, m_served = local.train_step(), served.train_step()
        # The same questions: the server got the prompts of the questions the in-process run drew.
        env = local.env.unwrapped
        expected = [local.tokenizer.encode(local.engine._prompt_text(env.reset(options={"index": i})[0]), add_special_tokens=False)
                    for i in _step_questions(local)]
        # The first turn: G = 2 seeded requests per question, before any later turn's.
        first_turn = {tuple(b["input_ids"]) for b in generate_bodies(fake)[: 2 * len(expected)]}
        assert _step_questions(local) == _step_questions(served)
        assert sorted(first_turn) == sorted(tuple(e) for e in expected)
        # A server does not report its prefill counts: those come from the in-process policy only.
        counted_here = {"perf/prefill_tok_s", "rollout/prefill_tokens", "rollout/reused_tokens"}
        assert set(m_served) == (set(m_local) - counted_here) | {"time/sync_s"}
        for m in (m_local, m_served):
            assert m["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-4) and m["loss/clip_frac_high"] == 0.0
    finally:
        local.close()
        served.close()


def _step_questions(trainer: Trainer) -> list[int]:
    """The questions the trainer's first step drew (the order depends only on seed and position)."""
    saved = trainer.position
    trainer.position = 0
    try:
        return trainer.questions(trainer.config.questions_per_step)
    finally:
        trainer.position = saved


def test_config_rejects_bad_backend_combinations():
    with pytest.raises(ConfigError, match="needs at least one server"):
        RolloutConfig(backend="sglang")
    with pytest.raises(ConfigError, match="rollout backend is 'hf'"):
        RolloutConfig(sglang_urls=("http://127.0.0.1:30000",))
    with pytest.raises(ConfigError, match="http:// or https://"):
        RolloutConfig(backend="sglang", sglang_urls=("127.0.0.1:30000",))
    with pytest.raises(ConfigError, match="twice"):
        RolloutConfig(backend="sglang", sglang_urls=("http://a:1", "http://a:1/"))
    with pytest.raises(ConfigError, match="string"):
        RolloutConfig(backend="sglang", sglang_urls="http://a:1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lora"):
        TrainConfig(rollout=training_rollout(backend="sglang", sglang_urls=("http://a:1",)), optim=OptimConfig(lora=True))
    with pytest.raises(ConfigError, match="rollout backend must be one of"):
        RolloutConfig(backend="vllm")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="weight_sync"):
        RolloutConfig(weight_sync="nccl")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sglang_timeout_s"):
        RolloutConfig(sglang_timeout_s=0)
    assert RolloutConfig(backend="sglang", sglang_urls=["http://a:1", "http://b:2"]).sglang_urls == ("http://a:1", "http://b:2")
    with pytest.raises(ConfigError, match="not both"):
        RolloutConfig(backend="sglang", sglang_urls=("http://a:1",), sglang_router="http://r:3")
    with pytest.raises(ConfigError, match="sglang_router must start with http"):
        RolloutConfig(backend="sglang", sglang_router="r:3")
    with pytest.raises(ConfigError, match="rollout backend is 'hf'"):
        RolloutConfig(sglang_router="http://r:3")
    assert RolloutConfig(backend="sglang", sglang_router="http://r:3").sglang_router == "http://r:3"


@pytest.mark.parametrize("flags", [
    ["--rollout.backend", "sglang", "--rollout.sglang-urls", "http://127.0.0.1:30000", "http://127.0.0.1:30001", "--rollout.weight-sync", "tensors"],
])
def test_the_cli_builds_the_backend_options(flags):
    from agents.cli import build_parser
    from agents.cli.train import config_from_args

    parser = build_parser()
    config = config_from_args(parser.parse_args(["train", *flags, "--device", "cpu"]))
    assert config.rollout.sglang_urls == ("http://127.0.0.1:30000", "http://127.0.0.1:30001") and config.rollout.weight_sync == "tensors"
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--rollout.backend", "vllm"])


@pytest.mark.server
@pytest.mark.slow
def test_rollouts_through_sglang_router_reach_both_workers_and_so_do_the_weights(tmp_path, fakes):
    import importlib.util

    from agents.policies.router import RouterPolicy
    from agents.policies.router_server import SGLangRouter, SGLangRouterConfig

    if importlib.util.find_spec("sglang_router") is None:
        pytest.skip("sglang-router is not installed (pip install 'searchgym[router]')")
    router = SGLangRouter(SGLangRouterConfig(worker_urls=tuple(f.url for f in fakes), policy="round_robin",
                                             extra_args=("--health-check-interval-secs", "300", "--log-level", "warn")))
    try:
        router.start()
    except BackendError as e:
        pytest.skip(f"sglang-router would not start here: {e}")
    try:
        config = sglang_config(tmp_path, ["http://127.0.0.1:1"], steps=1, questions_per_step=4)
        trainer = Trainer(replace(config, rollout=replace(config.rollout, sglang_urls=(), sglang_router=router.url)))
        try:
            assert isinstance(trainer.rollout_policy, RouterPolicy)
            cold_start_away_from_reference(trainer)
            for f in fakes:
                f.calls.clear()
            before = weights(trainer.model)
            metrics = trainer.train_step()
            assert not same_weights(before, weights(trainer.model)) and metrics["rollout/sampled_tokens"] > 0
            for f in fakes:  # the router spread the rollouts, and the push after the update reached each worker
                assert generate_bodies(f) and f.weight_version == "3"
                assert same_weights(weights(f.policy.model), weights(trainer.model))
            assert metrics["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
        finally:
            trainer.close()
    finally:
        router.stop()


def test_an_unreachable_server_is_a_typed_error_in_bounded_time(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        Trainer(sglang_config(tmp_path, [f"http://127.0.0.1:{port}"]))
    assert time.monotonic() - start < 15.0


def test_a_failing_server_mid_run_is_a_typed_error(tmp_path, fakes):
    fake = fakes[0]
    trainer = Trainer(sglang_config(tmp_path, [fake.url], optim={"cold_start_steps": 0}))
    try:
        fake.fail_next = [500] * 50
        start = time.monotonic()
        with pytest.raises(BackendError, match="500"):
            trainer.train_step()
        assert time.monotonic() - start < 15.0
    finally:
        trainer.close()


class StaleVersionServer(FakeSGLang):
    """Loads the weights but keeps reporting its old weight version (another process's update, or a
    server restarted between the load and the check)."""

    def route(self, method, path, body):
        status, answer = super().route(method, path, body)
        if path == "/update_weights_from_disk":
            self.weight_version = "default"
        return status, answer


def test_a_server_that_does_not_report_the_new_version_is_an_error(tmp_path):
    model, tok = build_tiny_model(TinyModelConfig(seed=SERVER_SEED))
    with StaleVersionServer(HFPolicy(model, tok)) as fake, pytest.raises(BackendError, match="reports weight version 'default'.*expected '1'"):
        Trainer(sglang_config(tmp_path, [fake.url]))


def test_tensor_sync_needs_sglang_in_process(tmp_path, fakes):
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("sglang is importable here; the tensor path is exercised against a real server instead")
    with pytest.raises(ConfigError, match="weight_sync='tensors' needs the sglang package"):
        Trainer(sglang_config(tmp_path, [fakes[0].url], rollout={"weight_sync": "tensors"}))


def test_no_cuda_device_is_a_config_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ConfigError, match="no CUDA device"):
        Trainer(sglang_config(tmp_path, [], rollout={"backend": "hf"}, device="cuda"))


# -- a real SGLang server (CPU build) -------------------------------------------------------------------

VENV = Path(os.environ.get("SEARCHGYM_SGLANG_VENV", "/tmp/sglang-cpu-venv"))
TOL = 2e-3  # SGLang's CPU kernels sum in a different order than transformers
PROMPT = "Who discovered radioactivity?"


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    """A real SGLang CPU server over the tiny model with the servers' starting weights (about 30 s)."""
    if not (VENV / "bin" / "python").is_file() or not (VENV / "sglang-cpu-stubs").is_dir():
        pytest.skip(f"no SGLang CPU venv at {VENV}: build one with ../shared/tools/sglang-cpu/setup.sh {VENV} (or set SEARCHGYM_SGLANG_VENV)")
    from agents.policies.sglang_server import SGLangServer, SGLangServerConfig

    folder = tmp_path_factory.mktemp("served")
    model, tok = build_tiny_model(TinyModelConfig(seed=SERVER_SEED))
    save_model(model, tok, folder)
    config = SGLangServerConfig(
        model_path=str(folder), python=str(VENV / "bin" / "python"),
        env={"SGLANG_USE_CPU_ENGINE": "1", "PYTHONPATH": str(VENV / "sglang-cpu-stubs")},
        extra_args=("--device", "cpu", "--max-total-tokens", "8192", "--disable-overlap-schedule", "--dtype", "float32", "--random-seed", "0"),
        startup_timeout_s=600.0,
    )
    with SGLangServer(config) as running:
        yield running


def serves(url: str, tok, model: torch.nn.Module) -> bool:
    """Whether the server's greedy logprobs of a short continuation are `model`'s."""
    from agents.policies import SamplingParams
    from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
    from tests.agents.test_hf_policy import rescored

    client = SGLangPolicy(SGLangPolicyConfig(url=url), tokenizer=tok)
    try:
        prompt = tok.encode(PROMPT, add_special_tokens=False)
        c = client.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=6, stop_token_ids=()))[0][0]
    finally:
        client.close()
    return torch.allclose(rescored(model.eval(), prompt, c.token_ids, 0.0), torch.tensor(c.logprobs), atol=TOL)


def tiny_with(state: dict[str, torch.Tensor]) -> torch.nn.Module:
    model = build_tiny_model(TinyModelConfig(seed=0))[0]
    model.load_state_dict(state)
    return model


@pytest.mark.server
@pytest.mark.slow
def test_one_step_against_a_real_sglang_server_disk_sync(tmp_path, real_server):
    trainer = Trainer(sglang_config(tmp_path, [real_server.url], steps=1, rollout={"sglang_timeout_s": 120.0}))
    try:
        cold_start_away_from_reference(trainer)
        before = weights(trainer.model)
        metrics = trainer.train_step()
        assert not same_weights(before, weights(trainer.model))
        assert trainer.rollout_policy.members[0].model_info()["weight_version"] == "3"  # start, cold start, step 1
        # The server sampled step 1 from the cold-started weights the trainer pushed ...
        assert metrics["rollout/sampled_tokens"] > 0
        assert metrics["loss/ratio_mean"] == pytest.approx(1.0, abs=TOL)
        # ... and now serves the weights of after the step.
        assert serves(real_server.url, trainer.tokenizer, trainer.model)
        assert not serves(real_server.url, trainer.tokenizer, tiny_with(before))
    finally:
        trainer.close()


TENSOR_STEP = """
import json, sys, torch
torch.set_num_threads(1)
from agents.learners import GRPOConfig
from agents.train import TrainConfig
from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
from agents.train.trainer import Trainer
config = json.loads(sys.argv[1])
top = {k: v for k, v in config.items() if k not in ("learner", "env", "rollout", "optim")}
trainer = Trainer(TrainConfig(**top, learner=GRPOConfig(**config["learner"]), env=EnvConfig(**config["env"]),
                              rollout=RolloutConfig(**config["rollout"]), optim=OptimConfig(**config["optim"])))
start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
trainer.cold_start()
trainer.reference.load_state_dict(start)  # a nonzero KL gradient whatever the rewards (see the module's docs)
metrics = trainer.train_step()
version = trainer.rollout_policy.members[0].model_info()["weight_version"]
trainer.close()
print(json.dumps({"ratio": metrics["loss/ratio_mean"], "tokens": metrics["rollout/sampled_tokens"], "version": version}), flush=True)
"""


@pytest.mark.server
@pytest.mark.slow
def test_one_step_against_a_real_sglang_server_tensor_sync(tmp_path, real_server):
    """The tensor path needs sglang in the trainer's process, so this trainer is a child process running
    the server venv's python; it leaves its step-1 checkpoint, whose weights the server must now serve."""
    import json
    import subprocess

    root = Path(__file__).resolve().parents[3]
    env = {"PYTHONPATH": f"{root}:{VENV / 'sglang-cpu-stubs'}", "SGLANG_USE_CPU_ENGINE": "1", "PATH": os.environ.get("PATH", "")}
    probe = subprocess.run([str(VENV / "bin" / "python"), "-c", "import agents.train.trainer"], env=env, capture_output=True, check=False, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"the server venv cannot import the trainer: {probe.stderr.decode()[-300:]}")
    config = {**BASE, "learner": {"kl_coef": BASE["learner"].kl_coef}, "out_dir": str(tmp_path / "run"), "steps": 1,
              "env": {**BASE["env"], "options": {"retriever": "rank_bm25"}},  # the server venv has no numba for bm25s
              "rollout": {**BASE["rollout"], "sglang_urls": [real_server.url], "weight_sync": "tensors", "sglang_timeout_s": 120.0}}
    # Output to a file, not a pipe: the torch_shm_manager daemon that CPU tensor sharing starts inherits the
    # child's streams and lives as long as the server holds the shared segments.
    log = tmp_path / "child.log"
    with open(log, "w") as out:
        done = subprocess.run([str(VENV / "bin" / "python"), "-c", TENSOR_STEP, json.dumps(config)], env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False, timeout=600)
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    result = json.loads(text.strip().splitlines()[-1])
    assert result["version"] == "3" and result["tokens"] > 0
    assert result["ratio"] == pytest.approx(1.0, abs=TOL)
    from safetensors.torch import load_file

    trained = load_file(str(tmp_path / "run" / "checkpoints" / "step-000001" / "policy.safetensors"))
    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    missing, unexpected = model.load_state_dict(trained, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied to the embeddings
    assert serves(real_server.url, tok, model)
