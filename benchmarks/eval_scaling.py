"""Greedy evaluation against its own size: time per question and peak memory at 100, 400 and 1,000 questions.

An in-process evaluation keeps every episode's keys and values between turns only within its KV budget
(`HFPolicyConfig.max_kept_gb`); the rollout engine therefore runs as many episodes at once as that budget
holds (`HFPolicy.episodes_at_once`), wave after wave, on the same envs. The cost per question should then not
depend on how many questions there are: this measures it, each size in a fresh process (so its peak RSS is
its own), on the learning check's setting (2-hop synthetic test questions, 4 turns, 1 document shown, the
short prompt, 64-token turns, 512-token episodes) with a policy cold-started as the learning check's is
(`--model` skips the cold start). The world has `--entities` entities, enough for the largest size, and
every size answers the first questions of the same list. Prints, per size: seconds, seconds per question,
model passes and seconds per pass, the waves' size, prefilled and reused prompt tokens, peak RSS and the
share of CPU time in the kernel; then each size's time per question and peak RSS over the smallest's.

    python -m benchmarks.eval_scaling [--questions 100 400 1000] [--model DIR] [--dtype auto] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _env_maker(entities: int, questions: int, cache: str):
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the env ids)
    from agents.experiments.presets import PRESETS

    p = PRESETS["cpu-learn"]
    kwargs = dict(split="test", num_entities=entities, hops=p.hops, num_questions=questions, seed=0, max_turns=p.max_turns,
                  top_k=p.top_k, template=p.template, cache_dir=cache)
    return lambda: gym.make("SearchQA-Synthetic-v0", **kwargs)


def cold_start(out: Path, threads: int | None) -> Path:
    """The learning check's start policy (its preset's cold start, seed 0), saved under `out`."""
    from agents.experiments.presets import PRESETS
    from agents.experiments.runner import train_config
    from agents.models import save_model
    from agents.train.trainer import Trainer

    p = PRESETS["cpu-learn"]
    trainer = Trainer(train_config(p, 1, 0, out, {}, threads, "grpo", p.model, "cold_start", cold_start_steps=p.cold_start_steps))
    try:
        trainer.cold_start()
        return save_model(trainer.model, trainer.tokenizer, out / "start")
    finally:
        trainer.close()


def evaluate_size(spec: dict) -> dict:
    """One greedy evaluation of `spec["questions"]` questions in this (fresh) process, with the trainer's
    allocator setting."""
    from agents.experiments.eval import load_policy
    from agents.experiments.presets import PRESETS
    from agents.memory import peak_rss_gb, tune_allocator
    from agents.rollout import RolloutConfig
    from agents.train.config import TrainConfig
    from agents.train.evaluate import evaluate_policy

    threshold = TrainConfig.__dataclass_fields__["malloc_mmap_threshold"].default
    tune_allocator(threshold)
    p = PRESETS["cpu-learn"]
    policy = load_policy(spec["model"], dtype=spec["dtype"])
    passes = [0]
    policy.sampling_model.get_decoder().register_forward_hook(lambda *_: passes.__setitem__(0, passes[0] + 1))
    config = RolloutConfig(max_turn_tokens=p.max_turn_tokens, max_response_tokens=p.max_response_tokens)
    make_env = _env_maker(spec["entities"], spec["largest"], spec["cache"])
    n = spec["questions"]
    probe = make_env()
    first = policy.tokenizer.encode(policy.tokenizer.apply_chat_template([{"role": "user", "content": probe.reset(options={"index": 0})[0]}],
                                                                        add_generation_prompt=True, tokenize=False), add_special_tokens=False)
    probe.close()
    cpu, start = os.times(), time.perf_counter()
    evaluation = evaluate_policy(policy, make_env, config, n)
    seconds = time.perf_counter() - start
    user, system = os.times().user - cpu.user, os.times().system - cpu.system
    return {"questions": n, "seconds": seconds, "s_per_question": seconds / n, "passes": passes[0], "s_per_pass": seconds / max(passes[0], 1),
            "wave": policy.episodes_at_once(len(first) + p.max_response_tokens), "prefill_tokens": policy.stats.prefill_tokens,
            "reused_tokens": policy.stats.reused_tokens, "sampled_tokens": policy.stats.sampled_tokens, "peak_rss_gb": peak_rss_gb(),
            "sys_share": system / max(user + system, 1e-9), "em": evaluation.metrics["eval/em"], "dtype": str(policy.compute_dtype)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, nargs="+", default=[100, 400, 1000], help="evaluation sizes, each in its own process")
    p.add_argument("--model", default=None, help="a model folder to evaluate (default: cold-start SmolLM2-135M as the learning check does)")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="the policy's precision (agents.precision)")
    p.add_argument("--entities", type=int, default=2000, help="synthetic world size (1,000 entities give only 939 two-hop test questions)")
    p.add_argument("--threads", type=int, default=None, help="threads for torch and BLAS (default: the physical cores)")
    p.add_argument("--out", default=None, help="also write the figures as JSON here")
    p.add_argument("--size", default=None, help=argparse.SUPPRESS)  # internal: one size's child process
    args = p.parse_args(argv)
    from searchgym.threads import set_threads

    threads = set_threads(args.threads)
    from agents.memory import ask_huge_pages

    ask_huge_pages()  # the trainer's default (TrainConfig.huge_pages), before this process's first tensor; its children inherit it
    if args.size is not None:
        print(json.dumps(evaluate_size(json.loads(args.size))))
        return 0
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            start = time.perf_counter()
            model = str(cold_start(Path(tmp), args.threads))
            print(f"cold start: {time.perf_counter() - start:.0f} s", flush=True)
        for n in sorted(args.questions):
            spec = {"model": model, "dtype": args.dtype, "questions": n, "largest": max(args.questions), "entities": args.entities,
                    "cache": str(Path(tmp) / "cache")}
            cmd = [sys.executable, "-m", "benchmarks.eval_scaling", "--size", json.dumps(spec)] + (["--threads", str(args.threads)] if args.threads else [])
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(r)
            print(f"{n:>5} questions: {r['seconds']:.0f} s, {r['s_per_question']:.2f} s/question, {r['passes']} model passes "
                  f"({r['s_per_pass']:.2f} s each), waves of {r['wave']} episodes, {r['prefill_tokens']} prefilled and {r['reused_tokens']} "
                  f"reused prompt tokens, {r['sampled_tokens']} sampled; peak RSS {r['peak_rss_gb']:.2f} GB, {r['sys_share']:.0%} of the "
                  f"CPU time in the kernel; EM {r['em']:.3f} ({r['dtype']})", flush=True)
    first = results[0]
    print("over the smallest size: " + "; ".join(f"{r['questions']} questions: time per question {r['s_per_question'] / first['s_per_question']:.2f}x, "
                                                 f"peak RSS {r['peak_rss_gb'] / first['peak_rss_gb']:.2f}x" for r in results[1:]))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
