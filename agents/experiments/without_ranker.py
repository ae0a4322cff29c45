"""A learner's policy evaluated without its ranker: COSEARCH's test EM, split into its policy's and its ranker's.

A COSEARCH run evaluates its policy behind its own trained ranker, so its test EM is the pair's. This takes a
finished run of `agents.experiments.learners` (its `--out` folder), loads the policy weights of the learner's
final checkpoint, evaluates them on the same test questions behind the preset's retriever alone (as the start
policy and GRPO are evaluated), and pairs each question against the run's own evaluation (behind the ranker)
and against the start policy's. It writes `without_ranker.json` beside the learner's `result.json`.

    python -m agents.experiments.without_ranker results/cpu-ranker-cosearch-s0 --threads 1 --dtype float32

Measured on `cpu-ranker` seed 0 (docs/learners.md, "The runs to make"): behind the retriever its policy scored
0.410 against 0.260 behind its ranker.
"""

from __future__ import annotations

import json
from pathlib import Path

from agents.experiments.reevaluate import START, evaluate_final, paired, paired_lines, run_arguments
from searchgym.errors import ConfigError


def evaluate_without_ranker(run: Path, learner: str = "cosearch", threads: int | None = None, dtype: str | None = None) -> dict:
    """Evaluate the learner's final policy behind the preset's retriever; returns (and writes) its evaluation
    and the paired differences against the run's own evaluation and against the start policy."""
    if learner == START:
        raise ConfigError("the start policy is evaluated behind the retriever already: python -m agents.experiments.reevaluate "
                          f"{run} --learner start evaluates it again")
    # GRPO's config: the same env, retriever and evaluation as the start's, with no ranker in it.
    e = evaluate_final(run, learner, threads, dtype, "{learner} policy behind the retriever", env_learner="grpo")
    em, own, start = e.questions["eval_em"], e.entry["eval_em"], e.results["start"]["eval_em"]
    out = {"learner": e.learner, "seed": e.seed, "checkpoint": str(e.checkpoint), "eval": e.metrics, **e.questions,
           "paired": paired({"without ranker - with ranker": (em, own), "without ranker - start": (em, start),
                             "with ranker - start": (own, start)})}
    (run / f"seed{e.seed}" / e.learner / "without_ranker.json").write_text(json.dumps(out, indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    p = run_arguments("agents.experiments.without_ranker", __doc__, "cosearch")
    args = p.parse_args(argv)
    try:
        out = evaluate_without_ranker(Path(args.run), args.learner, args.threads, args.dtype)
    except ConfigError as e:
        p.error(str(e))
    print(f"{args.learner} seed {out['seed']}: test EM {out['eval']['eval/em']:.3f} behind the retriever "
          f"({out['eval']['eval/questions']:.0f} questions)")
    print(paired_lines(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
