"""KV reuse across turns: kept rows give the same tokens and logprobs as prefilling from scratch, are used
only for prompts that extend them, and never outlive a weight change; the growing cache layer behaves like
transformers' own."""

from __future__ import annotations

import pytest
import torch

from agents.policies import SamplingParams
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.rollout import RolloutConfig, RolloutEngine
from tests.agents.test_hf_policy import TOLERANCE, rescored
from tests.agents.test_rollout_exact import check_sampler_logprobs, check_token_exact

TOL = 1e-4


def _rollouts(tiny, make_env, reuse: bool, temperature: float, max_batch_rows: int = 64, dtype: str = "float32"):
    model, tok = tiny
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, reuse_kv=reuse, max_batch_rows=max_batch_rows, dtype=dtype))
    config = RolloutConfig(group_size=3, temperature=temperature, max_turn_tokens=10, max_response_tokens=400, seed=4)
    engine = RolloutEngine(policy, make_env(max_turns=3), config)
    return engine.rollout([{"options": {"index": i}} for i in (0, 2, 1)]), policy


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_reuse_gives_the_rollouts_of_a_fresh_prefill(tiny, make_env, temperature, dtype):
    """In bfloat16 the kept keys are stored in bfloat16, as the attention reads them."""
    with_reuse, reusing = _rollouts(tiny, make_env, True, temperature, dtype=dtype)
    without, fresh = _rollouts(tiny, make_env, False, temperature, dtype=dtype)
    # The tiny model writes no valid action, so every episode runs several turns and later turns reuse rows.
    assert max(t.num_turns for t in with_reuse) > 1
    assert reusing.stats.reused_tokens > 0 and fresh.stats.reused_tokens == 0
    assert reusing.stats.prefill_tokens + reusing.stats.reused_tokens == fresh.stats.prefill_tokens
    assert [t.token_ids for t in with_reuse] == [t.token_ids for t in without]
    for a, b in zip(with_reuse, without):
        assert a.loss_mask == b.loss_mask
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=TOLERANCE[dtype])
    model, tok = tiny
    for t in with_reuse:
        check_token_exact(t, tok)
    check_sampler_logprobs(with_reuse, model, tok.pad_token_id, atol=TOLERANCE[dtype], temperature=temperature if temperature else 1.0,
                           dtype=reusing.compute_dtype)


def test_reuse_works_across_chunks(tiny, make_env):
    """Rows kept by one chunk of a call are found by prompts that land in another chunk of the next call
    (greedy: chunks draw their random numbers in another order)."""
    chunked, policy = _rollouts(tiny, make_env, True, 0.0, max_batch_rows=2)
    whole, _ = _rollouts(tiny, make_env, False, 0.0)
    assert policy.stats.reused_tokens > 0
    assert [t.token_ids for t in chunked] == [t.token_ids for t in whole]


def _continue(policy: HFPolicy, tok, prompt: list[int]) -> tuple[list[int], list[int]]:
    """One turn from `prompt`, then the continuation prompt the next turn would send (turn + observation)."""
    params = SamplingParams(temperature=0.0, max_new_tokens=5, stop_token_ids=())
    first = policy.generate([prompt], params)[0][0]
    return first.token_ids, prompt + first.token_ids + tok.encode(" <information> Tiber </information>", add_special_tokens=False)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_only_prompts_extending_a_kept_row_reuse_it(tiny, dtype):
    model, tok = tiny
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype=dtype))
    prompt = tok.encode("Which river flows through Rome?", add_special_tokens=False)
    _, following = _continue(policy, tok, prompt)
    unrelated = tok.encode("Something else entirely", add_special_tokens=False)
    before = policy.stats.copy()
    params = SamplingParams(temperature=0.0, max_new_tokens=4, stop_token_ids=())
    outs = policy.generate([following, unrelated], params)
    # The kept row covers the prompt and every sampled token but the last one.
    assert policy.stats.reused_tokens - before.reused_tokens == len(prompt) + 4
    assert policy.stats.prefill_tokens - before.prefill_tokens == (len(following) - len(prompt) - 4) + len(unrelated)
    for p, group in zip([following, unrelated], outs):
        ref = rescored(model, p, group[0].token_ids, 0.0, dtype)
        assert torch.allclose(ref, torch.tensor(group[0].logprobs), atol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_kept_rows_are_dropped_when_the_weights_change_in_place(tiny, dtype):
    """An optimizer step modifies the shared model in place without telling the policy: the rows computed
    by the old weights must not be reused, and in bfloat16 the sampler's copy of the weights follows."""
    from agents.models import TinyModelConfig, build_tiny_model

    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype=dtype))
    prompt = tok.encode("Which river flows through Rome?", add_special_tokens=False)
    _, following = _continue(policy, tok, prompt)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.05)
    before = policy.stats.copy()
    params = SamplingParams(temperature=0.0, max_new_tokens=4, stop_token_ids=())
    out = policy.generate([following], params)[0][0]
    assert policy.stats.reused_tokens == before.reused_tokens
    ref = rescored(model, following, out.token_ids, 0.0, dtype)
    assert torch.allclose(ref, torch.tensor(out.logprobs), atol=TOLERANCE[dtype])


def test_growing_layer_matches_transformers_dynamic_layer():
    from transformers.cache_utils import DynamicLayer

    from agents.policies.kv import GrowingLayer

    torch.manual_seed(0)
    grow, plain = GrowingLayer(), DynamicLayer()
    for width in (7, 1, 1, 70, 1):  # 70 forces the buffer to grow
        k, v = torch.randn(3, 2, width, 4), torch.randn(3, 2, width, 4)
        gk, gv = grow.update(k, v)
        pk, pv = plain.update(k, v)
        assert torch.equal(gk, pk) and torch.equal(gv, pv)
        assert grow.get_seq_length() == plain.get_seq_length()
    index = torch.tensor([2, 0])
    grow.batch_select_indices(index)
    plain.batch_select_indices(index)
    grow.batch_repeat_interleave(2)
    plain.batch_repeat_interleave(2)
    k, v = torch.randn(4, 2, 1, 4), torch.randn(4, 2, 1, 4)
    assert torch.equal(grow.update(k, v)[0], plain.update(k, v)[0])
    columns = torch.tensor([0, 5, 79])
    kk, vv = grow.row(1, columns)
    assert torch.equal(kk, plain.keys[1][:, columns]) and torch.equal(vv, plain.values[1][:, columns])


def test_fill_rows_right_aligns_kept_rows_over_zeros_and_selection_moves_rows_in_place():
    from agents.policies.kv import GrowingLayer

    torch.manual_seed(0)
    a, b = (torch.randn(3, 4, 2), torch.randn(3, 4, 2)), (torch.randn(3, 2, 2), torch.randn(3, 2, 2))
    layer = GrowingLayer()
    layer.fill_rows([a, None, b], width=5, capacity=9)
    assert layer.keys.shape == (3, 3, 5, 2) and layer._k.shape[2] == 9
    assert torch.equal(layer.keys[0, :, 1:], a[0]) and torch.equal(layer.values[2, :, 3:], b[1])
    assert not layer.keys[0, :, :1].any() and not layer.keys[1].any() and not layer.values[2, :, :3].any()
    new_k, new_v = torch.randn(3, 3, 1, 2), torch.randn(3, 3, 1, 2)
    layer.update(new_k, new_v)
    before_k, before_v = layer.keys.clone(), layer.values.clone()
    storage = layer._k.untyped_storage().data_ptr()
    layer.batch_select_indices(torch.tensor([1, 2]))
    assert torch.equal(layer.keys, before_k[[1, 2]]) and torch.equal(layer.values, before_v[[1, 2]])
    assert layer._k.untyped_storage().data_ptr() == storage  # moved within its buffer, nothing allocated
    layer.batch_select_indices(torch.tensor([1, 0]))  # any other order still gathers
    assert torch.equal(layer.keys, before_k[[2, 1]])


def test_a_kept_row_is_one_allocation_for_every_layer_and_reads_back_per_layer():
    """A finished row's keys and values are kept in two tensors over all layers (a per-layer list only where
    the layers' shapes differ), and `kv[layer]` gives back each layer's row exactly."""
    from agents.policies.kv import GrowingLayer, RowKV

    torch.manual_seed(0)
    layers = [GrowingLayer(), GrowingLayer(), GrowingLayer()]
    for layer in layers:
        layer.update(torch.randn(2, 3, 9, 4), torch.randn(2, 3, 9, 4))
    columns = torch.tensor([1, 2, 8])
    kv = RowKV.of_row(layers, 1, columns)
    assert isinstance(kv, RowKV) and len(kv) == 3 and kv.keys.shape == (3, 3, 3, 4)
    assert kv.nbytes == 2 * 3 * 3 * 3 * 4 * 4
    for i, layer in enumerate(layers):
        k, v = layer.row(1, columns)
        assert torch.equal(kv[i][0], k) and torch.equal(kv[i][1], v)
    odd = [GrowingLayer(), GrowingLayer()]
    odd[0].update(torch.randn(2, 3, 9, 4), torch.randn(2, 3, 9, 4))
    odd[1].update(torch.randn(2, 1, 9, 4), torch.randn(2, 1, 9, 4))  # fewer heads: not stackable
    mixed = RowKV.of_row(odd, 0, columns)
    assert isinstance(mixed, list) and [k.shape[0] for k, _ in mixed] == [3, 1]
    assert torch.equal(mixed[1][1], odd[1].values[0][:, columns])


def test_a_seed_samples_the_same_tokens_with_and_without_kept_rows(tiny):
    """A row's place in the batch decides which random numbers it samples with: kept rows must not reorder
    the batch. Here the shorter second-turn prompt has more new tokens to prefill than the longer one."""
    model, tok = tiny
    short = tok.encode("Rome?", add_special_tokens=False)
    long = tok.encode("Which river flows through the old city of Rome, past the castle and the bridges?", add_special_tokens=False)
    first = SamplingParams(temperature=1.0, max_new_tokens=3, stop_token_ids=(), seed=5)
    then = SamplingParams(temperature=1.0, max_new_tokens=8, stop_token_ids=(), seed=6)
    outs = {}
    for reuse in (True, False):
        policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, reuse_kv=reuse))
        a, b = (g[0].token_ids for g in policy.generate([short, long], first))
        following = [short + a + tok.encode(" <information> rivers and castles </information>",
                                            add_special_tokens=False),
                     long + b + tok.encode(" ok", add_special_tokens=False)]
        assert len(following[0]) < len(following[1]) and len(following[0]) - len(short) > len(following[1]) - len(long)
        outs[reuse] = [g[0].token_ids for g in policy.generate(following, then)]
        assert (policy.stats.reused_tokens > 0) == reuse
    assert outs[True] == outs[False]


def test_kept_rows_stay_within_their_memory_budget(tiny, make_env):
    """With no room, no row is kept and every turn is prefilled in full; the rollouts do not change."""
    model, tok = tiny
    results = {}
    for gb in (0.0, 2.0):
        policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, max_kept_gb=gb))
        engine = RolloutEngine(policy, make_env(max_turns=3), RolloutConfig(group_size=2, temperature=0.0, max_turn_tokens=8,
                                                                            max_response_tokens=300))
        trajectories = engine.rollout([{"options": {"index": 0}}, {"options": {"index": 1}}])
        results[gb] = ([t.token_ids for t in trajectories], policy.stats.reused_tokens, policy._kept.rows)
    assert results[0.0][1] == 0 and results[0.0][2] == []
    assert results[2.0][1] > 0
    assert results[0.0][0] == results[2.0][0]


def test_questions_run_in_waves_that_the_kept_rows_hold(tiny, make_env):
    """With room for the rows of two episodes, five questions run two at a time on two envs, every later turn
    still reusing its episode's row: the same episodes (greedy) and the same prefill as all five at once."""
    model, tok = tiny
    config = RolloutConfig(group_size=1, temperature=0.0, max_turn_tokens=10, max_response_tokens=400)
    specs = [{"options": {"index": i % 3}} for i in range(5)]

    def run(max_kept_gb: float):
        policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype="float32", max_kept_gb=max_kept_gb))
        engine = RolloutEngine(policy, make_env(max_turns=3), config)
        return engine.rollout(specs), engine, policy

    whole, engine, policy = run(2.0)
    assert len(engine._envs) == 5
    first = whole[0].prompt_length + config.max_response_tokens  # the first question sizes the waves
    waves, engine, small = run(2.5 * first * policy.kv_bytes_per_token() / 1e9)
    assert small.episodes_at_once(first) == 2
    assert len(engine._envs) == 2
    assert [t.group for t in waves] == list(range(5))
    assert [t.token_ids for t in waves] == [t.token_ids for t in whole]
    assert max(t.num_turns for t in whole) > 1
    assert small.stats.reused_tokens == policy.stats.reused_tokens > 0
    assert small.stats.prefill_tokens == policy.stats.prefill_tokens


def test_the_last_calls_rows_are_freed_chunk_by_chunk_as_this_call_reads_them(tiny):
    """A call holds the previous call's kept rows only until the chunk that continues them has read them into
    its cache: by the time a later chunk decodes, the rows an earlier chunk reused are gone (so the last
    call's rows and this call's add up to about one budget, not two)."""
    import gc
    import weakref

    model, tok = tiny
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, max_batch_rows=1))
    prompts = [tok.encode(q, add_special_tokens=False) for q in ("Which river flows through Rome?", "Who built the old bridge?")]
    params = SamplingParams(temperature=0.0, max_new_tokens=4, stop_token_ids=())
    firsts = policy.generate(prompts, params)
    old = {len(r.ids): weakref.ref(r.kv.keys) for r in policy._kept.rows}
    assert len(old) == 2
    following = [p + f[0].token_ids + tok.encode(" <information> Tiber </information>", add_special_tokens=False)
                 for p, f in zip(prompts, firsts)]
    alive_at_chunk = []
    decode = policy._decode

    def counting(chunk_prompts, *args):
        gc.collect()
        alive_at_chunk.append(sum(ref() is not None for ref in old.values()))
        return decode(chunk_prompts, *args)

    policy._decode = counting
    before = policy.stats.copy()
    policy.generate(following, params)
    assert policy.stats.reused_tokens - before.reused_tokens == sum(old)  # both continuations reused their rows
    assert alive_at_chunk == [2, 1]  # the first chunk's row was freed before the second chunk decoded
    gc.collect()
    assert all(ref() is None for ref in old.values())
