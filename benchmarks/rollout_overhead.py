"""Rollout engine overhead: multi-turn rollouts against bare `model.generate` for the same tokens.

With SmolLM2-135M-Instruct (`smollm2-135m`, in-process `HFPolicy`) on `SearchQA-Synthetic-v0`, this
prints in one run:

1. `HFPolicy` decode throughput (generated tokens/s) at batch 1 and batch `--batch`, next to bare
   `model.generate` on the same prompt and length;
2. the rollout engine's throughput (generated tokens/s, env steps/s) on `--batch` questions, and the time
   of bare `model.generate` on exactly the same contexts, one call per engine turn, each forced to write
   as many tokens as the longest completion of that turn (what a padded batch decodes). The ratio
   engine / bare is the engine's overhead: chat templating, stop strings, tokenizing observations,
   env steps and bookkeeping (target < 1.2 at batch 8 on CPU).

Runs alternate engine and bare passes (`--repeats` each) and report medians (for the overhead, the median
of the paired per-repeat ratios), because a shared CPU drifts.

    python -m benchmarks.rollout_overhead [--batch 8] [--turn-tokens 32] [--max-turns 2] [--repeats 2]
    python -m benchmarks.rollout_overhead --sglang-url http://127.0.0.1:30000 --model MODEL_DIR   # served
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field

import gymnasium as gym
import torch

import searchgym  # noqa: F401  (registers the env ids)
from agents.policies import SamplingParams
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.rollout import RolloutConfig, RolloutEngine, rollout_metrics


@dataclass
class Recorder:
    """Wraps a policy and records every call's contexts and completion lengths, and its time."""

    policy: HFPolicy
    calls: list[tuple[list[list[int]], int, list[int]]] = field(default_factory=list)
    seconds: float = 0.0

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def generate(self, prompts, params, *, max_new_tokens=None):
        start = time.perf_counter()
        out = self.policy.generate(prompts, params, max_new_tokens=max_new_tokens)
        self.seconds += time.perf_counter() - start
        lengths = [len(c.token_ids) for group in out for c in group]
        self.calls.append(([list(p) for p in prompts], params.n, lengths))
        return out


class TimedEnv(gym.Wrapper):
    seconds = 0.0
    steps = 0

    def step(self, action):
        start = time.perf_counter()
        try:
            return super().step(action)
        finally:
            TimedEnv.seconds += time.perf_counter() - start
            TimedEnv.steps += 1


def bare_generate(model, pad_id: int, prompts: list[list[int]], n: int, new_tokens: int, temperature: float) -> float:
    """Seconds for `model.generate` to sample `new_tokens` for every row (left-padded, as HF expects)."""
    rows = [p for p in prompts for _ in range(n)]
    width = max(len(p) for p in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(rows):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
            temperature=temperature, top_p=1.0, top_k=0, pad_token_id=pad_id,
        )
    return time.perf_counter() - start


def decode_throughput(policy: HFPolicy, prompt: list[int], batch: int, tokens: int, repeats: int) -> tuple[float, float]:
    """Median generated tokens/s of HFPolicy and of bare generate, in alternating passes."""
    params = SamplingParams(max_new_tokens=tokens, stop_token_ids=())
    ours, bare = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        outs = policy.generate([prompt] * batch, params)
        ours.append(sum(len(g[0].token_ids) for g in outs) / (time.perf_counter() - start))
        bare.append(batch * tokens / bare_generate(policy.model, policy.tokenizer.pad_token_id, [prompt], batch, tokens, 1.0))
    return statistics.median(ours), statistics.median(bare)


def rollouts(policy, args, *, baseline: bool) -> None:
    """Part 2: time `--repeats` engine rollouts; with `baseline`, bare generate on the same contexts."""
    tok = policy.tokenizer
    print(f"\n2. rollouts: {args.batch} questions, up to {args.max_turns} turns of {args.turn_tokens} tokens")
    config = RolloutConfig(group_size=1, temperature=1.0, max_turn_tokens=args.turn_tokens, max_response_tokens=4096, seed=0)
    # judge=None: the engine's own overhead is measured, not the gold judge's (`benchmarks.judge_overhead`).
    make = lambda: TimedEnv(gym.make("SearchQA-Synthetic-v0", num_entities=args.entities, cache_dir=False, max_turns=args.max_turns, judge=None))
    resets = [{"seed": 100 + i} for i in range(args.batch)]
    engine_s, bare_s, gen_s, tokens, steps, env_s = [], [], [], [], [], []
    for _ in range(args.repeats):
        recorder = Recorder(policy)
        engine = RolloutEngine(recorder, make, config)  # type: ignore[arg-type]
        engine.reserve(len(resets))  # builds the envs (world, index) outside the timing
        engine.rollout(resets[:1])  # and warms up tokenizer and retriever
        recorder.calls.clear()
        recorder.seconds = 0.0
        TimedEnv.seconds, TimedEnv.steps = 0.0, 0
        start = time.perf_counter()
        trajectories = engine.rollout(resets)
        engine_s.append(time.perf_counter() - start)
        gen_s.append(recorder.seconds)
        env_s.append(TimedEnv.seconds)
        steps.append(TimedEnv.steps)
        tokens.append(sum(t.num_sampled_tokens for t in trajectories))
        if baseline:
            bare_s.append(sum(bare_generate(policy.model, tok.pad_token_id, p, n, max(lengths), 1.0) for p, n, lengths in recorder.calls))
        engine.close()
    metrics = rollout_metrics(trajectories)
    e, g = statistics.median(engine_s), statistics.median(gen_s)
    print(f"   turns per episode {metrics['rollout/turns_mean']:.2f}, ends: " + ", ".join(f"{k.split('/')[-1]} {v:.2f}" for k, v in metrics.items() if k.startswith("rollout/end/")))
    print(f"   engine: {e:.2f} s, {statistics.median(tokens) / e:.1f} generated tok/s, {statistics.median(steps) / e:.2f} env steps/s (env alone {sum(steps) / max(sum(env_s), 1e-9):.0f} steps/s)")
    print(f"   of which policy.generate {g:.2f} s; env steps {statistics.median(env_s):.3f} s; other engine work {e - g - statistics.median(env_s):.3f} s")
    print(f"   engine / its own policy.generate time: {e / g:.3f}")
    if baseline:
        b = statistics.median(bare_s)
        print(f"   bare model.generate on the same contexts and lengths: {b:.2f} s")
        # Each repeat's engine and bare passes run back to back, so their ratio is the paired, drift-robust measure.
        paired = [x / y for x, y in zip(engine_s, bare_s)]
        print(f"   overhead ratio engine / bare generate (median of paired repeats): {statistics.median(paired):.2f}   (per repeat: {', '.join(f'{r:.2f}' for r in paired)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="the model (HFPolicy) or, with --sglang-url, its tokenizer")
    parser.add_argument("--sglang-url", default=None, help="roll out through this SGLang server instead (part 2 only, no baseline)")
    parser.add_argument("--batch", type=int, default=8, help="questions per rollout (group size 1)")
    parser.add_argument("--turn-tokens", type=int, default=32, help="max tokens per turn")
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--decode-tokens", type=int, default=32, help="tokens per row in the decode-throughput part")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--entities", type=int, default=300, help="size of the synthetic world")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")

    if args.sglang_url:
        from transformers import AutoTokenizer

        from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
        from searchgym.backends.models import resolve_model

        policy = SGLangPolicy(SGLangPolicyConfig(url=args.sglang_url), tokenizer=AutoTokenizer.from_pretrained(resolve_model(args.model)))
        print(f"policy: SGLang server at {args.sglang_url}")
        rollouts(policy, args, baseline=False)
        policy.close()
        return

    # float32, as the bare `model.generate` it is compared with: the engine's own overhead, not the precision's.
    policy = HFPolicy.from_config(HFPolicyConfig(model=args.model, seed=0, dtype="float32"))
    tok = policy.tokenizer
    env = gym.make("SearchQA-Synthetic-v0", num_entities=args.entities, cache_dir=False)
    obs, _ = env.reset(seed=0)
    prompt = tok.encode(tok.apply_chat_template([{"role": "user", "content": obs}], add_generation_prompt=True, tokenize=False), add_special_tokens=False)
    policy.generate([prompt], SamplingParams(max_new_tokens=2))  # warm-up

    print(f"\n1. decode throughput, prompt of {len(prompt)} tokens, {args.decode_tokens} new tokens per row (generated tokens/s)")
    for batch in sorted({1, args.batch}):
        ours, bare = decode_throughput(policy, prompt, batch, args.decode_tokens, args.repeats)
        print(f"   batch {batch:2d}: HFPolicy {ours:7.1f} tok/s   model.generate {bare:7.1f} tok/s   ratio (time) {bare / ours:.2f}")
    rollouts(policy, args, baseline=True)


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
