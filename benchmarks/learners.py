"""The reference comparison: GRPO, CW-GRPO, E-GRPO and COSEARCH trained with the same seed, questions and
budget from the same cold-started policy, evaluated on held-out questions.

1. Cold start: supervised steps on oracle trajectories of the synthetic world's train split (E-GRPO's
   cold start), done once and shared, so every learner starts from the same weights.
2. Each learner runs `--steps` RL updates of `--questions` questions x `--group` rollouts, with the same
   seed (hence the same question order); COSEARCH also trains its own ranker (a second copy of the model).
3. Greedy evaluation on `--eval` test-split questions (start entities never seen in training) before RL
   and after each learner.

Prints what each learner did differently while it runs, then a results table, and writes
`results.json`, `results.md` and `curves.png` (reward, EM, searches per episode, entity match rate over
steps) under `--out`.

    python -m benchmarks.learners --preset cpu     # SmolLM2-135M on 1-hop synthetic questions, ~15 min on 2 cores
    python -m benchmarks.learners --preset gpu     # see docs/learners.md: larger model, more steps (GPU machine)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agents.train import TrainConfig

WHAT_DIFFERS = {
    "grpo": "outcome reward (EM), one advantage per trajectory for every token",
    "cw-grpo": "same reward; the advantage is moved between search rounds by the GoldJudge's contribution labels (alpha=inf)",
    "e-grpo": "wrong answers earn 0.3 x their group-normalized gold-entity match rate; over-long rollouts leave the loss",
    "cosearch": "the agent trains with GRPO while a second model reranks 5 candidates per search, trained on clustered calls (Eq. 6)",
}


@dataclass(frozen=True)
class Preset:
    model: str
    num_entities: int
    hops: tuple[int, ...]
    cold_start_steps: int
    steps: int
    questions: int
    group: int
    eval_questions: int
    max_turn_tokens: int
    max_response_tokens: int
    top_k: int
    lr: float


PRESETS = {
    # Sized for 2 CPU cores and ~15 minutes: few, small steps; the table reports what that budget buys.
    "cpu": Preset("smollm2-135m", 1000, (1,), 4, 3, 2, 4, 24, 48, 256, 1, 2e-6),
    # For one GPU (documented; not run in CI): a real budget.
    "gpu": Preset("Qwen/Qwen2.5-0.5B-Instruct", 10000, (1, 2), 50, 200, 16, 8, 500, 256, 2048, 3, 1e-6),
}


def _plot(histories: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("rollout/reward", "reward"), ("rollout/em", "EM"), ("rollout/searches_mean", "searches / episode"), ("rollout/entity_rate", "entity match rate")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for ax, (key, title) in zip(axes, panels):
        for name, hist in histories.items():
            ax.plot([m["step"] for m in hist], [m.get(key, float("nan")) for m in hist], marker="o", label=name)
        ax.set_title(title)
        ax.set_xlabel("RL step")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="compare the reference learners on the synthetic world")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    p.add_argument("--learners", nargs="+", default=list(WHAT_DIFFERS), choices=list(WHAT_DIFFERS))
    p.add_argument("--steps", type=int, help="override the preset's RL steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/learners")
    args = p.parse_args(argv)
    preset = PRESETS[args.preset]
    steps = args.steps or preset.steps
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from agents.models import save_model
    from agents.train.trainer import Trainer

    def config(learner: str, model: str, run: str, **extra) -> TrainConfig:
        return TrainConfig(learner=learner, model=model, num_entities=preset.num_entities, hops=preset.hops, steps=steps,
                           questions_per_step=preset.questions, group_size=preset.group, eval_questions=preset.eval_questions,
                           max_turn_tokens=preset.max_turn_tokens, max_response_tokens=preset.max_response_tokens, top_k=preset.top_k,
                           lr=preset.lr, seed=args.seed, out_dir=str(out / run), resume=False, checkpoint_every=0, **extra)

    t0 = time.perf_counter()
    print(f"preset {args.preset}: {preset.model}, hops {preset.hops}, {preset.cold_start_steps} cold-start steps, "
          f"{steps} RL steps x {preset.questions} questions x {preset.group} rollouts, eval on {preset.eval_questions} test questions")
    start_dir = out / "cold_start" / "model"
    starter = Trainer(config("grpo", preset.model, "cold_start", cold_start_steps=preset.cold_start_steps))
    losses = starter.cold_start()
    print(f"[cold start] oracle-trajectory NLL {losses[0]:.3f} -> {losses[-1]:.3f} in {time.perf_counter() - t0:.0f} s")
    save_model(starter.model, starter.tokenizer, start_dir)
    start_eval = starter.evaluate()
    starter.close()
    print(f"[start policy] test EM {start_eval['eval/em']:.3f}, F1 {start_eval['eval/f1']:.3f}, searches/ep {start_eval['eval/searches']:.2f}")

    results = {"start": {"eval": start_eval, "minutes": (time.perf_counter() - t0) / 60}}
    histories = {}
    for learner in args.learners:
        t = time.perf_counter()
        print(f"\n[{learner}] {WHAT_DIFFERS[learner]}")
        trainer = Trainer(config(learner, str(start_dir), learner))
        history = trainer.run(progress=True)
        final = trainer.evaluate()
        trainer.close()
        histories[learner] = history
        last = history[-1]
        extra = {k: round(v, 3) for k, v in last.items() if k.split("/")[0] in ("cw_grpo", "e_grpo", "ranker")}
        print(f"[{learner}] train reward {history[0]['rollout/reward']:.3f} -> {last['rollout/reward']:.3f}; test EM "
              f"{start_eval['eval/em']:.3f} -> {final['eval/em']:.3f}; {extra}")
        results[learner] = {"eval": final, "history": history, "minutes": (time.perf_counter() - t) / 60}

    lines = ["| learner | test EM | test F1 | searches/ep | train reward (first -> last) | minutes |", "|---|---|---|---|---|---|"]
    lines.append(f"| start (cold-started) | {start_eval['eval/em']:.3f} | {start_eval['eval/f1']:.3f} | {start_eval['eval/searches']:.2f} | - | {results['start']['minutes']:.1f} |")
    for learner in args.learners:
        r = results[learner]
        h = r["history"]
        lines.append(f"| {learner} | {r['eval']['eval/em']:.3f} | {r['eval']['eval/f1']:.3f} | {r['eval']['eval/searches']:.2f} | "
                     f"{h[0]['rollout/reward']:.3f} -> {h[-1]['rollout/reward']:.3f} | {r['minutes']:.1f} |")
    table = "\n".join(lines)
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"preset": asdict(preset), "steps": steps, "seed": args.seed, "results": results}, indent=2))
    _plot(histories, out / "curves.png")
    print("\n" + table)
    print(f"\ntotal {(time.perf_counter() - t0) / 60:.1f} min; plot: {out / 'curves.png'}; table: {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
