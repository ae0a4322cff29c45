"""Seeded group sampling through SGLangPolicy: every sample of a prompt gets its own `sampling_seed`.

The fake server samples each request with a tiny HF model seeded by the request's `sampling_seed`, which
is what a server started with `--enable-deterministic-inference` does: one shared seed would give a
GRPO group of identical samples.
"""

from __future__ import annotations

import pytest

from agents.policies import FanOutPolicy, SamplingParams
from agents.policies.fanout import FanOutPolicy as FanOutFromModule
from agents.policies.sglang import sample_seed
from searchgym.errors import ConfigError
from tests.agents import test_sglang_client
from tests.agents.fake_sglang import FakeSGLang

served = test_sglang_client.served  # (fake server, client policy, backing model, tokenizer) over loopback


def generate_bodies(fake: FakeSGLang) -> list[dict]:
    return [b for _, p, b in fake.calls if p == "/generate"]


def test_sample_seeds_differ_per_sample_and_fit_31_bits():
    seeds = [sample_seed(12345, j) for j in range(64)]
    assert len(set(seeds)) == 64
    assert all(0 <= s < 2**31 for s in seeds)
    assert sample_seed(12345, 3) == sample_seed(12345, 3)
    assert sample_seed(12345, 0) != sample_seed(12346, 0)
    assert 0 <= sample_seed(-7, 0) < 2**31


def test_a_seeded_group_sends_one_request_per_sample_with_its_own_seed(served):
    fake, policy, _, tok = served
    prompts = [tok.encode("Who discovered radioactivity?", add_special_tokens=False), tok.encode("x", add_special_tokens=False)]
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8, stop_token_ids=(), seed=99)
    outs = policy.generate(prompts, params)
    assert [len(g) for g in outs] == [4, 4]
    bodies = generate_bodies(fake)
    assert len(bodies) == 8
    for i, prompt in enumerate(prompts):
        mine = [b for b in bodies if b["input_ids"] == prompt]
        assert [b["sampling_params"]["n"] for b in mine] == [1, 1, 1, 1]
        assert sorted(b["sampling_params"]["sampling_seed"] for b in mine) == sorted(sample_seed(99, 4 * i + j) for j in range(4))
    # Each sample is what the seeded sampler draws for its seed: a second call repeats the group exactly,
    # and the group's samples are not copies of one sample.
    again = policy.generate(prompts, params)
    assert [[c.token_ids for c in g] for g in again] == [[c.token_ids for c in g] for g in outs]
    for group in outs:
        assert len({tuple(c.token_ids) for c in group}) > 1


def test_sample_j_of_a_seeded_group_is_the_single_sample_with_its_seed(served):
    _, policy, _, tok = served
    prompt = tok.encode("Who discovered radioactivity?", add_special_tokens=False)
    group = policy.generate([prompt], SamplingParams(n=3, max_new_tokens=6, stop_token_ids=(), seed=5))[0]
    for j, c in enumerate(group):
        alone = policy.generate([prompt], SamplingParams(n=1, max_new_tokens=6, stop_token_ids=(), seed=sample_seed(5, j)))[0][0]
        assert alone.token_ids == c.token_ids and alone.logprobs == c.logprobs


def test_equal_prompts_of_one_seeded_call_get_different_seeds(served):
    fake, policy, _, tok = served
    prompt = tok.encode("x", add_special_tokens=False)
    outs = policy.generate([prompt, prompt], SamplingParams(n=1, max_new_tokens=6, stop_token_ids=(), seed=3))
    seeds = [b["sampling_params"]["sampling_seed"] for b in generate_bodies(fake)]
    assert sorted(seeds) == sorted([sample_seed(3, 0), sample_seed(3, 1)])
    assert outs[0][0].token_ids != outs[1][0].token_ids


def test_unseeded_groups_keep_one_request_with_n(served):
    fake, policy, _, tok = served
    policy.generate([tok.encode("x", add_special_tokens=False)], SamplingParams(n=3, max_new_tokens=4, stop_token_ids=()))
    bodies = generate_bodies(fake)
    assert len(bodies) == 1 and bodies[0]["sampling_params"]["n"] == 3 and "sampling_seed" not in bodies[0]["sampling_params"]


def test_a_seeded_single_request_with_n_above_one_is_refused(served):
    _, policy, _, _ = served
    with pytest.raises(ConfigError, match="own sampling_seed"):
        policy.request_payload([1, 2, 3], SamplingParams(n=2, seed=1), 4)
    assert policy.request_payload([1, 2, 3], SamplingParams(n=1, seed=1), 4)["sampling_params"]["sampling_seed"] == 1


def test_fanout_policy_is_exported_from_the_package():
    assert FanOutPolicy is FanOutFromModule
