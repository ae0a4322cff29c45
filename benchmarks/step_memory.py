"""Part 3 of `benchmarks.step`: the peak RSS of the CPU preset's update, one fresh process per setting."""

from __future__ import annotations

import os
import time

MEMORY_SETTINGS = {
    "float32, micro-batch 4, glibc's allocator (the old default)": {"dtype": "float32", "micro_batch": 4, "allocator": "glibc"},
    "float32, micro-batch 4": {"dtype": "float32", "micro_batch": 4},
    "float32, micro-batch 4 + checkpointing, glibc's allocator": {"dtype": "float32", "micro_batch": 4, "gradient_checkpointing": True,
                                                                   "allocator": "glibc"},
    "float32, micro-batch 4 + checkpointing, without huge pages": {"dtype": "float32", "micro_batch": 4, "gradient_checkpointing": True,
                                                                   "huge_pages": False},
    "float32, micro-batch 4 + checkpointing": {"dtype": "float32", "micro_batch": 4, "gradient_checkpointing": True},
    "float32, micro-batch 2": {"dtype": "float32", "micro_batch": 2},
    "float32, micro-batch 1": {"dtype": "float32", "micro_batch": 1},
    "float32, micro-batch 1, glibc's allocator": {"dtype": "float32", "micro_batch": 1, "allocator": "glibc"},
    "float32, micro-batch 1 + checkpointing": {"dtype": "float32", "micro_batch": 1, "gradient_checkpointing": True},
    "bfloat16, micro-batch 4, glibc's allocator": {"dtype": "bfloat16", "micro_batch": 4, "allocator": "glibc"},
    "bfloat16, micro-batch 4": {"dtype": "bfloat16", "micro_batch": 4},
    "bfloat16, micro-batch 2": {"dtype": "bfloat16", "micro_batch": 2},
    "bfloat16, micro-batch 1": {"dtype": "bfloat16", "micro_batch": 1},
    "bfloat16, micro-batch 4 + checkpointing, without huge pages": {"dtype": "bfloat16", "micro_batch": 4, "gradient_checkpointing": True,
                                                                    "huge_pages": False},
    "bfloat16, micro-batch 4 + checkpointing": {"dtype": "bfloat16", "micro_batch": 4, "gradient_checkpointing": True},
    "bfloat16, micro-batch 2 + checkpointing": {"dtype": "bfloat16", "micro_batch": 2, "gradient_checkpointing": True},
}
"""The update settings whose peak RSS part 3 measures: the precision (`TrainConfig.dtype`), `OptimConfig`
fields, and `allocator`: "tuned" (the default: glibc's mmap threshold fixed at 1 MiB,
`TrainConfig.malloc_mmap_threshold`) or "glibc" (glibc's own); `huge_pages`: True (the default,
`TrainConfig.huge_pages`) or False (the child runs with `THP_MEM_ALLOC_ENABLE=0`)."""


def update_rss(setting: dict) -> dict:
    """One process's peak RSS over two updates of the CPU preset's shape with `setting` (see `MEMORY_SETTINGS`);
    call it first in a fresh process."""
    import random
    import resource

    import torch

    from agents.learners.batch import LearnerBatch
    from agents.core import LossSettings
    from agents.memory import MMAP_THRESHOLD, ask_huge_pages, huge_pages_in_effect, tune_allocator
    from agents.models import load_model_and_tokenizer
    from agents.rollout.trajectory import Segment, Trajectory
    from agents.train.setup import adamw
    from agents.train.update import policy_gradient_step
    from agents.experiments.presets import PRESETS

    if setting.get("huge_pages", True):
        ask_huge_pages()  # before the first tensor (without: the parent set THP_MEM_ALLOC_ENABLE=0 for this process)
    tune_allocator(MMAP_THRESHOLD if setting.get("allocator", "tuned") == "tuned" else None)
    p = PRESETS["cpu"]
    model, tok = load_model_and_tokenizer(p.model, dtype="float32")
    if setting.get("lora"):
        from agents.train.setup import with_lora

        model = with_lora(model, 16)
    model.train()
    if setting.get("gradient_checkpointing"):
        from agents.train.setup import enable_activation_checkpointing

        enable_activation_checkpointing(model)
    rng = random.Random(0)
    trajectories, advantages = [], []
    for i in range(p.questions * p.group):
        # The preset's lengths: a ~150-token prompt, then up to 256 tokens of turns (sampled) and observations.
        prompt, response = 150, rng.randint(p.max_response_tokens // 2, p.max_response_tokens)
        mask = [0] * prompt + [1 if (j // p.max_turn_tokens) % 2 == 0 else 0 for j in range(response)]
        ids = [rng.randint(100, tok.vocab_size - 1) for _ in mask]
        trajectories.append(Trajectory(0, i, "q", None, None, ids, mask, [-1.0 * m for m in mask], [Segment("prompt", 0, prompt, "", -1)],
                                       [], {}, 0.0, "answered"))
        advantages.append(torch.full((len(ids),), 1.0 if i % 2 else -1.0))
    targets = LearnerBatch(advantages=advantages, include=[True] * len(trajectories), rewards=[0.0] * len(trajectories))
    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = adamw(params, 1e-5, setting.get("adamw", "fused"))
    seconds = []
    cpu = os.times()
    for _ in range(2):  # the second step holds the optimizer's states from the first
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        policy_gradient_step(model, trajectories, targets, LossSettings(eps_low=0.2, eps_high=0.28, aggregation="token-mean"),
                             pad_id=tok.pad_token_id, micro_batch=setting.get("micro_batch", 4), dtype=getattr(torch, setting.get("dtype", "float32")))
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    from agents.memory import peak_rss_gb

    user, system = os.times().user - cpu.user, os.times().system - cpu.system
    return {"peak_rss_gb": peak_rss_gb(), "update_s": min(seconds), "sys_share": system / max(user + system, 1e-9),
            "trainable": sum(q.numel() for q in params), "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt,
            "huge_pages": huge_pages_in_effect()}
