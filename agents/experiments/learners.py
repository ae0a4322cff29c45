"""The reference comparison: GRPO, CW-GRPO, E-GRPO and COSEARCH trained with the same seed, questions and
budget from the same cold-started policy, evaluated on held-out questions; and the learning check.

Per seed:
1. The base policy (the model as released) is evaluated where the preset or `--eval-base` asks, then
   cold-started: supervised steps on oracle trajectories of the synthetic world's train split (E-GRPO's
   cold start), done once and shared, so every learner starts from the same weights; the cold-started
   policy is evaluated too.
2. Each learner runs `--steps` RL updates of `--questions` questions x `--group` rollouts, with the same
   seed (hence the same question order); COSEARCH also trains its own ranker (a second copy of the model).
3. Greedy evaluation on `--eval` test-split questions (start entities never seen in training) after each
   learner.

With two or more `--seeds`, the learning check compares each learner's test EM with the base and with the
cold-started policy against the run-to-run noise (the standard deviation over seeds).

Prints what each learner did differently while it runs, then a results table, and writes `results.json`,
`results.md` and `curves.png` (training reward, EM, searches per episode, entity match rate over steps, and
test EM on the fixed evaluation questions before and after RL; `agents.experiments.curves`) under
`--out` (and the same per seed under `--out/seed<N>`). Presets with a credit view (`Preset.credit_questions`,
the cpu preset's 4 questions x 8 rollouts) also show, on one batch sampled by the start policy, the advantage
each learner gives each round (`agents.experiments.credit`): a table in `results.md` and `credit.png`. The
run ends with what to do next. Each seed's results carry the `fingerprint` of its
evaluation env (`agents.experiments.fingerprint`), against which `python -m agents.experiments.compare` scores a
new agent.

    python -m agents.experiments.learners --preset cpu              # SmolLM2-135M, 1- and 2-hop synthetic
                                                                    # questions (the main job)
    python -m agents.experiments.learners --preset cpu --seeds 0 1  # the learning check over two seeds
    python -m agents.experiments.learners --preset gpu --hotpotqa hotpot_dev_distractor_v1.json
                                                                    # see docs/learners.md ("The GPU preset"):
                                                                    # SGLang rollouts, Qwen2.5-0.5B

With `--hotpotqa FILE` (HotpotQA questions with their paragraphs, e.g. the official distractor dev file),
the start policy and each learner's final policy are also evaluated greedily on its first questions.
"""


from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from agents.experiments.curves import plot_curves
from agents.experiments.merge import left_out, merge_results, merged_learners, start_evaluation
from agents.experiments.presets import PRESETS, RL_LEARNERS, SFT, WHAT_DIFFERS, Preset, eval_questions_name, parse_env_options, parse_learner_options
from agents.experiments.report import credit_report, seed_table, signal_table, write_report
from agents.experiments.runner import backend_options, run_seed
from agents.precision import PRECISIONS
from searchgym.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="compare the reference learners on the synthetic world")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    p.add_argument("--learners", nargs="+", choices=list(WHAT_DIFFERS), help="the learners to train (default: the preset's, else the "
                   f"four RL learners); {SFT} is the supervised control: no RL, the cold start goes on for as many steps")
    p.add_argument("--steps", type=int, help="override the preset's RL steps")
    p.add_argument("--seeds", type=int, nargs="+", help="one full run per seed (default: the preset's); two or more give the learning check's noise")
    p.add_argument("--eval-questions", type=int, help="override the preset's number of test questions")
    p.add_argument("--eval-split", choices=["test", "validation"], help="evaluate on the synthetic world's validation split "
                   "(presets with one: cpu-ranker, cpu-rounds) to choose a setting, or on its test split (the default), the "
                   "reported questions")
    p.add_argument("--data-path", help="override the question file of a preset over one (cpu-hotpotqa)")
    p.add_argument("--env-option", nargs="+", default=[], metavar="OPTION=VALUE", help="set a gym.make option of the preset's "
                   "env (Preset.env_options: decoy_rate=0.3, aside_rate=0.5, ...) for this run; part of the setting")
    p.add_argument("--lr", type=float, help="override the preset's RL learning rate")
    p.add_argument("--questions", type=int, help="override the preset's questions per RL step")
    p.add_argument("--group", type=int, help="override the preset's rollouts per question (G)")
    p.add_argument("--temperature", type=float, help="override the preset's rollout temperature (1.0), at which RL samples its "
                   "groups and Avg@k its samples")
    p.add_argument("--threads", type=int, help="torch/BLAS threads (TrainConfig.threads; default: the physical cores). On a machine "
                   "that other jobs share, 1 thread can be several times faster than 2")
    p.add_argument("--workers", type=int, help="override the preset's learner processes side by side (Preset.workers)")
    p.add_argument("--micro-batch", type=int, help="override the preset's rows per forward/backward pass of the update "
                   "(Preset.micro_batch): less memory, the same gradient up to float rounding")
    p.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None,
                   help="recompute activations in the update's backward pass (default: the preset's): less memory, slower")
    p.add_argument("--park-idle", action=argparse.BooleanOptionalAction, default=None,
                   help="let what a phase of a step does not read (optimizer states, references, the idle model) wait in files "
                   "(Preset.park_idle; default: the preset's): less memory, the same numbers")
    p.add_argument("--malloc-mmap-threshold", type=int, metavar="BYTES", help="glibc's mmap threshold in every process of the "
                   "run (Preset.malloc_mmap_threshold; default: the preset's, 1 MiB; 0: glibc's own): the same numbers, another "
                   "trade of peak memory against page faults (docs/learners.md)")
    p.add_argument("--dtype", choices=PRECISIONS, help="override the preset's precision (auto: bfloat16 on a CPU with native "
                   "bfloat16 instructions, float32 elsewhere; agents.precision); recorded in results.json")
    p.add_argument("--keep-optimizer-states", action="store_true", default=None,
                   help="keep each finished learner's optimizer states in its final checkpoint (default: dropped once it is "
                   "evaluated, which leaves its weights for export and evaluation in a third of the disk)")
    p.add_argument("--eval-base", action=argparse.BooleanOptionalAction, default=None,
                   help="also evaluate the model as released, before its cold start (default: the preset's; the cpu preset does not)")
    p.add_argument("--eval-samples", type=int, help="override the preset's Avg@k samples per test question (0: greedy only)")
    p.add_argument("--credit-questions", type=int, help="override the preset's credit view: questions of the one batch on which every "
                   "learner's advantages are shown (Preset.credit_questions; 0 leaves the view out)")
    p.add_argument("--out", default="results/learners")
    p.add_argument("--hotpotqa", metavar="FILE", help="also evaluate the start and final policies on this HotpotQA file's first questions")
    p.add_argument("--sglang-urls", nargs="+", help="the SGLang servers of a preset that rolls out through SGLang (default: 127.0.0.1 ports 30000 and up)")
    p.add_argument("--start-model", metavar="DIR", help="a shared-start preset's seeds start from this cold-started policy (the "
                   "seed0/cold_start/model folder of a run of the same preset) without evaluating it; --merge that run's "
                   "results.json with this one's to pair them")
    p.add_argument("--start-results", metavar="RESULTS_JSON", help="with --start-model: the results.json of the run that made "
                   "and evaluated that start policy; this run pairs against that evaluation (same world and questions: the "
                   "fingerprints must match) instead of needing a --merge, so a new RL setting (--lr, --steps, ...) is "
                   "compared with the same start")
    p.add_argument("--learner-option", nargs="+", default=[], metavar="LEARNER.OPTION=VALUE",
                   help="set an option of a learner's config for this run (cw-grpo.kl_coef=0, e-grpo.alpha=0.1, cw-grpo.alpha=inf); "
                   "values are JSON, else numbers, else text")
    p.add_argument("--start-only", action="store_true", help="cold-start and evaluate the start policy (seed0/cold_start/model), "
                   "train no learner, and stop: the policy on which agents.experiments.signatures measures a setting's premise")
    p.add_argument("--resume", action="store_true", help="checkpoint every learner after each RL step, and on a rerun of the "
                   "same command with the same --out keep what the earlier run finished (the start policy, finished learners) and "
                   "continue the others from their newest checkpoint; another setting in that --out is an error")
    p.add_argument("--merge", nargs="+", metavar="RESULTS_JSON", help="join the results.json of runs of one preset (seeds run as "
                   "separate processes) into one report under --out, and stop")
    return p


def _preset(args: argparse.Namespace) -> Preset:
    """The named preset with the run's overrides (`--lr`, `--group`, `--learner-option`, ...)."""
    preset = PRESETS[args.preset]
    overrides = {k: v for k, v in (("eval_questions", args.eval_questions), ("eval_samples", args.eval_samples), ("lr", args.lr),
                                   ("eval_base", args.eval_base), ("eval_split", args.eval_split), ("data_path", args.data_path),
                                   ("questions", args.questions), ("group", args.group), ("temperature", args.temperature),
                                   ("workers", args.workers), ("micro_batch", args.micro_batch), ("dtype", args.dtype),
                                   ("credit_questions", args.credit_questions),
                                   ("gradient_checkpointing", args.gradient_checkpointing), ("park_idle", args.park_idle),
                                   ("malloc_mmap_threshold", args.malloc_mmap_threshold),
                                   ("keep_optimizer_states", args.keep_optimizer_states)) if v is not None}
    if args.learner_option:
        overrides["learner_options"] = parse_learner_options(args.learner_option, preset.learner_options)
    if args.env_option:
        overrides["env_options"] = parse_env_options(args.env_option, preset.env_options)
    return replace(preset, **overrides)


def _merge(paths: list[str], out: Path) -> int:
    """`--merge`: one report of several runs' results.json under `out`."""
    head, per_seed = merge_results([Path(m) for m in paths])
    learners = merged_learners(per_seed)
    out.mkdir(parents=True, exist_ok=True)
    print("Learning check (test EM):\n" + write_report(per_seed, learners, head["preset"], head["steps"], out))
    note = left_out(per_seed)
    if note:
        with open(out / "results.md", "a") as report:
            report.write(f"\n{note}\n")
        print(f"\n{note}")
    print(f"\nmerged seeds {list(per_seed)}; table: {out / 'results.md'}")
    return 0


def _run_seeds(args: argparse.Namespace, preset: Preset, steps: int, out: Path) -> dict[int, dict]:
    """Every seed's run, each seed's table written under `out/seed<N>` and printed as it finishes."""
    per_seed = {}
    shared = None
    if args.start_model:
        made = (start_evaluation(Path(args.start_results), Path(args.start_model), preset.eval_samples, preset.temperature)
                if args.start_results else {"start": {"model": args.start_model}})
        shared = (Path(args.start_model), made)
    for seed in args.seeds:
        print(f"\n===== seed {seed}", flush=True)
        results = per_seed[seed] = run_seed(preset, args.learners, steps, seed, out / f"seed{seed}",
                                            backend_options(preset, args.sglang_urls), args.hotpotqa, shared, args.threads,
                                            args.resume)
        if preset.shared_start and shared is None:
            shared = (Path(results["start"]["model"]), results)
        table = seed_table(results, args.learners)
        if args.learners:
            table += "\n\nSignals (mean over RL steps):\n\n" + signal_table(results, args.learners)
        (out / f"seed{seed}").mkdir(parents=True, exist_ok=True)
        (out / f"seed{seed}" / "results.md").write_text(table + "\n" + credit_report(results, out / f"seed{seed}"))
        if "eval" in results["start"] and args.learners:  # else the run that made the shared start has its evaluation
            plot_curves(results, args.learners, out / f"seed{seed}" / "curves.png")
        print(f"\nseed {seed} ({results['minutes']:.1f} min):\n{table}", flush=True)
    return per_seed


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    if args.merge:
        return _merge(args.merge, out)
    from transformers.utils import logging as hf_logging

    from agents.memory import ask_huge_pages

    ask_huge_pages()  # before the first tensor, so the cold start's process has them too, and the learners' processes
    # One bar per phase (agents.experiments.progress) instead of a "Loading weights" bar at every model load.
    hf_logging.disable_progress_bar()
    preset = _preset(args)
    if args.start_only and (args.learners or args.start_model):
        raise ConfigError("--start-only makes the start policy and trains no learner: leave out --learners and --start-model")
    args.learners = [] if args.start_only else args.learners or list(preset.learners or RL_LEARNERS)
    args.seeds = args.seeds or list(preset.seeds)
    if args.start_only and preset.shared_start:
        args.seeds = args.seeds[:1]  # the other seeds would share this start
    steps = args.steps or preset.steps
    out.mkdir(parents=True, exist_ok=True)
    if args.start_model and not preset.shared_start:
        raise ConfigError(f"--start-model needs a preset with a shared start (cpu-learn); {args.preset} cold-starts every seed")
    if args.start_results and not args.start_model:
        raise ConfigError("--start-results names the evaluation of a --start-model; give both")

    t0 = time.perf_counter()
    print(f"preset {args.preset}: {preset.model}, hops {preset.hops}, {preset.cold_start_steps} cold-start steps, "
          f"{steps} RL steps x {preset.questions} questions x {preset.group} rollouts at temperature {preset.temperature:g}, "
          f"eval on {preset.eval_questions} {eval_questions_name(preset)}, seeds {args.seeds}, dtype {preset.dtype}"
          + "".join(f"; {n} with {', '.join(f'{k}={v}' for k, v in o.items())}" for n, o in preset.learner_options.items()), flush=True)
    per_seed = _run_seeds(args, preset, steps, out)
    if args.start_only or (args.start_model and not args.start_results):
        (out / "results.json").write_text(json.dumps({"preset": asdict(preset), "steps": steps, "seeds": args.seeds,
                                                      "results": {str(s): r for s, r in per_seed.items()}}, indent=2))
        if args.start_only:
            print(f"\ntotal {(time.perf_counter() - t0) / 60:.1f} min; start policy: {per_seed[args.seeds[0]]['start']['model']}")
            return 0
        print(f"\ntotal {(time.perf_counter() - t0) / 60:.1f} min; the start policy was not evaluated here: --merge this "
              f"{out / 'results.json'} with the results.json of the run that made {args.start_model}")
        return 0
    check = write_report(per_seed, args.learners, asdict(preset), steps, out, args.hotpotqa)
    print("\nLearning check (test EM):\n" + check)
    shown = f"plot: {out / 'curves.png'}" + (f"; credit view: {out / 'credit.png'}" if "credit" in per_seed[args.seeds[0]] else "")
    print(f"\ntotal {(time.perf_counter() - t0) / 60:.1f} min; {shown}; table: {out / 'results.md'}")
    print(next_steps(out, per_seed[args.seeds[0]]["start"]["model"], args.preset))
    return 0


def next_steps(out: Path, start_model: str, preset: str) -> str:
    """The lines that end a run: where to go from its results."""
    lines = ["", "What next:"]
    if preset == "cpu":
        lines.append("- Whether RL learns here (this run's 2 steps cannot say): the learning check, three seeds from one start, "
                     "python -m agents.experiments.learners --preset cpu-learn --threads 1 (docs/learners.md, \"The learning check\")")
    lines += [f"- What each paper builds on, on this start policy: python -m agents.experiments.signatures --model {start_model} --threads 1",
              f"- Your own agent against these learners, on the same questions: python -m agents.experiments.compare --reference "
              f"{out / 'results.json'} --agent module:callable (docs/benchmark-your-agent.md)",
              "- Training with your own RL framework on these envs: docs/frameworks.md (\"Train with your framework\")",
              "- How each learner turns the same rollouts into signal: docs/credit-view.md"]
    return "\n".join(lines)


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
