"""COSEARCH's ranker before and after its supervised cold start on oracle reranks.

Loads the ranker's model (SmolLM2-135M by default, as `CoSearchConfig` uses the agent's model), asks it for
held-out ranker requests (the oracle searches of the synthetic world's test split, N = `ranker_candidates`
retrieved candidates each, k = `--top-k`), trains it with `agents.learners.ranker_sft` on the train split's
oracle reranks with `CoSearchConfig`'s cold-start settings, and asks again after each count in `--steps`.
At each point it prints, at the ranker's sampling temperature (`ranker_temperature`, 1.0) and greedy: the
strict valid rate (`parse_rerank(strict=True)`, the official validator), answer-bearing Hit@1 of the shown
order against the retriever's order (over the requests whose candidates hold an answer), and useful@1 (the
first shown candidate is a gold passage or an answer holder, over all requests). The held-out sub-queries
are the oracle's searches (`--queries oracle`: what the cold start trains on, where BM25 already puts a
useful candidate first) or each question itself (`--queries question`).

    python -m agents.experiments.ranker_cold_start --steps 10 20 40 --requests 50

Over a question file with gold titles (HotpotQA's, as `cpu-hotpotqa` runs COSEARCH), `--data-path FILE`
trains on the file's first `--train-questions` questions and holds out the oracle searches of those after
them, with the env `--env` builds over it (k = `--top-k`, 1 in the learning-check presets):

    python -m agents.experiments.ranker_cold_start --data-path ../shared/data/hotpotqa/hotpot_train_sample_hf.jsonl \
        --train-questions 100 --top-k 1 --steps 10 --requests 50 --threads 1 --dtype float32

On a learning-check preset's synthetic world (`--preset cpu-ranker`: its entities, hops, k, world seed and
env options, such as the decoys that make the retriever's first candidate miss), with the requests held out
from the world's validation split (`--held-out validation`, for choosing a setting without test questions;
a preset with a validation split holds out from it by default)
and the ranker starting from that preset's cold-started policy, as a COSEARCH run's does (`--model DIR`):

    python -m agents.experiments.ranker_cold_start --preset cpu-ranker --held-out validation \
        --model results/cpu-ranker/seed0/cold_start/model --steps 10 30 60 --requests 50 --threads 1 --dtype float32
"""

from __future__ import annotations

import argparse
import time
from functools import partial

from agents.learners import CoSearchConfig

TEMPERATURES = (("T=1.0", None), ("greedy", 0.0))


def held_out(env, count: int, candidates: int, question_as_query: bool):
    """The first `count` oracle reranks of `env`'s questions, in question order."""
    from agents.learners.ranker_sft import oracle_reranks

    out = []
    for index in range(len(env.unwrapped.records)):
        out.extend(oracle_reranks(env, index, candidates=candidates, question_as_query=question_as_query))
        if len(out) >= count:
            return out[:count]
    raise SystemExit(f"the held-out questions hold only {len(out)} oracle searches; ask fewer --requests or more --test-questions")


def synthetic_world(args: argparse.Namespace) -> tuple[dict, str]:
    """The synthetic world's `gym.make` keywords: `--preset`'s world as the signature analyses read it
    (`signatures.Setting.from_preset`: entities, hops, k, world seed, env options), else `--num-entities`,
    `--hops`, `--top-k` and `--seed`; `--env-option` on top. With the split held out: `--held-out`, else the
    preset's validation split where it has one (its test questions serve the learning check alone), else test."""
    from agents.experiments.presets import PRESETS, parse_env_options
    from agents.experiments.signatures import Setting

    if args.preset:
        preset = PRESETS.get(args.preset)
        if preset is None:
            raise SystemExit(f"no preset {args.preset!r}; presets: {', '.join(PRESETS)}")
        if preset.env_id != "SearchQA-Synthetic-v0":
            raise SystemExit(f"preset {args.preset} runs {preset.env_id}, not the synthetic world: use --data-path")
        setting = Setting.from_preset(preset)
        world = {"num_entities": setting.num_entities, "hops": setting.hops, "top_k": setting.top_k, "seed": setting.world_seed,
                 **setting.env_options}
        split = args.held_out or setting.split
    else:
        world = {"num_entities": args.num_entities, "hops": tuple(args.hops), "top_k": args.top_k, "seed": args.seed}
        split = args.held_out or "test"
    return parse_env_options(args.env_option, world), split


def measure(backend, ranker, reranks, config: CoSearchConfig, label: str, started: float, show: int = 0,
            temperatures=TEMPERATURES) -> None:
    from agents.learners.ranker_sft import rerank_quality

    for name, temperature in temperatures:
        backend.temperature = config.ranker_temperature if temperature is None else temperature
        m = rerank_quality(ranker, reranks, config.hit_ks)
        for _, raw in list(backend.log)[:show]:
            print(f"{'':>24} output: {raw!r}", flush=True)
        backend.clear()
        hit = (f"Hit@1 {m['ranker/hit@1']:.2f} (retriever {m['ranker/retriever_hit@1']:.2f}, {m['ranker/answerable_calls']:.0f} answerable)"
               if "ranker/hit@1" in m else "no answerable request")
        kept = f"  kept order {m['ranker/kept_order_rate']:.2f}" if "ranker/kept_order_rate" in m else ""
        print(f"{label:>16} {name:>6}: valid {m['ranker/valid_rate']:.2f}  {hit}  useful@1 {m['ranker/useful@1']:.2f} "
              f"(retriever {m['ranker/retriever_useful@1']:.2f}){kept}  [{time.perf_counter() - started:.0f} s]", flush=True)
        errors = {k.removeprefix("ranker/error_"): v for k, v in m.items() if k.startswith("ranker/error_")}
        if errors:
            print(f"{'':>24} invalid: " + ", ".join(f"{k} {v:.2f}" for k, v in errors.items()), flush=True)


def main(argv: list[str] | None = None) -> None:
    defaults = CoSearchConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, nargs="+", default=[defaults.ranker_cold_start_steps],
                   help="supervised step counts to measure after (one run of the last; greedy only after the last)")
    p.add_argument("--requests", type=int, default=50, help="held-out ranker requests (test split)")
    p.add_argument("--queries", choices=("oracle", "question"), default="oracle",
                   help="held-out sub-queries: the oracle's searches, or each question itself (the retriever's first "
                        "candidate is then often not useful, so Hit@1 can rise)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--batch", type=int, default=defaults.ranker_cold_start_batch)
    p.add_argument("--lr", type=float, default=defaults.ranker_cold_start_lr)
    p.add_argument("--top-k", type=int, default=2, help="documents the ranker chooses (EnvConfig.top_k's default)")
    p.add_argument("--hops", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--num-entities", type=int, default=1000)
    p.add_argument("--train-questions", type=int, default=200,
                   help="synthetic train-split questions; with --data-path, the file's first questions, trained on")
    p.add_argument("--test-questions", type=int, default=100,
                   help="synthetic test-split questions; with --data-path, the held-out questions after the training ones")
    p.add_argument("--preset", help="a learning-check preset over the synthetic world (cpu-ranker, for instance): its "
                   "entities, hops, k, world seed and env options replace --num-entities, --hops, --top-k and --seed's world")
    p.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a synthetic-world option (decoy_rate=0.5, ...), on top of the preset's")
    p.add_argument("--held-out", choices=("test", "validation"),
                   help="the synthetic world's split the held-out requests come from (validation needs validation_fraction > 0; "
                        "default: a --preset's validation split where it has one, else test)")
    p.add_argument("--data-path", help="a question file with gold titles (HotpotQA's, for instance) instead of the synthetic world")
    p.add_argument("--env", default="SearchQA-HotpotQA-v0", help="the env built over --data-path (default: %(default)s)")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--shuffle", action="store_true", help="train on candidates shown in a seeded random order "
                   "(CoSearchConfig.ranker_cold_start_shuffle); the held-out requests keep the retriever's order, as the env shows them")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show", type=int, default=0, help="print this many raw ranker outputs at each measurement")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the physical cores)")
    p.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto",
                   help="the ranker's precision, sampling and training (agents.precision)")
    args = p.parse_args(argv)
    if sorted(set(args.steps)) != args.steps or args.steps[0] < 1:
        p.error("--steps must be positive and increasing")
    if args.data_path and (args.preset or args.env_option or args.held_out):
        p.error("--preset, --env-option and --held-out choose a synthetic world; --data-path reads a question file instead")

    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the env ids)
    from agents.learners.cosearch_ranker import PolicyChatBackend
    from agents.learners.ranker_sft import supervised_ranker_steps
    from agents.policies.hf import HFPolicy, HFPolicyConfig
    from agents.train.setup import load_model, seed_everything
    from agents.train.sft import sft_step
    from searchgym.rankers.llm import LLMRanker, LLMRankerConfig
    from searchgym.threads import set_threads

    set_threads(args.threads)
    seed_everything(args.seed)
    config = CoSearchConfig(ranker_cold_start_batch=args.batch, ranker_cold_start_lr=args.lr)
    started = time.perf_counter()
    if args.data_path:  # the learning check's split of a question file: train on the first questions, hold out the rest
        train_env = gym.make(args.env, data_path=args.data_path, limit=args.train_questions, top_k=args.top_k)
        test_env = gym.make(args.env, data_path=args.data_path, offset=args.train_questions, limit=args.test_questions, top_k=args.top_k)
        source = f"{args.env} over {args.data_path}"
    else:
        world, split = synthetic_world(args)
        train_env = gym.make("SearchQA-Synthetic-v0", split="train", num_questions=args.train_questions, **world)
        test_env = gym.make("SearchQA-Synthetic-v0", split=split, num_questions=args.test_questions, **world)
        source = f"{list(world['hops'])} hops, {split} split" + (f", preset {args.preset}" if args.preset else "")
        if extra := {k: v for k, v in world.items() if k not in ("num_entities", "hops", "top_k", "seed")}:
            source += ", " + ", ".join(f"{k}={v}" for k, v in extra.items())
    reranks = held_out(test_env, args.requests, config.ranker_candidates, args.queries == "question")
    model, tokenizer = load_model(args.model, args.seed + 1)
    model.train()
    policy = HFPolicy(model, tokenizer, config=HFPolicyConfig(seed=args.seed + 1, dtype=args.dtype))
    backend = PolicyChatBackend(policy, temperature=config.ranker_temperature, max_tokens=config.ranker_max_tokens, seed=args.seed)
    ranker = LLMRanker(backend, LLMRankerConfig(max_doc_chars=config.ranker_max_doc_chars, max_tokens=config.ranker_max_tokens,
                                                temperature=config.ranker_temperature))
    print(f"{args.model} ranker, {len(reranks)} held-out requests ({args.queries} queries, {source}, N={config.ranker_candidates}, k={test_env.unwrapped.top_k}), "
          f"cold start: batch {args.batch}, lr {args.lr:g}{', shuffled candidates' if args.shuffle else ''}", flush=True)
    measure(backend, ranker, reranks, config, "before", started, args.show)

    def after(step: int, loss: float) -> None:
        if step in args.steps:
            print(f"{'':>16} step {step}: NLL {loss:.3f}", flush=True)
            policy.mark_updated()
            # Greedy at the last count only: each measurement costs a generation over every request.
            measure(backend, ranker, reranks, config, f"after {step} steps", started, args.show,
                    TEMPERATURES if step == args.steps[-1] else TEMPERATURES[:1])

    # One run of the last count, measured on the way: the weights at step s are those of a cold start of s
    # steps (one optimizer without a schedule, one seeded stream of examples; measuring trains nothing).
    supervised_ranker_steps(model, tokenizer, train_env, ranker.messages, steps=args.steps[-1], batch=args.batch, lr=args.lr,
                            candidates=config.ranker_candidates, max_tokens=config.ranker_max_tokens, seed=args.seed,
                            micro_batch=args.micro_batch, max_grad_norm=1.0, sft_step=partial(sft_step, dtype=policy.compute_dtype),
                            on_step=after, shuffle=args.shuffle)


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
