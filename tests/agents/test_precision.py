"""The policy's precision setting: what `auto` picks, and the bfloat16 path's exact identities (the sampler's
copy of the weights and the frozen reference give the numbers of autocast over the float32 model; the
vocabulary projection stays float32; gradients and weights stay float32)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model
from agents.precision import LinearCopy, autocast, compute_dtype, dtype_name, frozen_copy, output_logits
from agents.rollout.batch import token_logprobs
from agents.train.checkpoint import trainable_state
from searchgym.errors import ConfigError

FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr avx2 avx512f avx512bw"


def _cpuinfo(tmp_path, name: str, flags: str) -> str:
    path = tmp_path / name
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
    return str(path)


def test_auto_is_bfloat16_only_on_a_cpu_with_native_bfloat16(tmp_path):
    native = _cpuinfo(tmp_path, "native", FLAGS + " avx512_bf16")
    amx = _cpuinfo(tmp_path, "amx", FLAGS + " amx_bf16 amx_tile")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics bf16 i8mm\n")
    plain = _cpuinfo(tmp_path, "plain", FLAGS)
    assert compute_dtype("auto", "cpu", cpuinfo=native) == torch.bfloat16
    assert compute_dtype("auto", "cpu", cpuinfo=amx) == torch.bfloat16
    assert compute_dtype("auto", "cpu", cpuinfo=str(arm)) == torch.bfloat16
    assert compute_dtype("auto", "cpu", cpuinfo=plain) == torch.float32
    assert compute_dtype("auto", "cpu", cpuinfo=str(tmp_path / "absent")) == torch.float32  # no /proc/cpuinfo: macOS, Windows
    assert compute_dtype("auto", "cuda", cpuinfo=native) == torch.float32  # on a GPU bfloat16 is named, not picked
    for cpuinfo in (native, plain):
        assert compute_dtype("float32", cpuinfo=cpuinfo) == torch.float32
        assert compute_dtype("bfloat16", cpuinfo=cpuinfo) == torch.bfloat16
    assert dtype_name(torch.bfloat16) == "bfloat16"
    with pytest.raises(ConfigError, match="float32"):
        compute_dtype("fp8")


def _decoder_logprobs(model, head_model, ids, dtype):
    with torch.no_grad(), autocast(dtype):
        hidden = model.get_decoder()(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
    logits = output_logits(head_model, hidden[:, :-1])
    return torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]


def test_the_samplers_copy_gives_the_numbers_of_autocast_over_the_model():
    model, _ = build_tiny_model(TinyModelConfig(seed=3))
    ids = torch.randint(0, 500, (3, 40), generator=torch.Generator().manual_seed(0))
    shadow = LinearCopy(model, torch.bfloat16)
    linear = [m for m in shadow.model.modules() if isinstance(m, torch.nn.Linear)]
    assert all(m.weight.dtype == torch.bfloat16 for m in linear if m is not shadow.model.get_output_embeddings())
    assert shadow.model.get_output_embeddings().weight is model.get_output_embeddings().weight  # tied, float32, shared
    assert shadow.nbytes == 2 * sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)
                                    and m is not model.get_output_embeddings())
    # Bit for bit: casting float32 -> bfloat16 once or at every call rounds the same way.
    assert torch.equal(_decoder_logprobs(shadow.model, model, ids, torch.bfloat16), _decoder_logprobs(model, model, ids, torch.bfloat16))
    # The model changes in place (an optimizer step): the copy follows after refresh(), and only then.
    before = _decoder_logprobs(shadow.model, model, ids, torch.bfloat16)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m is not model.get_output_embeddings():
                m.weight.mul_(1.1)
    assert torch.equal(_decoder_logprobs(shadow.model, model, ids, torch.bfloat16), before)
    shadow.refresh()
    assert torch.equal(_decoder_logprobs(shadow.model, model, ids, torch.bfloat16), _decoder_logprobs(model, model, ids, torch.bfloat16))
    # A parameter replaced, not written in place: refresh() builds the copy again.
    model.model.norm.weight = torch.nn.Parameter(model.model.norm.weight.detach() * 0.5)
    shadow.refresh()
    assert torch.equal(_decoder_logprobs(shadow.model, model, ids, torch.bfloat16), _decoder_logprobs(model, model, ids, torch.bfloat16))


def test_the_frozen_reference_keeps_the_weights_of_its_moment_in_less_memory():
    model, _ = build_tiny_model(TinyModelConfig(seed=4))
    ids = torch.randint(0, 500, (2, 30), generator=torch.Generator().manual_seed(1))
    attention = torch.ones_like(ids)
    full = frozen_copy(model, torch.float32)
    small = frozen_copy(model, torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)  # training moves the model; the references stay
        a = token_logprobs(full, ids, attention, dtype=torch.bfloat16)
        b = token_logprobs(small, ids, attention, dtype=torch.bfloat16)
        moved = token_logprobs(model, ids, attention, dtype=torch.bfloat16)
    assert torch.equal(a, b)
    assert not torch.equal(a, moved)
    size = lambda m: sum(p.numel() * p.element_size() for p in {id(p): p for p in m.parameters()}.values())  # noqa: E731
    assert size(small) < size(full)
    # A checkpoint saves a model's trainable weights: the reference keeps the model's flags, so a cold-started
    # reference is saved whole (its linear weights as the bfloat16 it computes with).
    assert set(trainable_state(small)) == set(trainable_state(model))
    assert trainable_state(small)["model.layers.0.mlp.up_proj.weight"].dtype == torch.bfloat16


def test_the_vocabulary_projection_stays_float32_under_autocast():
    model, _ = build_tiny_model(TinyModelConfig(seed=5))
    hidden = torch.randn(7, model.config.hidden_size, generator=torch.Generator().manual_seed(2))
    exact = hidden.double() @ model.get_output_embeddings().weight.double().T
    with autocast(torch.bfloat16):
        logits = output_logits(model, hidden)
        rounded = model.get_output_embeddings()(hidden)  # what the head would give under autocast
    assert logits.dtype == torch.float32 and rounded.dtype == torch.bfloat16
    assert torch.allclose(logits.double(), exact, atol=1e-5)
    assert (rounded.double() - exact).abs().max() > 1e-4  # the error the float32 head avoids


def test_bfloat16_token_logprobs_score_every_token_or_the_masked_ones_alike():
    model, _ = build_tiny_model(TinyModelConfig(seed=6))
    ids = torch.randint(0, 500, (2, 12), generator=torch.Generator().manual_seed(3))
    attention = torch.ones_like(ids)
    attention[1, 9:] = 0
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[:, 4:] = 1
    with torch.no_grad():
        every = token_logprobs(model, ids, attention, dtype=torch.bfloat16)
        masked = token_logprobs(model, ids, attention, positions=mask * attention, dtype=torch.bfloat16)
    assert every.dtype == torch.float32
    assert torch.equal(every[:, 0], torch.zeros(2)) and torch.equal(every[1, 9:], torch.zeros(3))
    assert torch.allclose(masked[mask.bool() & attention.bool()], every[mask.bool() & attention.bool()], atol=1e-6)


def test_a_bfloat16_update_leaves_float32_gradients_on_float32_weights():
    model, _ = build_tiny_model(TinyModelConfig(seed=7))
    model.train()
    ids = torch.randint(0, 500, (2, 16), generator=torch.Generator().manual_seed(4))
    reference = copy.deepcopy(model)
    token_logprobs(model, ids, torch.ones_like(ids), dtype=torch.bfloat16).sum().backward()
    token_logprobs(reference, ids, torch.ones_like(ids)).sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32, name
        # The same gradient up to bfloat16 rounding of the forward and backward products.
        assert torch.allclose(p.grad, q.grad, rtol=0.1, atol=0.05 * float(q.grad.abs().max()) + 1e-6), name


def test_released_memory_comes_back_at_the_next_generate(tiny):
    """`release_memory` (what the trainer calls before an update) frees the sampler's copy and kept rows; the
    next call samples exactly what it would have."""
    from agents.policies import SamplingParams
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    model, tok = tiny
    prompts = [tok.encode(t, add_special_tokens=False) for t in ("Which river flows through Rome?", "radioactivity")]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=6, stop_token_ids=(), seed=3)
    kept, released = (HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype="bfloat16")) for _ in range(2))
    first = kept.generate(prompts, params)
    assert released.generate(prompts, params) == first
    released.release_memory()
    assert released._kept.rows == [] and released._copy.nbytes == 0
    assert released.generate(prompts, params) == kept.generate(prompts, params)
    assert released._copy.nbytes > 0


def test_a_fused_optimizer_step_reaches_the_samplers_copy_once_marked(tiny):
    """A fused AdamW step writes the weights without counting it in their `_version` (so the fingerprint misses
    it); `mark_updated`, which the trainer calls after the cold start and every update, recasts the copy: the
    next call samples what a new policy over the stepped weights samples."""
    from agents.policies import SamplingParams
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    model, tok = tiny
    prompts = [tok.encode(t, add_special_tokens=False) for t in ("Which river flows through Rome?", "radioactivity")]
    params = SamplingParams(temperature=0.0, max_new_tokens=6, stop_token_ids=())
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype="bfloat16"))
    before = policy.generate(prompts, params)
    weight = model.lm_head.weight if model.lm_head.weight is not model.get_input_embeddings().weight else None
    linear = next(m.weight for m in model.modules() if isinstance(m, torch.nn.Linear) and m.weight is not weight)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.5, fused=True)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    version = linear._version
    optimizer.step()
    assert linear._version == version  # the step is invisible to the fingerprint
    expected = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype="bfloat16")).generate(prompts, params)
    assert expected != before
    # Without mark_updated the copy keeps the old linear weights (it shares the embeddings and norms).
    assert policy.generate(prompts, params) != expected
    policy.mark_updated()
    assert policy.generate(prompts, params) == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_projection_in_chunks_gives_the_same_logprobs_and_gradients(monkeypatch, dtype):
    """With activation checkpointing, the update projects `HEAD_CHUNK` scored tokens at a time and recomputes
    each chunk's logits in backward: the same logprobs and gradients as one projection of them all."""
    import agents.rollout.batch as batch
    from agents.train.setup import enable_activation_checkpointing

    ids = torch.randint(0, 500, (2, 20), generator=torch.Generator().manual_seed(5))
    attention = torch.ones_like(ids)
    mask = torch.zeros(2, 20)
    mask[:, 6:] = 1
    results = []
    for chunk in (10_000, 5):
        monkeypatch.setattr(batch, "HEAD_CHUNK", chunk)
        model, _ = build_tiny_model(TinyModelConfig(seed=8))
        model.train()
        enable_activation_checkpointing(model)
        logp = token_logprobs(model, ids, attention, positions=mask, dtype=dtype, temperature=0.7)
        (logp * torch.linspace(-1, 1, 20)).sum().backward()
        results.append((logp.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (one, one_grads), (chunked, chunked_grads) = results
    assert torch.allclose(one, chunked, atol=1e-6)
    for name, grad in one_grads.items():
        assert torch.allclose(grad, chunked_grads[name], atol=1e-6), name


def test_greedy_bfloat16_rollouts_stop_at_the_same_tags(make_env, scripted):
    """A tiny model taught one episode (a search, then an answer) replays it greedily in either precision:
    every turn ends at the same closing tag, with the same text."""
    from agents.policies.hf import HFPolicy, HFPolicyConfig
    from agents.rollout import RolloutConfig, RolloutEngine
    from agents.rollout.batch import collate

    model, tok = build_tiny_model(TinyModelConfig(seed=6))
    script = ["<search> capital of Italy </search>", "<answer> Tiber </answer>"]
    config = RolloutConfig(group_size=1, temperature=0.0, max_turn_tokens=24, max_response_tokens=200)
    turns = iter(script)
    taught = RolloutEngine(scripted(lambda context, k: next(turns)), make_env(max_turns=3), config).rollout([{"options": {"index": 0}}])
    batch = collate(taught, tok.pad_token_id)
    mask = batch.loss_mask.bool()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(400):
        logp = token_logprobs(model, batch.input_ids, batch.attention_mask)[mask]
        # Every taught token at probability > 0.9: a margin no bfloat16 rounding of the logits (~1e-2) closes.
        if float(logp.detach().min()) > math.log(0.9):
            break
        optimizer.zero_grad()
        (-logp.mean()).backward()
        optimizer.step()
    assert float(logp.detach().min()) > math.log(0.9), "the tiny model did not learn the episode"

    texts = {}
    for dtype in ("float32", "bfloat16"):
        policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, dtype=dtype))
        t = RolloutEngine(policy, make_env(max_turns=3), config).rollout([{"options": {"index": 0}}])[0]
        texts[dtype] = [s.text for s in t.segments if s.kind == "agent"]
    assert [text.strip() for text in texts["float32"]] == script
    assert texts["bfloat16"] == texts["float32"]
    search, answer = (text.rstrip() for text in texts["bfloat16"])
    assert search.endswith("</search>") and answer.endswith("</answer>")
