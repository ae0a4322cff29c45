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

import argparse
import json
import tempfile
from dataclasses import asdict, fields, replace
from pathlib import Path

from agents.experiments.paired import paired_difference
from agents.experiments.presets import Preset, preset_fields
from agents.precision import PRECISIONS
from searchgym.errors import ConfigError

NOT_LEARNERS = ("fingerprint", "start", "base", "minutes")
"""Keys of a seed's results that are not a trained learner's entry."""


def run_parts(run: Path, learner: str | None) -> tuple[Preset, int, dict, str, dict, Path]:
    """(preset, seed, the seed's results, the learner, its entry, its final checkpoint) of a finished one-seed
    run folder; `learner` None means the run's only learner. A ConfigError says what is missing."""
    results_json = run / "results.json"
    if not results_json.is_file():
        raise ConfigError(f"{results_json} not found: give the --out folder of a finished agents.experiments.learners run")
    saved = json.loads(results_json.read_text())
    if len(saved.get("results", {})) != 1:
        raise ConfigError(f"{results_json} holds seeds {sorted(saved.get('results', {}))}: give a run of one seed")
    (seed, results), = saved["results"].items()
    if learner is None:
        trained = [k for k in results if k not in NOT_LEARNERS]
        if len(trained) != 1:
            raise ConfigError(f"{results_json}: seed {seed} holds the learners {trained}: name one with --learner")
        learner = trained[0]
    entry = results.get(learner)
    if entry is None or "eval_em" not in entry:
        raise ConfigError(f"{results_json}: seed {seed} has no evaluated {learner!r} (it has {sorted(results)})")
    if "eval_em" not in results.get("start", {}) or "fingerprint" not in results:
        raise ConfigError(f"{results_json}: seed {seed} holds no evaluation of its start policy to pair against "
                          "(run the learner with --start-results, or merge first)")
    from agents.train.checkpoint import list_checkpoints

    checkpoints = list_checkpoints(run / f"seed{seed}" / learner / "checkpoints")
    if not checkpoints:
        raise ConfigError(f"no checkpoint of {learner!r} under {run / f'seed{seed}' / learner / 'checkpoints'}")
    known = {f.name for f in fields(Preset)}
    stored = {k: v for k, v in preset_fields(saved["preset"]).items() if k in known}
    stored.update(hops=tuple(stored["hops"]), seeds=tuple(stored["seeds"]))
    return Preset(**stored), int(seed), results, learner, entry, checkpoints[-1]


def paired(pairs: dict[str, tuple[list[float], list[float]]]) -> dict[str, dict]:
    """Each named (a, b) pair of per-question results as `paired_difference` of a - b (one seed), as JSON values."""
    return {name: asdict(paired_difference([[x - y for x, y in zip(a, b, strict=True)]])) for name, (a, b) in pairs.items()}


def print_paired(out: dict) -> None:
    """The paired differences of a re-evaluation, one line each."""
    for name, d in out["paired"].items():
        print(f"  {name}: {d['mean']:+.3f} (SE over questions {d['se_questions']:.3f}; questions up {d['up'][0]}, down {d['down'][0]})")


def evaluate_without_ranker(run: Path, learner: str = "cosearch", threads: int | None = None, dtype: str | None = None) -> dict:
    """Evaluate the learner's final policy behind the preset's retriever; returns (and writes) its evaluation
    and the paired differences against the run's own evaluation and against the start policy."""
    from agents.experiments.runner import _evaluate, fingerprint_differences, train_config, trainer_eval_fingerprint
    from agents.train.export import export_checkpoint
    from agents.train.trainer import Trainer

    preset, seed, results, learner, entry, checkpoint = run_parts(run, learner)
    start = results["start"]
    if dtype is not None:
        preset = replace(preset, dtype=dtype)
    with tempfile.TemporaryDirectory(prefix="without-ranker-") as tmp:
        policy = export_checkpoint(checkpoint, Path(tmp) / "policy")
        # GRPO's config: the same env, retriever and evaluation as the start's, with no ranker in it.
        config = train_config(preset, 1, seed, Path(tmp), {}, threads, "grpo", str(policy), "eval")
        trainer = Trainer(config)
        try:
            differ = fingerprint_differences(trainer_eval_fingerprint(trainer), results["fingerprint"])
            if differ:
                raise ConfigError(f"the evaluation behind the retriever would not be on the start policy's env ({', '.join(differ)} differ)")
            metrics, questions = _evaluate(trainer, f"{learner} policy behind the retriever")
        finally:
            trainer.close()
    em = questions["eval_em"]
    out = {"learner": learner, "seed": seed, "checkpoint": str(checkpoint), "eval": metrics, **questions,
           "paired": paired({"without ranker - with ranker": (em, entry["eval_em"]), "without ranker - start": (em, start["eval_em"]),
                             "with ranker - start": (entry["eval_em"], start["eval_em"])})}
    (run / f"seed{seed}" / learner / "without_ranker.json").write_text(json.dumps(out, indent=1))
    return out


def run_arguments(module: str, doc: str, learner: str | None) -> argparse.ArgumentParser:
    """The command line of a re-evaluation of a finished run (`module`'s, described by its docstring's first
    paragraph): the run folder, the learner (by default `learner`; None: the run's only one), threads and
    precision."""
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    p.add_argument("run", help="the --out folder of a finished one-seed agents.experiments.learners run")
    p.add_argument("--learner", default=learner, help=f"the learner to evaluate (default: {learner or 'the run has only one'})")
    p.add_argument("--threads", type=int)
    p.add_argument("--dtype", choices=PRECISIONS, help="the precision the run computed in (its preset's by default)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = run_arguments("agents.experiments.without_ranker", __doc__, "cosearch")
    args = p.parse_args(argv)
    try:
        out = evaluate_without_ranker(Path(args.run), args.learner, args.threads, args.dtype)
    except ConfigError as e:
        p.error(str(e))
    print(f"{args.learner} seed {out['seed']}: test EM {out['eval']['eval/em']:.3f} behind the retriever "
          f"({out['eval']['eval/questions']:.0f} questions)")
    print_paired(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
