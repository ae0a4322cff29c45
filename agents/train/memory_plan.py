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

The shapes are `agents.train.model_shapes`'s, the measurement `agents.train.memory_measure`'s.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Literal

from agents.train.memory_measure import MeasureConfig, free_memory, measure
from agents.train.model_shapes import GB, PAPER_SHAPES, SHAPES, ModelShape
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

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
                free_memory(args.device)
    print(table(estimates, measured, args.gpu_gb))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"shapes": [asdict(s) for s in shapes], "estimated": estimates, "measured": measured}, indent=1)
        )
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
