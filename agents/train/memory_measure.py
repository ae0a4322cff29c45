"""The measured half of the memory plan (`python -m agents.train.memory_plan --device ...`): a model with
random weights built from a shape's config, its update's peak memory and tokens/s, and its decode tokens/s.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agents.train.model_shapes import GB
from searchgym.errors import ConfigError

if TYPE_CHECKING:
    from agents.train.model_shapes import ModelShape

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MeasureConfig:
    """One measured update and decode run."""

    device: str = "cpu"
    tokens: int = 8192
    """Tokens in the measured micro-batch (sequences of `seq_len`)."""
    seq_len: int = 2048
    dtype: Literal["bf16", "fp32"] = "bf16"
    """Weights, gradients and Adam states in this dtype (bf16: what fits a 1.7B update in one pass)."""
    checkpointing: bool = False
    steps: int = 2
    """Timed steps after one warm-up step."""
    decode_batch: int = 64
    decode_prompt: int = 256
    decode_new: int = 64
    layers: int | None = None
    """Build the shape with this many decoder layers instead (a reduced-layer model)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.tokens < 1 or self.seq_len < 1 or self.tokens % self.seq_len:
            raise ConfigError(f"tokens ({self.tokens}) must be a positive multiple of seq_len ({self.seq_len})")
        if self.steps < 1 or min(self.decode_batch, self.decode_prompt) < 1 or self.decode_new < 0:
            raise ConfigError("steps, decode_batch and decode_prompt must be >= 1 and decode_new >= 0")
        if self.dtype not in ("bf16", "fp32"):
            raise ConfigError(f"dtype must be bf16 or fp32, got {self.dtype!r}")
        if self.layers is not None and self.layers < 1:
            raise ConfigError(f"layers must be >= 1, got {self.layers}")


class _PeakRSS:
    """Peak growth of this process's resident memory while in the block (CPU has no allocator peak)."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()
        self.base = self._proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> _PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def measure(shape: ModelShape, config: MeasureConfig) -> dict[str, Any]:
    """Peak memory and tokens/s of fwd+bwd+AdamW, and decode tokens/s, on a random-weight model."""
    import contextlib

    import torch
    from transformers import AutoModelForCausalLM

    c = config
    device = torch.device(c.device)
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if c.dtype == "bf16" else torch.float32
    torch.manual_seed(c.seed)
    hf = shape.hf_config(c.layers)
    rss = None if cuda else _PeakRSS()
    with rss if rss is not None else contextlib.nullcontext():
        with device:  # initialise on the device: no host copy of a multi-GB model
            try:
                model = AutoModelForCausalLM.from_config(hf, dtype=dtype)
            except TypeError:  # transformers before 4.56 names it torch_dtype
                model = AutoModelForCausalLM.from_config(hf, torch_dtype=dtype)
        if next(model.parameters()).dtype != dtype:
            model.to(dtype)
        if c.checkpointing:
            kwargs = {"use_reentrant": False}
            if hasattr(model, "activation_checkpointing_enable"):  # the name since transformers 5.x
                model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model.config.use_cache = False
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, foreach=True)
        ids = torch.randint(0, shape.vocab, (c.tokens // c.seq_len, c.seq_len), device=device)

        def step() -> float:
            logits = model(input_ids=ids).logits
            # The learners' shape of loss: log-probabilities of the given tokens, in fp32.
            logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            loss = -logprobs.mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return float(loss.detach())  # a sync point: the step has finished when this returns

        first = step()
        if cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        for _ in range(c.steps):
            last = step()
        update_s = (time.perf_counter() - start) / c.steps
    peak = torch.cuda.max_memory_allocated(device) if cuda else rss.peak - rss.base
    decode = _decode(model, shape, c) if c.decode_new else None
    name = shape.name if c.layers is None else f"{shape.name}[{c.layers} layers]"
    return {
        "label": "measured",
        "shape": name,
        "params_b": sum(p.numel() for p in model.parameters()) / 1e9,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "dtype": c.dtype,
        "tokens": c.tokens,
        "seq_len": c.seq_len,
        "checkpointing": c.checkpointing,
        "peak_gb": peak / GB,
        "peak_kind": "cuda max_memory_allocated" if cuda else "process RSS growth",
        "update_tokens_per_s": c.tokens / update_s,
        "update_s": update_s,
        "loss_first": first,
        "loss_last": last,
        "decode_tokens_per_s": decode,
        "decode": f"batch {c.decode_batch}, prompt {c.decode_prompt}, {c.decode_new} new, greedy",
    }


def _decode(model: Any, shape: ModelShape, c: MeasureConfig) -> float:
    import torch

    model.eval()
    model.config.use_cache = True
    ids = torch.randint(0, shape.vocab, (c.decode_batch, c.decode_prompt), device=model.device)
    with torch.no_grad():
        # min_new_tokens: a random model may sample EOS at once; every row decodes the full budget.
        gen = {"max_new_tokens": c.decode_new, "min_new_tokens": c.decode_new, "do_sample": False, "pad_token_id": 0}
        model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=2,
            min_new_tokens=2,
            do_sample=False,
            pad_token_id=0,
        )  # warm-up: kernels and caches
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        start = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **gen)
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        seconds = time.perf_counter() - start
    new = (out.shape[1] - c.decode_prompt) * c.decode_batch
    return new / seconds


def free_memory(device: str) -> None:
    """Give the previous model's memory back, so the next measurement's peak starts from it."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
        return
    try:  # glibc keeps freed heap pages otherwise, and the next RSS growth would read near zero
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        logger.debug("malloc_trim is not available; CPU peaks after the first may read low")
