"""One RL step of the learning check's shape in float32 and in bfloat16, side by side; the decode bound per
precision and allocator; the update's memory; COSEARCH's ranker calls.

Prints, in one run (each part can be skipped with `--skip`):

1. `step`: RL steps of the learning check's shape (`agents.experiments.learners` preset `cpu-learn`:
   SmolLM2-135M, GRPO, 4 two-hop questions x 8 rollouts, 64 tokens a turn, 512 an episode, 4 turns; `--preset`
   for another) computing in float32 and in bfloat16 (`TrainConfig.dtype`, `agents.precision`), with every
   other setting the preset's: the same questions and random numbers, so the same work up to the tokens each
   precision's rounding makes the policy write
   (printed). Each step runs in a fresh process (its peak RSS its own), the two precisions alternating, from
   the same cold-started weights, as an uninterrupted run reaches that step (its questions and seeds). Per
   precision: the median step time and its split (the trainer's own `time/*` metrics), sampled and prefilled
   tokens and their rates, each rate against its own bound (`benchmarks.step_bound`: the decode bound at the
   step's rows, the prefill bound, from matmul rates measured here in that precision), and the peak RSS
   (`perf/peak_rss_gb`). Then the per-step ratios float32 / bfloat16 of the step time, and the numerics of
   each path on one more step's rollouts (from the same weights): how far the update's teacher-forced logprob
   of each sampled token is from the sampler's, and the on-policy importance ratio exp(update - sampler)
   against the loss's clip range.
2. `bound`: in a fresh process per (allocator, precision), in turn over `--bound-rounds` rounds: the memory
   bandwidth, the sampler's weight bytes, `HFPolicy`'s sampled tokens/s at batch 1, 8 and 32 (prefill
   excluded) against the decode bound; then the ratios bfloat16 / float32 and tuned / glibc's allocator.
3. `memory`: the peak RSS of the CPU preset's update (two optimizer steps of 8 trajectories of the `cpu`
   preset's lengths, in a fresh process each, so nothing else counts) per precision and setting
   (`benchmarks.step_memory`), the share of CPU time in the kernel and the page faults, with and without huge
   pages for torch's tensors (`TrainConfig.huge_pages`).
4. `ranker`: COSEARCH's ranker calls of one turn, one `chat` per search as the env makes them, against the
   same calls gathered into one batch (`searchgym.backends.gather`, what the trainer does for COSEARCH):
   SmolLM2-135M as the ranker at its sampling temperature and token budget, on the oracle searches of
   2-hop training questions (5 candidates, k = 2), for 8 calls (a `cpu` preset turn: 2 questions x 4)
   and 32 (a `cpu-learn` turn: 4 x 8); each way twice, in turn, with the sampled tokens printed beside
   the times (the replies are sampled, so the work differs a little).

    python -m benchmarks.step [--steps 2] [--threads N] [--preset cpu-learn] [--skip step bound memory ranker]
    python -m benchmarks.step --skip step bound memory --threads 1   # the ranker's calls only
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
from dataclasses import replace
from pathlib import Path

PRECISIONS = ("float32", "bfloat16")
KEYS = ("time/step_s", "time/generate_s", "time/env_s", "time/update_s", "time/other_s", "rollout/sampled_tokens",
        "rollout/prefill_tokens", "perf/sampled_tok_s", "perf/prefill_tok_s", "rollout/episodes")


def _config(preset: str, out: Path, dtype: str, model: str | None = None, threads: int | None = None, cold_start: bool = False):
    """The `TrainConfig` of one learner run of `preset` (GRPO, seed 0) in `dtype`, checkpointing at the end only."""
    from agents.experiments.presets import PRESETS
    from agents.experiments.runner import train_config

    p = replace(PRESETS[preset], dtype=dtype)
    config = train_config(p, 10_000, 0, out, {}, threads, "grpo", model or p.model, dtype, cold_start_steps=p.cold_start_steps if cold_start else 0)
    return replace(config, checkpoint_every=0)


def bench_step(preset: str, steps: int, threads: int | None) -> dict:
    from agents.memory import release_memory
    from agents.models import load_model_and_tokenizer, save_model
    from agents.train.trainer import Trainer

    rows: dict[str, list[dict]] = {d: [] for d in PRECISIONS}
    numerics = {}
    with tempfile.TemporaryDirectory() as tmp:
        first = Trainer(_config(preset, Path(tmp), "bfloat16", threads=threads, cold_start=True))
        start = time.perf_counter()
        first.cold_start()
        print(f"cold start ({first.config.optim.cold_start_steps} supervised steps, bfloat16): {time.perf_counter() - start:.0f} s", flush=True)
        model = str(save_model(first.model, first.tokenizer, Path(tmp) / "start"))
        shape = (first.config.questions_per_step * first.config.rollout.group_size, first.config.rollout.max_response_tokens)
        first.close()
        del first
        release_memory()
        for k in range(steps):
            for name in PRECISIONS if k % 2 == 0 else PRECISIONS[::-1]:
                out = _child("--step-rss", json.dumps({"preset": preset, "dtype": name, "model": model, "step": k, "numerics": k == 0}), threads)
                m = out["metrics"]
                rows[name].append(m)
                numerics.setdefault(name, out.get("numerics"))
                print(f"  step {k + 1} {name}: {m['time/step_s']:.1f} s (generate {m['time/generate_s']:.1f}, env {m['time/env_s']:.2f}, "
                      f"update {m['time/update_s']:.1f}), {m['rollout/sampled_tokens']:.0f} sampled, {m['rollout/prefill_tokens']:.0f} "
                      f"prefilled; peak RSS {m['perf/peak_rss_gb']:.2f} GB", flush=True)
        net, _ = load_model_and_tokenizer(model, dtype="float32")
        bounds = _bounds(net, *shape)
    summary = {name: {k: statistics.median(m[k] for m in ms) for k in KEYS} for name, ms in rows.items()}
    for name in PRECISIONS:
        summary[name].update(bounds[name], peak_rss_gb=max(m["perf/peak_rss_gb"] for m in rows[name]), numerics=numerics[name])
    summary["ratios"] = [a["time/step_s"] / b["time/step_s"] for a, b in zip(rows["float32"], rows["bfloat16"])]
    summary["ratio"] = statistics.median(summary["ratios"])
    return summary


def _bounds(model, rows: int, context: int) -> dict:
    """Per precision: the decode bound at the step's `rows` (its largest batch) and the prefill bound."""
    import torch

    from benchmarks.step_bound import Bound, bandwidth

    bytes_s = bandwidth()
    out = {}
    for name in PRECISIONS:
        b = Bound(model, getattr(torch, name), bytes_s)
        out[name] = {"sampled_bound_tok_s": b.decode(rows, context / 2)["tok_s"], "prefill_bound_tok_s": b.prefill()}
    return out


def sampler_vs_update(trainer) -> dict:
    """One more step's rollouts of `trainer` (its first questions, seeded), and the update's teacher-forced
    logprob of every sampled token at the trainer's precision against the sampler's: quantiles of the
    difference and of the on-policy importance ratio, and the share of ratios outside the clip range."""
    import torch

    from agents.rollout.batch import token_logprobs
    from agents.train.update import pad_batch

    c = trainer.config
    trajectories = trainer.rollout_share(list(range(c.questions_per_step)), 10_000)
    settings = trainer.learner_config.loss_settings(c.rollout.max_response_tokens)
    diffs = []
    with torch.no_grad():
        for i in range(0, len(trajectories), c.optim.micro_batch):
            chunk = trajectories[i : i + c.optim.micro_batch]
            ids = pad_batch([t.token_ids for t in chunk], trainer.tokenizer.pad_token_id, torch.long)
            attention = pad_batch([[1] * len(t.token_ids) for t in chunk], 0, torch.long)
            mask = pad_batch([t.loss_mask for t in chunk], 0, torch.float32)
            old = pad_batch([t.logprobs for t in chunk], 0.0, torch.float32)
            new = token_logprobs(trainer.model, ids, attention, temperature=c.rollout.temperature, positions=mask, dtype=trainer.compute_dtype)
            diffs.append((new - old)[mask.bool()])
    d = torch.cat(diffs).double()
    ratio = d.exp()
    q = lambda t, p: float(torch.quantile(t, p))  # noqa: E731
    outside = ((ratio < 1 - settings.eps_low) | (ratio > 1 + settings.eps_high)).double().mean()
    return {"tokens": int(d.numel()), "abs_median": q(d.abs(), 0.5), "abs_p90": q(d.abs(), 0.9), "abs_p99": q(d.abs(), 0.99),
            "abs_max": float(d.abs().max()), "ratio_min": float(ratio.min()), "ratio_p1": q(ratio, 0.01), "ratio_p99": q(ratio, 0.99),
            "ratio_max": float(ratio.max()), "outside_clip": float(outside), "clip": [1 - settings.eps_low, 1 + settings.eps_high]}


def step_rss(spec: dict) -> dict:
    """RL step `spec["step"]` of `spec`'s preset in `spec`'s precision from `spec`'s model, in this (fresh)
    process: its metrics (with the process's peak RSS as the trainer logs it), and with `spec["numerics"]`
    the sampler against the update on one more step's rollouts first (`sampler_vs_update`)."""
    from agents.train.trainer import Trainer

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(_config(spec["preset"], Path(tmp), spec["dtype"], spec["model"]))
        try:
            if spec.get("numerics"):
                out["numerics"] = sampler_vs_update(trainer)
                trainer.policy.release_memory()
            # The step's questions and seeds, as an uninterrupted run reaches that step.
            trainer.step, trainer.position = spec["step"], spec["step"] * trainer.config.questions_per_step
            out["metrics"] = trainer.train_step()
        finally:
            trainer.close()
    return out


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
    backend = PolicyChatBackend(HFPolicy(model, tok, config=HFPolicyConfig(seed=1, max_batch_rows=max(sizes), dtype="float32")),
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


def _child(option: str, value: str, threads: int | None, env: dict[str, str] | None = None) -> dict:
    """The JSON a fresh `python -m benchmarks.step option value` prints last (its own allocator and peak), with
    `env` added to this process's environment."""
    cmd = [sys.executable, "-m", "benchmarks.step", option, value]
    if threads:
        cmd += ["--threads", str(threads)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | (env or {}))
    if result.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _print_step(s: dict) -> None:
    for name in PRECISIONS:
        m = s[name]
        print(f"{name}: step {m['time/step_s']:.1f} s = generate {m['time/generate_s']:.1f} + env {m['time/env_s']:.2f} + update "
              f"{m['time/update_s']:.1f} + other {m['time/other_s']:.2f}; {m['rollout/sampled_tokens']:.0f} sampled tokens at "
              f"{m['perf/sampled_tok_s']:.1f} tok/s ({m['perf/sampled_tok_s'] / m['sampled_bound_tok_s']:.2f} of its bound "
              f"{m['sampled_bound_tok_s']:.0f} at {m['rollout/episodes']:.0f} rows), {m['rollout/prefill_tokens']:.0f} prefilled at "
              f"{m['perf/prefill_tok_s']:.0f} tok/s ({m['perf/prefill_tok_s'] / m['prefill_bound_tok_s']:.2f} of its bound "
              f"{m['prefill_bound_tok_s']:.0f}); peak RSS of a step in its own process {m['peak_rss_gb']:.2f} GB (medians)")
    print(f"RL step ratio float32 / bfloat16: {s['ratio']:.2f}x (per step: {', '.join(f'{r:.2f}' for r in s['ratios'])})")
    for name in PRECISIONS:
        n = s[name]["numerics"]
        print(f"{name} update vs sampler, {n['tokens']} sampled tokens: |logprob difference| median {n['abs_median']:.1e}, p90 "
              f"{n['abs_p90']:.1e}, p99 {n['abs_p99']:.1e}, max {n['abs_max']:.1e}; on-policy ratio min {n['ratio_min']:.3f}, p1 "
              f"{n['ratio_p1']:.3f}, p99 {n['ratio_p99']:.3f}, max {n['ratio_max']:.3f}; outside the clip range "
              f"[{n['clip'][0]:g}, {n['clip'][1]:g}]: {n['outside_clip']:.2%}", flush=True)


def _print_bound(results: dict) -> None:
    for key, runs in results.items():
        for b in runs:
            print(f"{key}: memory bandwidth {b['bandwidth_gb_s']:.1f} GB/s, sampler weights {b['weight_bytes'] / 1e6:.0f} MB")
            for batch, m in b["batches"].items():
                print(f"  batch {batch:>2}: {m['tok_s']:7.1f} sampled tok/s, bound {m['bound_tok_s']:7.1f} ({m['limit']}-bound): "
                      f"{m['fraction']:.2f} of the bound; {m['sys_share']:.0%} of the CPU time in the kernel", flush=True)
    rate = {k: {b: statistics.median(r["batches"][b]["tok_s"] for r in runs) for b in runs[0]["batches"]} for k, runs in results.items()}
    for allocator in ("glibc", "tuned"):
        print(f"sampled tok/s bfloat16 / float32, {allocator} (medians over rounds): "
              + ", ".join(f"batch {b} {rate[f'{allocator} bfloat16'][b] / rate[f'{allocator} float32'][b]:.2f}x" for b in rate[f"{allocator} float32"]))
    for name in PRECISIONS:
        print(f"sampled tok/s tuned / glibc, {name}: "
              + ", ".join(f"batch {b} {rate[f'tuned {name}'][b] / rate[f'glibc {name}'][b]:.2f}x" for b in rate[f"tuned {name}"]), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2, help="RL steps per precision (part 1)")
    p.add_argument("--preset", default="cpu-learn", help="the agents.experiments.learners preset whose shape part 1 takes")
    p.add_argument("--threads", type=int, default=None, help="threads for torch and BLAS (default: the physical cores)")
    p.add_argument("--skip", nargs="*", default=[], choices=["step", "bound", "memory", "ranker"])
    p.add_argument("--bound-rounds", type=int, default=2, help="part 2's rounds of one process per allocator and precision, in turn")
    p.add_argument("--memory-only", nargs="+", default=None, metavar="TEXT", help="part 3 measures only the settings whose names "
                   "contain one of these (e.g. bfloat16; the float32 settings under glibc's allocator need ~10 GB free)")
    p.add_argument("--out", default=None, help="also write the figures as JSON here")
    p.add_argument("--update-rss", default=None, help=argparse.SUPPRESS)  # internal: part 3's child process
    p.add_argument("--bound", default=None, help=argparse.SUPPRESS)  # internal: part 2's child ("allocator dtype")
    p.add_argument("--step-rss", default=None, help=argparse.SUPPRESS)  # internal: part 1's child
    args = p.parse_args(argv)
    from searchgym.threads import set_threads

    threads = set_threads(args.threads)
    if args.update_rss is None:
        from agents.memory import ask_huge_pages

        ask_huge_pages()  # the trainer's default (TrainConfig.huge_pages), for every child; part 3's children set their own
    if args.update_rss is not None:
        from benchmarks.step_memory import update_rss

        print(json.dumps(update_rss(json.loads(args.update_rss))))
        return 0
    if args.bound is not None:
        from benchmarks.step_bound import bench_bound

        print(json.dumps(bench_bound(*args.bound.split())))
        return 0
    if args.step_rss is not None:
        print(json.dumps(step_rss(json.loads(args.step_rss))))
        return 0
    from searchgym.retrieval.encoders import cpu_has_native_bf16

    flags = sorted({f for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith(("flags", "Features"))
                    for f in line.split(":", 1)[1].split() if "bf16" in f}) if Path("/proc/cpuinfo").exists() else []
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f}, CPU bfloat16 flags {' '.join(flags) or 'none'} "
          f"(native: {cpu_has_native_bf16()})", flush=True)
    results: dict = {"threads": threads, "bf16_flags": flags}
    if "step" not in args.skip:
        print(f"\n== 1. RL step of the {args.preset} preset's shape: float32 and bfloat16, in turn", flush=True)
        results["step"] = bench_step(args.preset, args.steps, args.threads)
        _print_step(results["step"])
    if "bound" not in args.skip:
        print(f"\n== 2. Decode bound (SmolLM2-135M) per allocator and precision, {args.bound_rounds} round(s), a fresh process each",
              flush=True)
        results["bound"] = {f"{a} {d}": [] for a in ("glibc", "tuned") for d in PRECISIONS}
        for _ in range(args.bound_rounds):
            for key in results["bound"]:
                results["bound"][key].append(_child("--bound", key, args.threads))
        _print_bound(results["bound"])
    if "memory" not in args.skip:
        from benchmarks.step_memory import MEMORY_SETTINGS

        print("\n== 3. Peak RSS of the CPU preset's update (a fresh process each)", flush=True)
        results["memory"] = {}
        for name, setting in MEMORY_SETTINGS.items():
            if args.memory_only and not any(text in name for text in args.memory_only):
                continue
            off = {} if setting.get("huge_pages", True) else {"THP_MEM_ALLOC_ENABLE": "0"}
            m = results["memory"][name] = _child("--update-rss", json.dumps(setting), args.threads, off)
            print(f"  {name}: peak RSS {m['peak_rss_gb']:.2f} GB, update {m['update_s']:.1f} s ({m['sys_share']:.0%} of its CPU time "
                  f"in the kernel, {m['minor_faults'] / 1e6:.1f} M page faults; huge pages {'on' if m['huge_pages'] else 'off'})", flush=True)
    if "ranker" not in args.skip:
        print("\n== 4. COSEARCH's ranker calls of one turn: one at a time vs gathered into one batch", flush=True)
        results["ranker"] = bench_ranker((8, 32), args.threads)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
