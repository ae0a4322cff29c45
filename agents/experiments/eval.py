"""Evaluate a policy (a model name, a local folder, or a training checkpoint) on any searchgym env.

Reports, over `--questions` questions with `--k` samples each:
- EM, F1 and cover-EM averaged over all samples (Avg@k; CW-GRPO reports Avg@4 EM) and Pass@k of EM
  (E-GRPO reports Pass@1 and Pass@3);
- searches and turns per episode, sampled tokens per episode, invalid-action rate, how episodes ended;
- per-turn label statistics when the env has a judge (share of search rounds with u=1, v=1, p=1) and the
  gold-entity match rate.

Every result carries a fingerprint (dataset file hash, corpus hash, retriever and ranker config, prompt
template hash, model, sampling settings, package version); `comparable(a, b)` says whether two results
may be compared. Results are written as JSON plus a Markdown table.

    python -m agents.experiments.eval --env SearchQA-Synthetic-v0 --env-arg hops=1 --model smollm2-135m --questions 50 --k 4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import searchgym
from agents.precision import PRECISIONS

FINGERPRINT_KEYS = ("dataset", "corpus", "retriever", "ranker", "judge", "prompt", "env", "model", "sampling")
"""What must be equal for two results to be comparable (the package version is informative only)."""


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def env_fingerprint(env: gym.Env) -> dict[str, Any]:
    """What determines an env's questions, documents and scoring."""
    base = env.unwrapped
    if hasattr(base, "world"):
        questions = [(r.id, r.question, r.answers) for r in base.records]
        dataset = {"synthetic": _hash(questions), "questions": len(questions)}
    else:
        dataset = {"file_sha256": getattr(base, "data_sha256", None), "questions": len(base.records)}
    corpus = getattr(base, "corpus", None)
    judge = getattr(base, "judge", None)
    return {
        "dataset": dataset,
        "corpus": None if corpus is None else {"sha256": corpus.content_hash, "documents": len(corpus)},
        "retriever": base.retriever.describe(),
        "ranker": base.ranker.describe(),
        "judge": None if judge is None else type(judge).__name__,
        "prompt": _hash(base.protocol.render_prompt("{question}")),
        "env": {"top_k": base.top_k, "candidates": base.candidates, "max_turns": base.max_turns, "action_format": base.protocol.name,
                "doc_format": getattr(base.protocol, "doc_format", None), "max_query_chars": getattr(base.protocol, "max_query_chars", None),
                "answer_reward": _reward_name(base.answer_reward)},
    }


def _reward_name(reward: Callable) -> str:
    """A registered answer reward's name (`em`, `f1`, ...), or a custom function's qualified name."""
    from searchgym.rewards import ANSWER_REWARDS

    named = next((name for name, fn in ANSWER_REWARDS.items() if fn is reward), None)
    return named or f"{getattr(reward, '__module__', '?')}.{getattr(reward, '__qualname__', type(reward).__name__)}"


def comparable(a: dict[str, Any], b: dict[str, Any], *, ignore: Sequence[str] = ("model",)) -> bool:
    """True when two results' fingerprints agree on everything but `ignore` (by default the model, so that
    two models on the same setup compare; nothing else may differ)."""
    fa, fb = a["fingerprint"], b["fingerprint"]
    return all(fa.get(k) == fb.get(k) for k in FINGERPRINT_KEYS if k not in ignore)


def summarize(trajectories: Sequence[Any], k: int) -> dict[str, float]:
    """Metrics over group-major trajectories (k samples per question)."""
    episodes = [t.step_infos[-1].get("episode", {}) if t.step_infos else {} for t in trajectories]
    em = np.array([e.get("em", 0.0) for e in episodes]).reshape(-1, k)
    infos = [i for t in trajectories for i in t.step_infos]
    labels = [i["labels"] for i in infos if i.get("action") == "search" and i.get("labels")]
    turn_labels = [lab for e in episodes for lab in (e.get("turn_labels") or []) if lab and lab.get("retrieval_utility") is not None]
    labels = turn_labels or labels
    rates = [e["entity_rate"] for e in episodes if e.get("entity_rate") is not None]
    ends = [t.finish_reason for t in trajectories]
    out = {
        f"avg@{k}/em": float(em.mean()),
        f"avg@{k}/f1": float(np.mean([e.get("f1", 0.0) for e in episodes])),
        f"avg@{k}/cover_em": float(np.mean([e.get("cover_em", 0.0) for e in episodes])),
        f"avg@{k}/subem": float(np.mean([e.get("subem", 0.0) for e in episodes])),
        f"pass@{k}/em": float((em.max(axis=1) >= 1.0).mean()),
        "searches_per_episode": float(np.mean([e.get("searches", 0) for e in episodes])),
        "turns_per_episode": float(np.mean([t.num_turns for t in trajectories])),
        "tokens_per_episode": float(np.mean([t.num_sampled_tokens for t in trajectories])),
        "invalid_action_rate": float(np.mean([i.get("invalid_action", False) for i in infos])) if infos else 0.0,
        "answered_rate": ends.count("answered") / len(ends),
        "over_long_rate": ends.count("over_long") / len(ends),
        "entity_rate": float(np.mean(rates)) if rates else math.nan,
    }
    if k > 1:
        out["pass@1/em"] = float(em[:, 0].mean())
    if labels:
        out["labels/retrieval_utility"] = float(np.mean([lab["retrieval_utility"] or 0 for lab in labels]))
        out["labels/reasoning_correctness"] = float(np.mean([lab["reasoning_correctness"] or 0 for lab in labels]))
        out["labels/contribution"] = float(np.mean([lab["contribution"] or 0 for lab in labels]))
    return out


def evaluate(policy, make_env: Callable[[], gym.Env], *, questions: int, k: int = 1, temperature: float = 0.0,
             max_turn_tokens: int = 64, max_response_tokens: int = 512, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Run `k` samples on each of the first `questions` questions and return metrics plus fingerprint.
    `progress`: a bar on stderr of the policy's forward passes against their upper bound (in-process policies;
    a served one shows the elapsed time)."""
    from agents.rollout import RolloutConfig, RolloutEngine
    from agents.experiments.progress import counting_passes, generation_budget, phase

    if k > 1 and temperature == 0:
        raise ValueError("k > 1 samples need temperature > 0 (greedy samples would be identical)")
    sampling = {"k": k, "temperature": temperature, "max_turn_tokens": max_turn_tokens, "max_response_tokens": max_response_tokens, "seed": seed}
    engine = RolloutEngine(policy, make_env, RolloutConfig(group_size=k, temperature=temperature, max_turn_tokens=max_turn_tokens,
                                                           max_response_tokens=max_response_tokens, seed=seed))
    try:
        probe = make_env()
        n = min(questions, len(probe.unwrapped.records))
        starts = [{"options": {"index": i}} for i in range(n)]
        if progress:
            rows = getattr(getattr(policy, "config", None), "max_batch_rows", None)
            budget = generation_budget(n, probe.unwrapped.max_turns, max_turn_tokens, max(1, rows // k) if rows else None)
            with phase(f"[eval] {n} questions x {k} samples (model passes, at most)", budget, "pass") as bar, \
                    counting_passes(getattr(policy, "sampling_model", None), bar):
                trajectories = engine.rollout(starts)
        else:
            trajectories = engine.rollout(starts)
        fingerprint = {**env_fingerprint(probe), "model": policy.describe(), "sampling": sampling, "version": searchgym.__version__}
    finally:
        engine.close()
    return {"metrics": summarize(trajectories, k), "fingerprint": fingerprint, "questions": n}


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    """One row per named result, one column per metric, plus a short fingerprint id."""
    keys = sorted({m for r in results.values() for m in r["metrics"]})
    lines = ["| run | " + " | ".join(keys) + " | fingerprint |", "|---" * (len(keys) + 2) + "|"]
    for name, r in results.items():
        fp = _hash({k: v for k, v in r["fingerprint"].items() if k in FINGERPRINT_KEYS and k != "model"})
        cells = [f"{r['metrics'][k]:.3f}" if isinstance(r["metrics"].get(k), float) else "-" for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {fp} |")
    return "\n".join(lines)


def load_policy(model: str, checkpoint: str | None = None, seed: int = 0, dtype: str = "auto"):
    """An `HFPolicy` for `model` (a name or folder), with a training checkpoint's policy weights on top,
    computing in `dtype` (`agents.precision`: float32 weights, bfloat16 matmuls where `dtype` asks)."""
    from agents.models import load_model_and_tokenizer
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    net, tok = load_model_and_tokenizer(model, dtype="float32")
    if checkpoint is not None:
        from agents.train.checkpoint import load_policy_weights

        load_policy_weights(checkpoint, net, model)
    return HFPolicy(net, tok, config=HFPolicyConfig(model=model, seed=seed, dtype=dtype))


def _env_args(pairs: Sequence[str]) -> dict[str, Any]:
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="evaluate a policy on a searchgym env")
    p.add_argument("--env", default="SearchQA-Synthetic-v0")
    p.add_argument("--env-arg", action="append", default=[], help="KEY=VALUE passed to gym.make (JSON values), repeatable")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--checkpoint", default=None, help="a training checkpoint folder (step-NNNNNN) to load on top of --model")
    p.add_argument("--questions", type=int, default=50)
    p.add_argument("--k", type=int, default=1)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-turn-tokens", type=int, default=64)
    p.add_argument("--out", default="results/eval")
    p.add_argument("--threads", type=int, default=None, help="threads for torch, numba and BLAS (default: the physical cores)")
    p.add_argument("--dtype", choices=PRECISIONS, default="auto", help="the policy's precision (agents.precision): auto is bfloat16 "
                   "on a CPU with native bfloat16 instructions, float32 elsewhere")
    args = p.parse_args(argv)
    from searchgym.threads import set_threads

    set_threads(args.threads)
    from agents.memory import ask_huge_pages

    ask_huge_pages()
    kwargs = _env_args(args.env_arg)
    if args.env == "SearchQA-Synthetic-v0":
        kwargs.setdefault("split", "test")
    policy = load_policy(args.model, args.checkpoint, dtype=args.dtype)
    result = evaluate(policy, lambda: gym.make(args.env, **kwargs), questions=args.questions, k=args.k,
                      temperature=args.temperature if args.k == 1 else max(args.temperature, 1.0), max_turn_tokens=args.max_turn_tokens,
                      progress=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=2, default=str))
    table = markdown_table({args.model + (f" @ {Path(args.checkpoint).name}" if args.checkpoint else ""): result})
    (out / "result.md").write_text(table + "\n")
    print(table)
    print(f"\nwritten: {out / 'result.json'}, {out / 'result.md'}")
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
