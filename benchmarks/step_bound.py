"""The bounds `benchmarks.step` measures speeds against, per precision: what a decode step or a prefill could
reach if the model's matrix products were all it did.

A decode step at batch B reads every weight the sampler holds (float32; or bfloat16 linear weights and the
float32 vocabulary projection) and the batch's keys and values once, and runs each of the model's matrix
products once on B rows. Its bound is the larger of the two times: bytes / the measured memory bandwidth, and
the model's matrix products timed on their own shapes at B rows in the sampler's dtype (`torch.nn.functional
.linear` on random weights; the vocabulary projection in float32), each counted once per layer. A prefill's
bound is the same products on 512 rows: tokens / their time. Attention, norms, rotary embeddings and the
framework's own operators are what a model adds on top; the fraction of the bound says how much they cost.
"""

from __future__ import annotations

import os
import time
from collections import Counter

PREFILL_ROWS = 512
"""Rows of the prefill bound's matrix products (an update's micro-batch, or a turn's new tokens, is this order)."""


def best_seconds(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bandwidth() -> float:
    """Bytes/s of a copy (it reads and writes every byte once; 256 MB each way is far past any cache)."""
    import torch

    src, dst = torch.ones(64 * 2**20), torch.empty(64 * 2**20)
    return 2 * src.numel() * 4 / best_seconds(lambda: dst.copy_(src), 5)


def matmul_rate(rows: int, inner: int, outer: int, dtype) -> float:
    """FLOP/s of `linear` on (rows, inner) x (inner, outer) in `dtype` (best of 5, at least ~20 ms each)."""
    import torch

    a, w = torch.randn(rows, inner, dtype=dtype), torch.randn(outer, inner, dtype=dtype)
    flops = 2 * rows * inner * outer
    repeats = max(1, int(4e8 // flops))
    return flops * repeats / best_seconds(lambda: [torch.nn.functional.linear(a, w) for _ in range(repeats)], 5)


def linear_shapes(model) -> tuple[Counter, tuple[int, int]]:
    """(in, out) of every linear layer but the vocabulary projection, counted; and the projection's (in, out)."""
    import torch

    head = model.get_output_embeddings()
    shapes = Counter((m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head)
    return shapes, (head.in_features, head.out_features)


class Bound:
    """The matrix products of one model in one precision, timed once per shape and row count."""

    def __init__(self, model, dtype, bandwidth_bytes_s: float):
        import torch

        self.dtype, self.bandwidth = dtype, bandwidth_bytes_s
        self.shapes, self.head = linear_shapes(model)
        c = model.config
        size = torch.empty((), dtype=dtype).element_size()
        self.linear_params = sum(i * o * n for (i, o), n in self.shapes.items())
        self.weight_bytes = self.linear_params * size + self.head[0] * self.head[1] * 4  # the projection stays float32
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.kv_per_token = 2 * c.num_hidden_layers * (c.num_key_value_heads or c.num_attention_heads) * head_dim * size
        self._seconds: dict[int, float] = {}

    def matmul_seconds(self, rows: int) -> float:
        """One pass of every matrix product at `rows` rows, each at its measured rate."""
        import torch

        if rows not in self._seconds:
            total = sum(n * 2 * rows * i * o / matmul_rate(rows, i, o, self.dtype) for (i, o), n in self.shapes.items())
            self._seconds[rows] = total + 2 * rows * self.head[0] * self.head[1] / matmul_rate(rows, *self.head, torch.float32)
        return self._seconds[rows]

    def decode(self, batch: int, context: float) -> dict:
        """Sampled tokens/s a decode step at `batch` rows of `context` tokens could reach, and what limits it."""
        memory_s = (self.weight_bytes + batch * context * self.kv_per_token) / self.bandwidth
        compute_s = self.matmul_seconds(batch)
        return {"tok_s": batch / max(memory_s, compute_s), "limit": "memory" if memory_s > compute_s else "compute"}

    def prefill(self) -> float:
        """Prefilled tokens/s the matrix products allow at `PREFILL_ROWS` rows."""
        return PREFILL_ROWS / self.matmul_seconds(PREFILL_ROWS)


def bench_bound(allocator: str, dtype_name: str, batches: tuple[int, ...] = (1, 8, 32), prompt_tokens: int = 200,
                new_tokens: int = 32) -> dict:
    """`HFPolicy`'s sampled tokens/s at each batch, in `dtype_name`, against the decode bound, in a process
    that keeps glibc's own allocator ("glibc") or the one `agents.memory.tune_allocator` sets ("tuned"); call
    it first in a fresh process."""
    import torch

    from agents.memory import MMAP_THRESHOLD, tune_allocator

    tune_allocator(None if allocator == "glibc" else MMAP_THRESHOLD)
    from agents.models import load_model_and_tokenizer
    from agents.policies import SamplingParams
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    model, tok = load_model_and_tokenizer("smollm2-135m", dtype="float32")
    bound = Bound(model, getattr(torch, dtype_name), bandwidth())
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, max_batch_rows=max(batches), dtype=dtype_name))
    text = "The river flows through the old city and past the cathedral towers. " * 40
    prompt = tok.encode(text, add_special_tokens=False)[:prompt_tokens]
    out = {"bandwidth_gb_s": bound.bandwidth / 1e9, "weight_bytes": bound.weight_bytes, "dtype": dtype_name, "batches": {}}
    for batch in batches:
        prompts = [prompt[i % 7 :] + prompt[: i % 7] for i in range(batch)]  # distinct rows of equal length

        def run(n: int) -> None:
            policy.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=n, stop_token_ids=(), seed=0))

        run(2)  # warm-up
        prefill_only = best_seconds(lambda: run(1), 2)
        cpu = os.times()
        full = best_seconds(lambda: run(new_tokens), 2)
        cpu_user, cpu_sys = os.times().user - cpu.user, os.times().system - cpu.system
        measured = batch * (new_tokens - 1) / max(full - prefill_only, 1e-9)
        limit = bound.decode(batch, prompt_tokens + new_tokens / 2)
        out["batches"][batch] = {"tok_s": measured, "bound_tok_s": limit["tok_s"], "fraction": measured / limit["tok_s"],
                                 "limit": limit["limit"], "sys_share": cpu_sys / max(cpu_user + cpu_sys, 1e-9)}  # kernel time: faults, mmap
    return out
