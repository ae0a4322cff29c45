"""One RL step of the CPU preset's shape, new path against old; the decode bound; the update's memory.

Prints, in one run (each part can be skipped with `--skip`):

1. `step`: two trainers of the CPU preset's shape (`agents.experiments.learners` preset `cpu`: SmolLM2-135M,
   2 questions x 4 rollouts of 1-hop synthetic questions, 64 tokens a turn, 256 an episode) start from the
   same cold-started weights and take the same seeded steps, alternately, so a shared machine's drift hits
   both alike. The old path re-prefills every turn's whole context with transformers' `DynamicCache` and
   updates in micro-batches of 4 as they come (`rollout.reuse_kv=False`); the new path keeps each episode's
   KV cache between turns (`reuse_kv=True`) and updates with the preset's settings (and fused AdamW where
   the old path has torch's default, foreach). Both run in this process, under glibc's own allocator
   (parts 2 and 3 measure what `TrainConfig.malloc_mmap_threshold` changes). Per path: the median
   step time and its split (the trainer's own `time/*` metrics), tokens sampled and prefilled (the same
   work: equal sampled tokens), and the median of the per-step ratios old / new.
2. `bound`: in a fresh process with glibc's own allocator, then in one with its mmap threshold fixed at
   1 MiB (`agents.memory.tune_allocator`), in turn: the
   machine's memory bandwidth (a large copy) and fp32 matmul rate, the model's weight bytes,
   and from them the decode bound at batch 1, 8 and 32 (a step reads every weight and the batch's KV cache
   once, and does 2 x parameters x batch flops); `HFPolicy`'s sampled tokens/s at each batch (prefill
   excluded) and its fraction of the bound; then the ratio of the two allocators' tokens/s per batch.
3. `memory`: the peak RSS of the CPU preset's update (two optimizer steps of 8 trajectories of the preset's
   lengths, in a fresh process each, so nothing else counts) for the old setting (foreach AdamW) and the
   alternatives, with glibc's own allocator or the tuned one, and the share of CPU time in the kernel.
4. `ranker`: COSEARCH's ranker calls of one turn, one `chat` per search as the env makes them, against the
   same calls gathered into one batch (`searchgym.backends.gather`, what the trainer does for COSEARCH):
   SmolLM2-135M as the ranker at its sampling temperature and token budget, on the oracle searches of
   2-hop training questions (5 candidates, k = 2), for 8 calls (a `cpu` preset turn: 2 questions x 4)
   and 32 (a `cpu-learn` turn: 4 x 8); each way twice, in turn, with the sampled tokens printed beside
   the times (the replies are sampled, so the work differs a little).

    python -m benchmarks.step [--steps 2] [--threads N] [--skip step bound memory ranker]
    python -m benchmarks.step --skip step bound memory --threads 1   # the ranker's calls only
    python -m benchmarks.step --skip bound memory --hops 2 3 --max-response-tokens 512   # a multi-hop shape
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEMORY_SETTINGS = {
    "micro-batch 4, foreach AdamW (old)": {"micro_batch": 4, "adamw": "foreach"},
    "micro-batch 4 (the CPU preset)": {"micro_batch": 4},
    "micro-batch 4, foreach AdamW, tuned allocator": {"micro_batch": 4, "adamw": "foreach", "allocator": "tuned"},
    "micro-batch 4, tuned allocator": {"micro_batch": 4, "allocator": "tuned"},
    "micro-batch 4 + checkpointing, tuned allocator": {"micro_batch": 4, "gradient_checkpointing": True, "allocator": "tuned"},
    "micro-batch 1 + checkpointing, tuned allocator": {"micro_batch": 1, "gradient_checkpointing": True, "allocator": "tuned"},
    "LoRA r16, micro-batch 4": {"micro_batch": 4, "lora": True},
    "LoRA r16, micro-batch 4, tuned allocator": {"micro_batch": 4, "lora": True, "allocator": "tuned"},
    "LoRA r16, micro-batch 4 + checkpointing, tuned allocator": {"micro_batch": 4, "lora": True, "gradient_checkpointing": True,
                                                                 "allocator": "tuned"},
}
"""The update settings whose peak RSS part 3 measures: `OptimConfig` fields, and `allocator` "tuned" for a
process whose glibc mmap threshold is fixed at 1 MiB (`TrainConfig.malloc_mmap_threshold`)."""


def _preset_config(out: Path, hops: tuple[int, ...] | None = None, max_response_tokens: int | None = None, learner: str = "grpo",
                   **changes):
    from agents.train import TrainConfig
    from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
    from agents.experiments.presets import PRESETS

    p = PRESETS["cpu"]
    rollout = {k: changes.pop(k) for k in ("reuse_kv", "max_batch_rows") if k in changes}
    return TrainConfig(
        learner=learner, model=p.model, steps=10_000, questions_per_step=p.questions, seed=0, out_dir=str(out), resume=False,
        checkpoint_every=0, threads=changes.pop("threads", None),
        env=EnvConfig(num_entities=p.num_entities, hops=hops or p.hops, top_k=p.top_k, options={"template": p.template}),
        rollout=RolloutConfig(group_size=p.group, max_turn_tokens=p.max_turn_tokens, max_response_tokens=max_response_tokens or p.max_response_tokens,
                              **rollout),
        optim=OptimConfig(lr=p.lr, cold_start_steps=p.cold_start_steps, **changes),
    )


def bench_step(steps: int, threads: int | None, new_update: dict, **shape) -> dict:
    from agents.train.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        new = Trainer(_preset_config(Path(tmp) / "new", threads=threads, reuse_kv=True, **new_update, **shape))
        old = Trainer(_preset_config(Path(tmp) / "old", threads=threads, reuse_kv=False, micro_batch=4, adamw="foreach", **shape))
        try:
            start = time.perf_counter()
            new.cold_start()
            print(f"cold start ({new.config.optim.cold_start_steps} supervised steps): {time.perf_counter() - start:.0f} s", flush=True)
            rows: dict[str, list[dict]] = {"old": [], "new": []}
            for k in range(steps):
                # The same weights before every step, so both paths sample the same tokens (the same work).
                old.model.load_state_dict(new.model.state_dict())
                old.policy.mark_updated()
                for name, trainer in (("old", old), ("new", new)):
                    m = trainer.train_step()
                    rows[name].append(m)
                    print(f"  step {k + 1} {name}: {m['time/step_s']:.1f} s (generate {m['time/generate_s']:.1f}, env {m['time/env_s']:.2f}, "
                          f"update {m['time/update_s']:.1f}), {m['rollout/sampled_tokens']:.0f} sampled, "
                          f"{m['rollout/prefill_tokens']:.0f} prefilled, {m['rollout/turns_mean']:.2f} turns/episode", flush=True)
        finally:
            new.close()
            old.close()
    keys = ("time/step_s", "time/generate_s", "time/env_s", "time/update_s", "time/other_s", "rollout/sampled_tokens",
            "rollout/prefill_tokens", "perf/sampled_tok_s")
    summary = {name: {k: statistics.median(m[k] for m in ms) for k in keys} for name, ms in rows.items()}
    ratios = [o["time/step_s"] / n["time/step_s"] for o, n in zip(rows["old"], rows["new"])]
    summary["ratio_old_over_new"] = statistics.median(ratios)
    summary["ratios"] = ratios
    summary["same_sampled_tokens"] = [o["rollout/sampled_tokens"] == n["rollout/sampled_tokens"] for o, n in zip(rows["old"], rows["new"])]
    return summary


def bench_ranker(sizes: tuple[int, ...], threads: int | None, repeats: int = 2) -> dict:
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the env ids)
    from agents.learners import CoSearchConfig
    from agents.learners.cosearch_ranker import PolicyChatBackend
    from agents.models import load_model_and_tokenizer
    from agents.policies.hf import HFPolicy, HFPolicyConfig
    from agents.experiments.presets import PRESETS
    from agents.experiments.ranker_cold_start import held_out
    from searchgym.backends.gather import GatheringBackend, step_side_by_side
    from searchgym.rankers.llm import LLMRanker, LLMRankerConfig

    p, c = PRESETS["cpu"], CoSearchConfig()
    env = gym.make("SearchQA-Synthetic-v0", split="train", num_entities=p.num_entities, hops=(2,), top_k=p.top_k, seed=0,
                   num_questions=max(sizes))
    requests = [r.request for r in held_out(env, max(sizes), c.ranker_candidates, False)]
    model, tok = load_model_and_tokenizer(p.model, dtype="float32")
    backend = PolicyChatBackend(HFPolicy(model, tok, config=HFPolicyConfig(seed=1, max_batch_rows=max(sizes))),
                                temperature=c.ranker_temperature, max_tokens=c.ranker_max_tokens, seed=0)
    ranker = LLMRanker(GatheringBackend(backend), LLMRankerConfig(max_doc_chars=c.ranker_max_doc_chars, max_tokens=c.ranker_max_tokens,
                                                                  temperature=c.ranker_temperature))

    def rank(r):
        return ranker.rank(r.question, r.query, r.candidates, r.k)

    def timed(run) -> tuple[float, int]:
        backend.clear()
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
        return seconds, sum(sum(g.loss_mask) for gens in backend.log.values() for g in gens)

    rank(requests[0])  # warm-up
    out: dict = {"sizes": {}}
    for n in sizes:
        batch = requests[:n]
        rows: dict[str, list[tuple[float, int]]] = {"alone": [], "gathered": []}
        for _ in range(repeats):  # in turn, so a shared machine's drift hits both alike
            rows["alone"].append(timed(lambda: [rank(r) for r in batch]))
            rows["gathered"].append(timed(lambda: step_side_by_side(rank, batch)))
        summary = {name: {"seconds": statistics.median(s for s, _ in rs), "sampled_tokens": statistics.median(t for _, t in rs)}
                   for name, rs in rows.items()}
        for name in rows:
            summary[name]["tok_s"] = summary[name]["sampled_tokens"] / summary[name]["seconds"]
        summary["ratio_alone_over_gathered"] = summary["alone"]["seconds"] / summary["gathered"]["seconds"]
        out["sizes"][n] = summary
        print(f"  {n} calls: one at a time {summary['alone']['seconds']:.1f} s ({summary['alone']['sampled_tokens']:.0f} tokens, "
              f"{summary['alone']['tok_s']:.1f} tok/s), gathered {summary['gathered']['seconds']:.1f} s "
              f"({summary['gathered']['sampled_tokens']:.0f} tokens, {summary['gathered']['tok_s']:.1f} tok/s): "
              f"{summary['ratio_alone_over_gathered']:.2f}x", flush=True)
    env.close()
    return out


def _best_seconds(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_bound(allocator: str = "tuned", batches: tuple[int, ...] = (1, 8, 32), prompt_tokens: int = 200, new_tokens: int = 32) -> dict:
    """The decode bound and `HFPolicy`'s sampled tokens/s, in a process that keeps glibc's own allocator
    (`allocator` "glibc") or the one `agents.memory.tune_allocator` sets ("tuned"); call it first."""
    import torch

    from agents.memory import MMAP_THRESHOLD, tune_allocator

    tune_allocator(None if allocator == "glibc" else MMAP_THRESHOLD)
    from agents.models import load_model_and_tokenizer
    from agents.policies import SamplingParams
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    # Memory bandwidth: a copy reads and writes every byte once; 256 MB each way is far past any cache.
    src, dst = torch.ones(64 * 2**20), torch.empty(64 * 2**20)
    copy_s = _best_seconds(lambda: dst.copy_(src), 5)
    bandwidth = 2 * src.numel() * 4 / copy_s
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    flops = 2 * 2048**3 / _best_seconds(lambda: a @ b, 5)
    model, tok = load_model_and_tokenizer("smollm2-135m", dtype="float32")
    params = {id(p): p for p in model.parameters()}.values()  # tied weights once
    n_params = sum(p.numel() for p in params)
    weight_bytes = sum(p.numel() * p.element_size() for p in params)
    c = model.config
    kv_per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * 4
    policy = HFPolicy(model, tok, config=HFPolicyConfig(seed=0, max_batch_rows=max(batches)))
    text = "The river flows through the old city and past the cathedral towers. " * 40
    prompt = tok.encode(text, add_special_tokens=False)[:prompt_tokens]
    out = {"bandwidth_gb_s": bandwidth / 1e9, "matmul_gflop_s": flops / 1e9, "weight_bytes": weight_bytes, "params": n_params, "batches": {}}
    for batch in batches:
        prompts = [prompt[i % 7 :] + prompt[: i % 7] for i in range(batch)]  # distinct rows of equal length

        def run(n: int) -> None:
            policy.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=n, stop_token_ids=(), seed=0))

        run(2)  # warm-up
        prefill_only = _best_seconds(lambda: run(1), 2)
        cpu = os.times()
        full = _best_seconds(lambda: run(new_tokens), 2)
        cpu_user, cpu_sys = os.times().user - cpu.user, os.times().system - cpu.system
        measured = batch * (new_tokens - 1) / max(full - prefill_only, 1e-9)
        context = prompt_tokens + new_tokens / 2
        step_s = max((weight_bytes + batch * context * kv_per_token) / bandwidth, 2 * n_params * batch / flops)
        bound = batch / step_s
        out["batches"][batch] = {"tok_s": measured, "bound_tok_s": bound, "fraction": measured / bound,
                                 "sys_share": cpu_sys / max(cpu_user + cpu_sys, 1e-9),  # kernel time: page faults, mmap
                                 "limit": "memory" if step_s * bandwidth > 2 * n_params * batch / flops * bandwidth else "compute"}
    return out


def update_rss(setting: dict) -> dict:
    """One process's peak RSS over two updates of the preset's shape with `setting` (see MEMORY_SETTINGS)."""
    import random

    import torch

    from agents.learners.batch import LearnerBatch
    from agents.core import LossSettings
    from agents.memory import MMAP_THRESHOLD, tune_allocator
    from agents.models import load_model_and_tokenizer
    from agents.rollout.trajectory import Segment, Trajectory
    from agents.train.setup import adamw
    from agents.train.update import policy_gradient_step
    from agents.experiments.presets import PRESETS

    tune_allocator(MMAP_THRESHOLD if setting.get("allocator") == "tuned" else None)
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
                             pad_id=tok.pad_token_id, micro_batch=setting.get("micro_batch", 4))
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    from agents.memory import peak_rss_gb

    user, system = os.times().user - cpu.user, os.times().system - cpu.system
    return {"peak_rss_gb": peak_rss_gb(), "update_s": min(seconds), "sys_share": system / max(user + system, 1e-9),
            "trainable": sum(q.numel() for q in params)}


def _child(option: str, value: str, threads: int | None) -> dict:
    """The JSON a fresh `python -m benchmarks.step option value` prints last (its own allocator and peak)."""
    cmd = [sys.executable, "-m", "benchmarks.step", option, value]
    if threads:
        cmd += ["--threads", str(threads)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench_memory(threads: int | None) -> dict:
    out = {}
    for name, setting in MEMORY_SETTINGS.items():
        out[name] = _child("--update-rss", json.dumps(setting), threads)
        print(f"  {name}: peak RSS {out[name]['peak_rss_gb']:.2f} GB, update {out[name]['update_s']:.1f} s "
              f"({out[name]['sys_share']:.0%} of its CPU time in the kernel)", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2, help="RL steps per path (part 1)")
    p.add_argument("--threads", type=int, default=None, help="threads for torch and BLAS (default: the physical cores)")
    p.add_argument("--skip", nargs="*", default=[], choices=["step", "bound", "memory", "ranker"])
    p.add_argument("--micro-batch", type=int, default=4, help="the new path's update micro-batch (part 1)")
    p.add_argument("--checkpointing", action=argparse.BooleanOptionalAction, default=None,
                   help="whether the new path's update recomputes activations (part 1; default: the preset's choice)")
    p.add_argument("--hops", type=int, nargs="+", default=None, help="part 1 on questions of these hop counts instead of the preset's")
    p.add_argument("--max-response-tokens", type=int, default=None, help="part 1's episode budget instead of the preset's 256")
    p.add_argument("--bound-rounds", type=int, default=2, help="part 2's rounds of one process per allocator, in turn")
    p.add_argument("--out", default=None, help="also write the figures as JSON here")
    p.add_argument("--update-rss", default=None, help=argparse.SUPPRESS)  # internal: part 3's child process
    p.add_argument("--bound", choices=["glibc", "tuned"], default=None, help=argparse.SUPPRESS)  # internal: part 2's child
    args = p.parse_args(argv)
    from searchgym.threads import set_threads

    threads = set_threads(args.threads)
    if args.update_rss is not None:
        print(json.dumps(update_rss(json.loads(args.update_rss))))
        return 0
    if args.bound is not None:
        print(json.dumps(bench_bound(args.bound)))
        return 0
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f}", flush=True)
    results: dict = {"threads": threads}
    if "step" not in args.skip:
        print("\n== 1. RL step of the CPU preset's shape: old path vs new, alternated", flush=True)
        shape = {"hops": tuple(args.hops) if args.hops else None, "max_response_tokens": args.max_response_tokens}
        from agents.experiments.presets import PRESETS

        checkpointing = PRESETS["cpu"].gradient_checkpointing if args.checkpointing is None else args.checkpointing
        s = bench_step(args.steps, args.threads, {"micro_batch": args.micro_batch, "gradient_checkpointing": checkpointing}, **shape)
        results["step"] = s
        for name in ("old", "new"):
            m = s[name]
            print(f"{name}: step {m['time/step_s']:.1f} s = generate {m['time/generate_s']:.1f} + env {m['time/env_s']:.2f} + update "
                  f"{m['time/update_s']:.1f} + other {m['time/other_s']:.2f}; {m['rollout/sampled_tokens']:.0f} sampled, "
                  f"{m['rollout/prefill_tokens']:.0f} prefilled tokens (medians)")
        print(f"RL step ratio old / new: {s['ratio_old_over_new']:.2f}x (per step: {', '.join(f'{r:.2f}' for r in s['ratios'])}; "
              f"same sampled tokens per step: {s['same_sampled_tokens']})", flush=True)
    if "bound" not in args.skip:
        print(f"\n== 2. Decode bound (SmolLM2-135M, fp32), with glibc's own allocator and the tuned one, in turn, {args.bound_rounds} "
              "round(s) (a fresh process each)", flush=True)
        results["bound"] = {"glibc": [], "tuned": []}
        for _ in range(args.bound_rounds):
            for allocator in ("glibc", "tuned"):
                b = _child("--bound", allocator, args.threads)
                results["bound"][allocator].append(b)
                print(f"{allocator}: memory bandwidth {b['bandwidth_gb_s']:.1f} GB/s (copy), matmul {b['matmul_gflop_s']:.0f} GFLOP/s (fp32), "
                      f"weights {b['weight_bytes'] / 1e6:.0f} MB ({b['params'] / 1e6:.0f}M parameters)")
                for batch, m in b["batches"].items():
                    print(f"  batch {batch:>2}: {m['tok_s']:7.1f} sampled tok/s, bound {m['bound_tok_s']:7.1f} ({m['limit']}-bound): "
                          f"{m['fraction']:.2f} of the bound; {m['sys_share']:.0%} of the CPU time in the kernel", flush=True)
        rate = {a: {k: statistics.median(r["batches"][k]["tok_s"] for r in runs) for k in runs[0]["batches"]} for a, runs in results["bound"].items()}
        print("sampled tok/s tuned / glibc (medians over rounds): "
              + ", ".join(f"batch {k} {rate['tuned'][k] / rate['glibc'][k]:.2f}x" for k in rate["tuned"]), flush=True)
    if "memory" not in args.skip:
        print("\n== 3. Peak RSS of the CPU preset's update (a fresh process each)", flush=True)
        results["memory"] = bench_memory(args.threads)
    if "ranker" not in args.skip:
        print("\n== 4. COSEARCH's ranker calls of one turn: one at a time vs gathered into one batch", flush=True)
        results["ranker"] = bench_ranker((8, 32), args.threads)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
