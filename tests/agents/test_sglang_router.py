"""RouterPolicy through the real `sglang-router` in front of two loopback SGLang stand-ins.

Each stand-in samples with its own copy of one tiny model, so ids and logprobs can be checked against
forward passes, and weights pushed through the router's worker list can be compared with the trained
ones. Skipped with the reason when the `sglang-router` package is absent or its router will not start.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model, save_model
from agents.policies import Policy, SamplingParams
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.policies.http import HTTPConfig
from agents.policies.router import RouterPolicy, RouterPolicyConfig
from agents.policies.router_server import SGLangRouter, SGLangRouterConfig
from searchgym.errors import BackendError, ConfigError
from tests.agents.fake_sglang import FakeSGLang
from tests.agents.test_hf_policy import rescored

pytestmark = pytest.mark.server

# No client retries: a request that reaches a dead worker must be rerouted by the router itself, within
# one client attempt of at most 10 s.
ONE_TRY = HTTPConfig(timeout_s=10.0, connect_timeout_s=1.0, retries=0, backoff_s=0.05)


@pytest.fixture
def routed(tmp_path):
    """(router policy, [fake A, fake B], tokenizer): both fakes serve the tiny model of seed 0."""
    if importlib.util.find_spec("sglang_router") is None:
        pytest.skip("sglang-router is not installed (pip install sglang-router)")
    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    fakes = [
        FakeSGLang(
            HFPolicy(build_tiny_model(TinyModelConfig(seed=0))[0], tok, config=HFPolicyConfig(seed=s, dtype="float32")),
            model_path="tiny",
            tokenizer_path=None,
        )
        for s in (0, 1)
    ]
    for f in fakes:
        f.__enter__()
    # Round robin so that the spread is certain; health checks rarely, so that rerouting is the router's
    # retry on a refused connection, not a health check that happened to run first.
    config = SGLangRouterConfig(
        worker_urls=tuple(f.url for f in fakes),
        policy="round_robin",
        extra_args=("--health-check-interval-secs", "300", "--log-level", "warn"),
    )
    router = SGLangRouter(config)
    try:
        router.start()
    except BackendError as e:
        for f in fakes:
            f.__exit__()
        pytest.skip(f"sglang-router would not start here: {e}")
    policy = RouterPolicy(RouterPolicyConfig(url=router.url, http=ONE_TRY), tokenizer=tok)
    try:
        yield policy, fakes, tok, model
    finally:
        policy.close()
        router.stop()
        for f in fakes:
            try:
                f.__exit__()
            except OSError:
                pass


def generate_calls(fake: FakeSGLang) -> int:
    return fake.paths().count("/generate")


def test_rollouts_are_spread_over_the_workers_and_token_exact(routed):
    policy, fakes, tok, model = routed
    assert isinstance(policy, Policy)
    assert sorted(w.url for w in policy.workers()) == sorted(f.url for f in fakes)
    prompts = [tok.encode(f"question {i}", add_special_tokens=False) for i in range(6)]
    params = SamplingParams(n=2, temperature=0.9, max_new_tokens=5, stop_token_ids=())
    groups = policy.generate(prompts, params)
    assert [len(g) for g in groups] == [2] * 6
    assert generate_calls(fakes[0]) >= 1 and generate_calls(fakes[1]) >= 1
    assert generate_calls(fakes[0]) + generate_calls(fakes[1]) == 6  # one request per prompt, n samples each
    for prompt, group in zip(prompts, groups):
        for c in group:
            assert torch.allclose(rescored(model, prompt, c.token_ids, 0.9), torch.tensor(c.logprobs), atol=1e-4)


def test_a_weight_push_reaches_every_worker_and_is_checked_on_each(routed, tmp_path):
    policy, fakes, tok, _ = routed
    new_model, _ = build_tiny_model(TinyModelConfig(seed=3))
    folder = save_model(new_model, tok, tmp_path / "step-1")
    policy.load_weights(folder)
    assert policy.weight_version == 1 and policy.removed == []
    expected = new_model.state_dict()
    for fake in fakes:
        assert fake.weight_version == "1"
        assert fake.paths()[-1] in ("/get_model_info", "/model_info")  # the version was read back from it
        served = fake.policy.model.state_dict()
        assert all(torch.equal(served[k], expected[k]) for k in expected)
    assert [m.weight_version for m in policy.members] == [1, 1]
    prompt = tok.encode("Which river flows through Rome?", add_special_tokens=False)
    for _ in range(2):  # both workers, by round robin
        out = policy.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=6, stop_token_ids=()))[0][0]
        assert out.meta["weight_version"] == "1"
        assert torch.allclose(rescored(new_model, prompt, out.token_ids, 0.0), torch.tensor(out.logprobs), atol=1e-4)


def test_a_dead_worker_is_routed_around_and_dropped_by_the_next_push(routed, tmp_path):
    policy, (alive, dead), tok, _ = routed
    dead.__exit__()  # connections to it are now refused
    before = generate_calls(alive)
    prompts = [tok.encode(f"q{i}", add_special_tokens=False) for i in range(4)]
    groups = policy.generate(prompts, SamplingParams(max_new_tokens=3, stop_token_ids=()))  # one try, no client retry
    assert all(len(g) == 1 and g[0].token_ids for g in groups)
    assert generate_calls(alive) - before == 4
    new_model, _ = build_tiny_model(TinyModelConfig(seed=3))
    policy.load_weights(save_model(new_model, tok, tmp_path / "step-1"))
    assert policy.removed == [dead.url]
    assert [w.url for w in policy.workers()] == [alive.url] and alive.weight_version == "1"


def test_raise_mode_names_the_worker_that_missed_the_push(routed, tmp_path):
    policy, (_, dead), tok, _ = routed
    strict = RouterPolicy(
        RouterPolicyConfig(url=policy.config.url, http=ONE_TRY, on_stale_worker="raise"), tokenizer=tok
    )
    try:
        dead.__exit__()
        new_model, _ = build_tiny_model(TinyModelConfig(seed=3))
        with pytest.raises(BackendError, match=dead.url.replace(".", r"\.")):
            strict.load_weights(save_model(new_model, tok, tmp_path / "step-1"))
        assert strict.weight_version == 0 and len(strict.workers()) == 2
    finally:
        strict.close()


def test_a_completion_from_another_weight_version_is_an_error(routed, tmp_path):
    policy, fakes, tok, _ = routed
    new_model, _ = build_tiny_model(TinyModelConfig(seed=3))
    policy.load_weights(save_model(new_model, tok, tmp_path / "step-1"))
    fakes[1].weight_version = "0"  # as a worker restarted with the old checkpoint would report
    with pytest.raises(BackendError, match="weight version"):
        policy.generate([[5, 6]] * 4, SamplingParams(max_new_tokens=2, stop_token_ids=()))


def test_configs_reject_bad_values():
    with pytest.raises(ConfigError, match="http"):
        RouterPolicyConfig(url="localhost:30000")
    with pytest.raises(ConfigError, match="on_stale_worker"):
        RouterPolicyConfig(on_stale_worker="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least one"):
        SGLangRouterConfig(worker_urls=())
    with pytest.raises(ConfigError, match="policy"):
        SGLangRouterConfig(worker_urls=("http://127.0.0.1:1",), policy="fastest")  # type: ignore[arg-type]
