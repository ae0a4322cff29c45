"""Memory and time plan for training the papers' model sizes: estimated per GPU, measured where possible.

Estimated (arithmetic, no model built), for each shape on 1, 2 and 8 GPUs of `--gpu-gb` under DDP
(every GPU holds everything) and FSDP2-style full sharding (weights, gradients and Adam states split N
ways, plus the gathered layers in flight): parameters, gradients and optimizer states (fp32 master
weights, fp32 gradients, Adam's two fp32 moments: 4 + 4 + 8 bytes a parameter), and activations of one
micro-batch of `--tokens` tokens, with and without activation checkpointing.

Measured (with `--device`): a model with random weights built from the shape's config
(`AutoModelForCausalLM.from_config`, nothing downloaded), one warm-up and `--steps` timed steps of
forward + backward + AdamW on `--tokens` random tokens: the peak memory (CUDA: the allocator's peak; CPU:
the peak growth of the process's resident memory, sampled every 5 ms) and update tokens/s; then
Hugging Face `generate` tokens/s at `--decode-batch` prompts of `--decode-prompt` tokens, greedy,
`--decode-new` new tokens each (prefill included).

    python -m agents.train.memory_plan                                   # estimates for the three shapes
    python -m agents.train.memory_plan --device cuda --shapes qwen3-1.7b --out plan.json
    python -m agents.train.memory_plan --device cpu --shapes qwen2.5-0.5b --tokens 256 --seq-len 128 \\
        --decode-batch 4 --decode-prompt 32 --decode-new 8
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """A decoder's shape, as its config.json states it."""

    name: str
    family: Literal["qwen2", "qwen3"]
    """qwen2: q/k/v projections with biases; qwen3: no biases, RMSNorm on each head's q and k."""
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    """Whether the output projection is the input embedding (one matrix, counted once)."""

    def __post_init__(self) -> None:
        if min(self.hidden, self.layers, self.heads, self.kv_heads, self.head_dim, self.intermediate, self.vocab) < 1:
            raise ConfigError(f"shape {self.name}: every size must be >= 1")
        if self.heads % self.kv_heads:
            raise ConfigError(
                f"shape {self.name}: heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.family not in ("qwen2", "qwen3"):
            raise ConfigError(f"shape {self.name}: family must be qwen2 or qwen3, got {self.family!r}")

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        attention = h * q + 2 * h * kv + q * h
        if self.family == "qwen2":
            attention += q + 2 * kv
        else:
            attention += 2 * self.head_dim
        return attention + 3 * h * self.intermediate + 2 * h

    def embedding_params(self) -> int:
        """Input embedding, plus the output projection when it is not tied, plus the final norm."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params()

    def activation_bytes_per_token_layer(self) -> int:
        """Bytes one decoder layer keeps for backward per token in bf16 with a fused (flash / SDPA)
        attention, which keeps no (T, T) scores. Each RMSNorm keeps its bf16 input and two fp32 copies
        (transformers upcasts); projections keep their outputs; RoPE keeps rotated q and k; attention its
        output; the SwiGLU MLP gate, up, activated gate and product."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        norms = 2 * (2 * h + 4 * h + 4 * h)
        attention = 2 * (q + 2 * kv) + 2 * (q + kv) + 2 * q
        if self.family == "qwen3":
            attention += (4 + 4 + 2) * (q + kv)  # per-head q/k norms, same pattern as the layer norms
        return norms + attention + 2 * 4 * i

    def hf_config(self, layers: int | None = None) -> Any:
        from transformers import Qwen2Config, Qwen3Config

        common = {
            "hidden_size": self.hidden,
            "num_hidden_layers": layers or self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "intermediate_size": self.intermediate,
            "vocab_size": self.vocab,
            "tie_word_embeddings": self.tied,
            "max_position_embeddings": 32768,
        }
        if self.family == "qwen2":
            return Qwen2Config(**common)
        return Qwen3Config(head_dim=self.head_dim, **common)


# From each model's public config.json on the Hugging Face hub.
SHAPES = {
    s.name: s
    for s in (
        ModelShape(
            "qwen2.5-0.5b",
            "qwen2",
            hidden=896,
            layers=24,
            heads=14,
            kv_heads=2,
            head_dim=64,
            intermediate=4864,
            vocab=151936,
            tied=True,
        ),
        ModelShape(
            "qwen3-1.7b",
            "qwen3",
            hidden=2048,
            layers=28,
            heads=16,
            kv_heads=8,
            head_dim=128,
            intermediate=6144,
            vocab=151936,
            tied=True,
        ),
        ModelShape(
            "qwen3-8b",
            "qwen3",
            hidden=4096,
            layers=36,
            heads=32,
            kv_heads=8,
            head_dim=128,
            intermediate=12288,
            vocab=151936,
            tied=False,
        ),
        # Not a real model: small enough for the tests and a CPU smoke run.
        ModelShape(
            "tiny",
            "qwen3",
            hidden=64,
            layers=2,
            heads=4,
            kv_heads=2,
            head_dim=16,
            intermediate=128,
            vocab=512,
            tied=True,
        ),
    )
}
PAPER_SHAPES = ("qwen2.5-0.5b", "qwen3-1.7b", "qwen3-8b")

LOGIT_BYTES = 2 + 4 + 4
"""Per token and vocabulary entry: the bf16 logits, their fp32 copy and the fp32 log-softmax."""


def estimate(
    shape: ModelShape, *, gpus: int, strategy: Literal["ddp", "fsdp2"], tokens: int, gpu_gb: float
) -> dict[str, Any]:
    """GB per GPU, with activations of one micro-batch of `tokens` on each GPU, with and without
    checkpointing. FSDP2 also holds the bf16 gather of the unit in use and the one prefetched, and the
    fp32 gradient of one unit before its reduce-scatter (a unit: a decoder layer, or the embeddings)."""
    if gpus < 1 or tokens < 1 or gpu_gb <= 0:
        raise ConfigError("gpus and tokens must be >= 1 and gpu_gb > 0")
    if strategy not in ("ddp", "fsdp2"):
        raise ConfigError(f"strategy must be ddp or fsdp2, got {strategy!r}")
    p = shape.params()
    share = 1 if strategy == "ddp" else gpus
    unit = max(shape.layer_params(), shape.embedding_params())
    gather = 0.0 if strategy == "ddp" or gpus == 1 else unit * (2 * 2 + 4)
    per_layer = shape.activation_bytes_per_token_layer()
    logits = tokens * shape.vocab * LOGIT_BYTES
    act_full = tokens * shape.layers * per_layer + logits
    # Checkpointing keeps each layer's bf16 input, and recomputes one layer at a time in backward.
    act_ckpt = tokens * shape.layers * 2 * shape.hidden + tokens * per_layer + logits
    row = {
        "label": "estimated",
        "shape": shape.name,
        "params_b": p / 1e9,
        "gpus": gpus,
        "strategy": strategy,
        "tokens": tokens,
        "weights_gb": 4 * p / share / GB,
        "grads_gb": 4 * p / share / GB,
        "optimizer_gb": 8 * p / share / GB,
        "gather_gb": gather / GB,
        "activations_gb": act_full / GB,
        "activations_ckpt_gb": act_ckpt / GB,
    }
    states = row["weights_gb"] + row["grads_gb"] + row["optimizer_gb"] + row["gather_gb"]
    row["total_gb"] = states + row["activations_gb"]
    row["total_ckpt_gb"] = states + row["activations_ckpt_gb"]
    row["fits"] = row["total_gb"] <= gpu_gb
    row["fits_ckpt"] = row["total_ckpt_gb"] <= gpu_gb
    # What an SGLang server sharing the GPU could take (--mem-fraction-static = this / gpu_gb).
    row["left_ckpt_gb"] = gpu_gb - row["total_ckpt_gb"]
    return row


def plan(shapes: list[ModelShape], *, gpu_counts: tuple[int, ...], tokens: int, gpu_gb: float) -> list[dict[str, Any]]:
    return [
        estimate(s, gpus=n, strategy=st, tokens=tokens, gpu_gb=gpu_gb)
        for s in shapes
        for n in gpu_counts
        for st in ("ddp", "fsdp2")
    ]


def preset_estimate(name: str, gpu_gb: float = 80.0) -> dict[str, Any]:
    """The estimate of a `python -m agents train --preset NAME` layout on its GPUs, at its micro-batch's
    longest tokens, with checkpointing as the preset sets it, and whether the co-located SGLang server it
    plans for fits beside the update (`fits_with_server`)."""
    from agents.train.presets import get_preset

    preset = get_preset(name)
    row = estimate(SHAPES[preset.shape], gpus=preset.processes, strategy=preset.strategy, tokens=preset.micro_batch_tokens, gpu_gb=gpu_gb)
    ckpt = bool(preset.values.get("optim.gradient_checkpointing"))
    update = row["total_ckpt_gb"] if ckpt else row["total_gb"]
    return {**row, "preset": name, "checkpointing": ckpt, "update_gb": update, "server_gb": preset.server_gb,
            "fits_with_server": update + preset.server_gb <= gpu_gb}


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


def _md(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def table(estimates: list[dict[str, Any]], measured: list[dict[str, Any]], gpu_gb: float) -> str:
    head = [
        "shape",
        "params",
        "GPUs",
        "strategy",
        "weights",
        "grads",
        "Adam",
        "gather",
        "activations (ckpt)",
        "total (ckpt)",
        "fits (ckpt)",
        "left (ckpt)",
    ]
    lines = [
        f"estimated, GB per GPU of {gpu_gb:g} GB (fp32 weights, grads, Adam; activations of one micro-batch)",
        _md(head),
        _md(["---", "---:", "---:", "---", *["---:"] * 6, "---", "---:"]),
    ]
    for r in estimates:
        lines.append(
            _md(
                [
                    r["shape"],
                    f"{r['params_b']:.2f}B",
                    r["gpus"],
                    r["strategy"],
                    *(f"{r[k]:.1f}" for k in ("weights_gb", "grads_gb", "optimizer_gb", "gather_gb")),
                    f"{r['activations_gb']:.1f} ({r['activations_ckpt_gb']:.1f})",
                    f"{r['total_gb']:.1f} ({r['total_ckpt_gb']:.1f})",
                    f"{_yes(r['fits'])} ({_yes(r['fits_ckpt'])})",
                    f"{r['left_ckpt_gb']:.1f}",
                ]
            )
        )
    if measured:
        head = ["shape", "device", "dtype", "tokens", "ckpt", "peak GB", "update tokens/s", "decode tokens/s"]
        lines += [
            "",
            "measured (random weights, one device)",
            _md(head),
            _md(["---"] * 3 + ["---:", "---"] + ["---:"] * 3),
        ]
        for r in measured:
            decode = f"{r['decode_tokens_per_s']:.0f}" if r["decode_tokens_per_s"] is not None else "-"
            lines.append(
                _md(
                    [
                        r["shape"],
                        r["device"],
                        r["dtype"],
                        r["tokens"],
                        _yes(r["checkpointing"]),
                        f"{r['peak_gb']:.2f}",
                        f"{r['update_tokens_per_s']:.0f}",
                        decode,
                    ]
                )
            )
    return "\n".join(lines)


def preset_table(rows: list[dict[str, Any]], gpu_gb: float) -> str:
    head = ["preset", "shape", "GPUs", "strategy", "tokens / micro-batch", "ckpt", "update GB", "SGLang server GB", "total GB", "fits"]
    lines = [f"estimated, GB per GPU of {gpu_gb:g} GB (fp32 weights, grads, Adam; activations of one micro-batch)", _md(head),
             _md(["---", "---", "---:", "---", "---:", "---", "---:", "---:", "---:", "---"])]
    for r in rows:
        lines.append(_md([r["preset"], r["shape"], r["gpus"], r["strategy"], r["tokens"], _yes(r["checkpointing"]), f"{r['update_gb']:.1f}",
                          f"{r['server_gb']:.1f}", f"{r['update_gb'] + r['server_gb']:.1f}", _yes(r["fits_with_server"])]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(PAPER_SHAPES))
    p.add_argument("--gpus", nargs="+", type=int, default=[1, 2, 8], help="GPU counts to estimate for")
    p.add_argument("--gpu-gb", type=float, default=80.0)
    p.add_argument(
        "--tokens",
        type=int,
        default=8192,
        help="tokens per micro-batch per GPU (default: the GPU preset's 4 trajectories x 2,048 tokens)",
    )
    p.add_argument(
        "--device", default=None, help="measure on this device (cuda, cuda:1, cpu); estimates only when absent"
    )
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument(
        "--dtype",
        choices=["bf16", "fp32"],
        default=None,
        help="measured update dtype (default: bf16 on cuda, fp32 on cpu)",
    )
    p.add_argument("--checkpointing", choices=["both", "off", "on"], default="both")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--layers", type=int, default=None, help="measure a reduced-layer model with this many layers")
    p.add_argument("--decode-batch", type=int, default=64)
    p.add_argument("--decode-prompt", type=int, default=256)
    p.add_argument("--decode-new", type=int, default=64)
    p.add_argument("--out", type=Path, default=None, help="write every row as JSON here")
    p.add_argument("--preset", nargs="+", default=None, metavar="NAME",
                   help="only estimate these `python -m agents train --preset` layouts (gpu-1.7b, gpu-8b), server included")
    args = p.parse_args(argv)
    if args.preset:
        rows = [preset_estimate(n, args.gpu_gb) for n in args.preset]
        print(preset_table(rows, args.gpu_gb))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"presets": rows}, indent=1))
        return 0
    shapes = [SHAPES[n] for n in args.shapes]
    estimates = plan(shapes, gpu_counts=tuple(args.gpus), tokens=args.tokens, gpu_gb=args.gpu_gb)
    measured: list[dict[str, Any]] = []
    if args.device:
        base = MeasureConfig(
            device=args.device,
            tokens=args.tokens,
            seq_len=args.seq_len,
            steps=args.steps,
            layers=args.layers,
            dtype=args.dtype or ("fp32" if args.device == "cpu" else "bf16"),
            decode_batch=args.decode_batch,
            decode_prompt=args.decode_prompt,
            decode_new=args.decode_new,
        )
        modes = {"both": (False, True), "off": (False,), "on": (True,)}[args.checkpointing]
        for shape in shapes:
            for i, ckpt in enumerate(modes):
                # Decode once per shape: checkpointing changes the update only.
                config = replace(base, checkpointing=ckpt, decode_new=base.decode_new if i == 0 else 0)
                logger.info("measuring %s (%s)", shape.name, config)
                measured.append(measure(shape, config))
                _free(args.device)
    print(table(estimates, measured, args.gpu_gb))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"shapes": [asdict(s) for s in shapes], "estimated": estimates, "measured": measured}, indent=1)
        )
    return 0


def _free(device: str) -> None:
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


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    raise SystemExit(main())
