"""HFPolicy: sampled logprobs equal a teacher-forced forward pass; budgets, stops, seeds and weight updates."""

from __future__ import annotations

import math

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model, save_model
from agents.policies import Policy, SamplingParams
from agents.policies.hf import HFPolicy, HFPolicyConfig, sample_tokens
from agents.rollout.batch import token_logprobs
from searchgym.errors import BatchError, ConfigError, DataError

TOL = 1e-4

TOLERANCE = {"float32": TOL, "bfloat16": 1e-2}
"""How far the sampler's logprob of a token may be from a teacher-forced forward pass of the same weights at
the same precision. float32: the two differ only in summation order. bfloat16 keeps 8 significant bits, and a
decode step (one row of keys at a time, from a cache) and the teacher-forced pass (every position at once)
accumulate each product in another order, so a rounding to bfloat16 can fall on either side: one such step
moves a logit of the tiny model (|logit| < 2) by up to 2^-8, and a logprob by twice that. 1e-2 allows a few
(measured on this model: at most 5e-4; SmolLM2-135M, with 30 layers: median 0.01, at most 0.16)."""


def rescored(model, prompt: list[int], completion: list[int], temperature: float, dtype: str = "float32") -> torch.Tensor:
    """log_softmax(logits / T) of each completion token, from one unpadded forward pass at `dtype`."""
    ids = torch.tensor([prompt + completion])
    if dtype != "float32":
        with torch.no_grad():
            return token_logprobs(model, ids, torch.ones_like(ids), temperature=temperature, dtype=getattr(torch, dtype))[0, len(prompt) :]
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    scale = 1.0 if temperature == 0 else temperature
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1] / scale, dim=-1)
    return logp.gather(1, torch.tensor(completion)[:, None])[:, 0]


def test_hf_policy_satisfies_the_protocol(tiny_policy):
    assert isinstance(tiny_policy, Policy)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("temperature,top_p,top_k", [(1.0, 1.0, 0), (0.7, 0.9, 0), (1.3, 1.0, 20), (0.0, 1.0, 0)])
def test_logprobs_match_teacher_forcing(tiny, temperature, top_p, top_k, dtype):
    model, tok = tiny
    tiny_policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype=dtype))
    # Prompts of different lengths, so batching needs left padding.
    prompts = [tok.encode(t, add_special_tokens=False) for t in ("Who discovered radioactivity?", "a", "<search> river </search> then")]
    params = SamplingParams(n=2, temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=12, stop_token_ids=())
    outs = tiny_policy.generate(prompts, params)
    assert [len(o) for o in outs] == [2, 2, 2]
    for prompt, group in zip(prompts, outs):
        for c in group:
            assert len(c.token_ids) == 12 and c.finish_reason == "length"
            ref = rescored(model, prompt, c.token_ids, temperature, dtype)
            assert torch.allclose(ref, torch.tensor(c.logprobs), atol=TOLERANCE[dtype]), (ref, c.logprobs)
            assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)


def test_greedy_is_the_argmax_and_samples_agree(tiny, tiny_policy):
    model, tok = tiny
    prompt = tok.encode("The capital of France", add_special_tokens=False)
    outs = tiny_policy.generate([prompt], SamplingParams(n=3, temperature=0.0, max_new_tokens=6, stop_token_ids=()))[0]
    assert outs[0].token_ids == outs[1].token_ids == outs[2].token_ids
    ids = list(prompt)
    for t in outs[0].token_ids:
        with torch.no_grad():
            assert int(model(torch.tensor([ids])).logits[0, -1].argmax()) == t
        ids.append(t)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_per_prompt_budgets_and_chunking(tiny, dtype):
    model, tok = tiny
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=1, max_batch_rows=2, dtype=dtype))  # 3 prompts x n=2 -> 3 chunks
    prompts = [tok.encode(t, add_special_tokens=False) for t in ("one", "two two", "three three three")]
    outs = policy.generate(prompts, SamplingParams(n=2, max_new_tokens=9, stop_token_ids=()), max_new_tokens=[3, 9, 5])
    assert [[len(c.token_ids) for c in g] for g in outs] == [[3, 3], [9, 9], [5, 5]]
    for prompt, group in zip(prompts, outs):
        for c in group:
            assert torch.allclose(rescored(model, prompt, c.token_ids, 1.0, dtype), torch.tensor(c.logprobs), atol=TOLERANCE[dtype])


def test_stop_strings_end_generation_at_the_completing_token(tiny, tiny_policy):
    _, tok = tiny
    prompt = tok.encode("x", add_special_tokens=False)
    # Sample freely, then pick a 2-character string the sampler produced and use it as a stop string.
    free = tiny_policy.generate([prompt], SamplingParams(max_new_tokens=40, stop_token_ids=(), seed=3))[0][0]
    text = free.text
    stop = next(text[i : i + 2] for i in range(5, len(text) - 2) if text[i : i + 2].isprintable() and text[i : i + 2].strip())
    again = tiny_policy.generate([prompt], SamplingParams(max_new_tokens=40, stop_token_ids=(), stop=(stop,), seed=3))[0][0]
    assert again.finish_reason == "stop" and again.matched_stop == stop
    assert again.token_ids == free.token_ids[: len(again.token_ids)]
    assert stop in again.text
    # The last token completes the first occurrence: without it the stop string is absent.
    assert stop not in tok.decode(again.token_ids[:-1])
    assert again.text.find(stop) == text.find(stop)


def test_stop_token_ids_end_generation(tiny, tiny_policy):
    _, tok = tiny
    prompt = tok.encode("y", add_special_tokens=False)
    free = tiny_policy.generate([prompt], SamplingParams(max_new_tokens=20, stop_token_ids=(), seed=5))[0][0]
    stop_id = free.token_ids[4]
    cut = tiny_policy.generate([prompt], SamplingParams(max_new_tokens=20, stop_token_ids=(stop_id,), seed=5))[0][0]
    first = free.token_ids.index(stop_id)
    assert cut.token_ids == free.token_ids[: first + 1]
    assert cut.finish_reason == "stop" and cut.matched_stop == stop_id


def test_seeds_make_sampling_reproducible(tiny_policy, tiny):
    _, tok = tiny
    prompt = tok.encode("seeded", add_special_tokens=False)
    a = tiny_policy.generate([prompt], SamplingParams(n=2, max_new_tokens=10, seed=7, stop_token_ids=()))[0]
    b = tiny_policy.generate([prompt], SamplingParams(n=2, max_new_tokens=10, seed=7, stop_token_ids=()))[0]
    c = tiny_policy.generate([prompt], SamplingParams(n=2, max_new_tokens=10, seed=8, stop_token_ids=()))[0]
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [x.token_ids for x in a] != [x.token_ids for x in c]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_weight_updates_change_logprobs_as_the_new_weights_predict(tiny, tmp_path, dtype):
    """With bfloat16, the sampler's copy of the linear weights follows the loaded weights."""
    model_a, tok = build_tiny_model(TinyModelConfig(seed=0))
    model_b, _ = build_tiny_model(TinyModelConfig(seed=1))
    save_model(model_b, tok, tmp_path / "b")
    policy = HFPolicy(model_a, tok, config=HFPolicyConfig(seed=0, dtype=dtype))
    prompt = tok.encode("Which river flows through Rome?", add_special_tokens=False)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=8, stop_token_ids=())
    before = policy.generate([prompt], greedy)[0][0]
    policy.load_weights(tmp_path / "b")
    assert policy.weight_version == 1
    after = policy.generate([prompt], greedy)[0][0]
    fresh_b, _ = build_tiny_model(TinyModelConfig(seed=1))
    assert torch.allclose(rescored(fresh_b, prompt, after.token_ids, 0.0, dtype), torch.tensor(after.logprobs), atol=TOLERANCE[dtype])
    assert after.token_ids != before.token_ids or not torch.allclose(torch.tensor(after.logprobs), torch.tensor(before.logprobs))
    # And back, through named tensors.
    policy.update_weights(build_tiny_model(TinyModelConfig(seed=0))[0].state_dict().items())
    assert policy.generate([prompt], greedy)[0][0].token_ids == before.token_ids
    assert policy.weight_version == 2


def test_weight_update_errors(tiny_policy, tmp_path):
    with pytest.raises(BatchError, match="not in the model"):
        tiny_policy.update_weights([("no.such.weight", torch.zeros(1))])
    name, tensor = next(iter(tiny_policy.model.state_dict().items()))
    with pytest.raises(BatchError, match="shape"):
        tiny_policy.update_weights([(name, torch.zeros(tensor.numel() + 1))])
    with pytest.raises(DataError, match="safetensors"):
        tiny_policy.load_weights(tmp_path)


def test_bad_requests_raise_config_errors(tiny_policy):
    with pytest.raises(ConfigError):
        tiny_policy.generate([[]], SamplingParams())
    with pytest.raises(ConfigError):
        tiny_policy.generate([[1, 2]], SamplingParams(max_new_tokens=4), max_new_tokens=[5])
    with pytest.raises(ConfigError):
        tiny_policy.generate([[1, 2]], SamplingParams(), max_new_tokens=[1, 2])
    for bad in ({"n": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"top_k": -1}, {"max_new_tokens": 0}, {"stop": ["x"]}, {"stop": ("",)}):
        with pytest.raises(ConfigError):
            SamplingParams(**bad)
    with pytest.raises(ConfigError):
        HFPolicyConfig(max_batch_rows=0)


def test_generation_leaves_a_training_model_in_training_mode(tiny):
    model, tok = build_tiny_model(TinyModelConfig(seed=2))
    model.train()
    HFPolicy(model, tok).generate([[5, 6]], SamplingParams(max_new_tokens=2))
    assert model.training


def test_sample_tokens_on_literal_logits():
    # probs of [ln 4, ln 2, ln 1, ln 1] -> [0.5, 0.25, 0.125, 0.125]
    logits = torch.log(torch.tensor([[4.0, 2.0, 1.0, 1.0]]))
    g = torch.Generator().manual_seed(0)
    # top_p 0.5: the mass before token 0 is 0 < 0.5, before token 1 it is 0.5 -> only token 0 survives.
    for _ in range(20):
        tok, lp = sample_tokens(logits, SamplingParams(top_p=0.5), g)
        assert tok.item() == 0 and math.isclose(lp.item(), math.log(0.5), abs_tol=1e-6)
    # top_k 2 keeps tokens 0 and 1; the reported logprob is still the unfiltered one.
    seen = set()
    for _ in range(50):
        tok, lp = sample_tokens(logits, SamplingParams(top_k=2), g)
        seen.add(tok.item())
        assert math.isclose(lp.item(), math.log([0.5, 0.25, 0.125, 0.125][tok.item()]), abs_tol=1e-6)
    assert seen == {0, 1}
    # temperature 0.5 squares the odds: [16, 4, 1, 1] / 22.
    tok, lp = sample_tokens(logits, SamplingParams(temperature=0.5, top_k=1), g)
    assert tok.item() == 0 and math.isclose(lp.item(), math.log(16 / 22), abs_tol=1e-6)
