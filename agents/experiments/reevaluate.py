"""A finished run's learner evaluated again from its final checkpoint, as its run evaluated it.

A learner's run evaluates its final policy once, when it ends. This takes a finished one-seed run of
`agents.experiments.learners` (its `--out` folder), loads the learner's final checkpoint (the policy, and
the second model of a learner that trains one: COSEARCH's ranker), evaluates it on the same test questions
as the run did, and pairs each question against the run's own evaluation and against the start policy's;
for a learner with a ranker and `without_ranker.json` beside it (`agents.experiments.without_ranker`), it
pairs the policy behind the retriever alone against this evaluation too. It writes `reevaluated.json`
beside the learner's `result.json`; `--update-results` also puts this evaluation into the run's
`results.json` and `result.json` in place of the old one (kept in the entry under `reevaluated.superseded`),
so that merged reports pool it with runs made since. Two uses:

- COSEARCH runs evaluated before its ranker decoded greedily during evaluations (it sampled at its training
  temperature there, up to and including `cpu-ranker` seed 0): their evaluation is the policy behind a
  *sampled* ranker; this one is behind the greedy ranker.
- runs made before an evaluation kept a per-question result the report now pairs (the judge's contributing
  searches, `eval_contributing`): a greedy evaluation at the run's precision and thread count is
  deterministic, so the re-evaluation scores what the run did on every question and adds what is new.

`--learner start` does the same for the start policy the run's learners began from (from its model folder,
behind the retriever); with `--update-results` on the run that made it (`--start-only`), merged reports take
its entry over the copies in the learners' runs, so the learners' new counts pair against the start's too.

    python -m agents.experiments.reevaluate results/cpu-ranker-cosearch-s0 --threads 1 --dtype float32 --update-results
    python -m agents.experiments.reevaluate results/cpu-rounds --learner start --threads 1 --dtype float32 --update-results
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from agents.experiments.paired import paired_difference
from agents.experiments.presets import Preset, preset_fields
from agents.experiments.resume import write_json
from agents.precision import PRECISIONS
from searchgym.errors import ConfigError

NOT_LEARNERS = ("fingerprint", "start", "base", "minutes")
"""Keys of a seed's results that are not a trained learner's entry."""

START = "start"
"""`--learner start`: the start policy the run's learners began from (its model folder), evaluated again behind
the retriever as the run that made it evaluated it."""


def run_parts(run: Path, learner: str | None) -> tuple[Preset, int, dict, str, dict, Path]:
    """(preset, seed, the seed's results, the learner, its entry, its final checkpoint) of a finished one-seed
    run folder; `learner` None means the run's only learner, `START` the start policy (its entry, and its model
    folder for the checkpoint). A ConfigError says what is missing."""
    results_json = run / "results.json"
    if not results_json.is_file():
        raise ConfigError(f"{results_json} not found: give the --out folder of a finished agents.experiments.learners run")
    saved = json.loads(results_json.read_text())
    if len(saved.get("results", {})) != 1:
        raise ConfigError(f"{results_json} holds seeds {sorted(saved.get('results', {}))}: give a run of one seed")
    (seed, results), = saved["results"].items()
    if "eval_em" not in results.get("start", {}) or "fingerprint" not in results:
        raise ConfigError(f"{results_json}: seed {seed} holds no evaluation of its start policy to pair against "
                          "(run the learner with --start-results, or merge first)")
    if learner == START:
        model = Path(results["start"]["model"])
        if not model.is_dir():
            raise ConfigError(f"{results_json}: the start policy's folder {model} is not there")
        return _preset(saved), int(seed), results, START, results["start"], model
    if learner is None:
        trained = [k for k in results if k not in NOT_LEARNERS]
        if not trained:
            raise ConfigError(f"{results_json}: seed {seed} holds no trained learner (--learner start evaluates its start policy again)")
        if len(trained) != 1:
            raise ConfigError(f"{results_json}: seed {seed} holds the learners {trained}: name one with --learner")
        learner = trained[0]
    entry = results.get(learner)
    if entry is None or "eval_em" not in entry:
        raise ConfigError(f"{results_json}: seed {seed} has no evaluated {learner!r} (it has {sorted(results)})")
    from agents.train.checkpoint import list_checkpoints

    checkpoints = list_checkpoints(run / f"seed{seed}" / learner / "checkpoints")
    if not checkpoints:
        raise ConfigError(f"no checkpoint of {learner!r} under {run / f'seed{seed}' / learner / 'checkpoints'}")
    return _preset(saved), int(seed), results, learner, entry, checkpoints[-1]


def _preset(saved: dict) -> Preset:
    """The preset a run's `results.json` records."""
    known = {f.name for f in fields(Preset)}
    stored = {k: v for k, v in preset_fields(saved["preset"]).items() if k in known}
    stored.update(hops=tuple(stored["hops"]), seeds=tuple(stored["seeds"]))
    return Preset(**stored)


def paired(pairs: dict[str, tuple[list[float], list[float]]]) -> dict[str, dict]:
    """Each named (a, b) pair of per-question results as `paired_difference` of a - b (one seed), as JSON values."""
    return {name: asdict(paired_difference([[x - y for x, y in zip(a, b, strict=True)]])) for name, (a, b) in pairs.items()}


def paired_lines(out: dict) -> str:
    """The paired differences of a re-evaluation, one line each, for a command to print."""
    return "\n".join(f"  {name}: {d['mean']:+.3f} (SE over questions {d['se_questions']:.3f}; questions up {d['up'][0]}, down {d['down'][0]})"
                     for name, d in out["paired"].items())


def run_arguments(module: str, doc: str, learner: str | None, start: bool = False) -> argparse.ArgumentParser:
    """The command line of a re-evaluation of a finished run (`module`'s, described by its docstring's first
    paragraph): the run folder, the learner (by default `learner`; None: the run's only one; with `start`, also
    `START`), threads and precision."""
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    p.add_argument("run", help="the --out folder of a finished one-seed agents.experiments.learners run")
    p.add_argument("--learner", default=learner, help=f"the learner to evaluate{f', or {START!r} for the start policy' if start else ''} "
                   f"(default: {learner or 'the run has only one'})")
    p.add_argument("--threads", type=int)
    p.add_argument("--dtype", choices=PRECISIONS, help="the precision the run computed in (its preset's by default)")
    return p



WEIGHTS_SOURCE = ("model", "weight_version")
"""Last parts of fingerprint keys that say where a model's weights came from (its model folder, how often they
were updated), not how the env runs: a re-evaluation loads the same weights from elsewhere. A `gym.make`
argument that was an object (the ranker) is recorded by its repr, which names its address: left aside too
(its settings are under `setting.ranker`)."""


def is_object(value) -> bool:
    """Whether a fingerprint value records a Python object by its repr (`agents.experiments.fingerprint.jsonable`)."""
    return isinstance(value, dict) and set(value) == {"__object__"}


def load_final_models(trainer, checkpoint: Path) -> list[str]:
    """Copy the weights of a finished run's final checkpoint into `trainer`'s models: the policy and every
    model of its second model (which must all be in it); other models of the trainer that the checkpoint
    lacks (a KL reference it never saved) keep their load. Optimizer states are not read (a finished run's
    are dropped). Returns the names loaded; a `CheckpointError` says what does not fit."""
    from agents.train.checkpoint import CheckpointError, load_checkpoint

    needed = ["policy", *(trainer.second_model.models if trainer.second_model is not None else ())]
    missing = [name for name in needed if not (checkpoint / f"{name}.safetensors").is_file()]
    if missing:
        raise CheckpointError(f"{checkpoint} holds no {', '.join(f'{n}.safetensors' for n in missing)}: it is not a "
                              f"whole-weights checkpoint of this learner")
    names = [name for name in trainer.models if (checkpoint / f"{name}.safetensors").is_file()]
    load_checkpoint(checkpoint, {name: trainer.models[name] for name in names}, {})
    trainer.policy.mark_updated()
    if trainer.second_model is not None:
        trainer.second_model.mark_restored()
    return names


@dataclass
class FinalEvaluation:
    """A finished run's learner, its final checkpoint evaluated again (`evaluate_final`)."""

    seed: int
    results: dict
    """The seed's results (the start's entry and fingerprint among them)."""
    learner: str
    entry: dict
    """The learner's entry, with the run's own evaluation."""
    checkpoint: Path
    loaded: list[str]
    """The models whose weights came from the checkpoint (`load_final_models`)."""
    metrics: dict
    questions: dict
    """The per-question results (`eval_em`, `eval_searches`, ...)."""


def evaluate_final(run: Path, learner: str | None, threads: int | None, dtype: str | None, what: str,
                   env_learner: str | None = None) -> FinalEvaluation:
    """Evaluate the final checkpoint of `learner`'s run on the run's test questions (`what`, with `{learner}` in
    it, names the evaluation on its progress bar). The env and the models are
    those `env_learner`'s config builds (by default the learner's own: COSEARCH's with its ranker, loaded from
    the checkpoint and greedy; "grpo": the preset's retriever alone), checked against the start policy's
    fingerprint and, for the learner's own, its run's as well (leaving aside where weights came from). `START`
    evaluates the start policy from its model folder behind the retriever, as the run that made it did."""
    from agents.experiments.fingerprint import differences
    from agents.experiments.runner import _evaluate, fingerprint_differences, train_config, trainer_eval_fingerprint
    from agents.train.export import export_checkpoint
    from agents.train.trainer import Trainer

    preset, seed, results, learner, entry, checkpoint = run_parts(run, learner)
    start = learner == START
    if start:
        env_learner = "grpo"  # the start policy was evaluated by the cold start's trainer, a GRPO config's
    result_json = run / f"seed{seed}" / learner / "result.json"
    own = json.loads(result_json.read_text()).get("fingerprint") if env_learner is None and result_json.is_file() else None
    if dtype is not None:
        preset = replace(preset, dtype=dtype)
    with tempfile.TemporaryDirectory(prefix="reevaluate-") as tmp:
        # The policy's config and tokenizer for the trainer to build on; every weight is then the checkpoint's.
        policy = checkpoint if start else export_checkpoint(checkpoint, Path(tmp) / "policy")
        trainer = Trainer(train_config(preset, 1, seed, Path(tmp), {}, threads, env_learner or learner, str(policy), "eval"))
        try:
            got = trainer_eval_fingerprint(trainer)
            differ = fingerprint_differences(got, results["fingerprint"], set(trainer.learner_env_options()))
            if own is not None:  # the learner's own env options too (a ranker's settings), not where weights came from
                differ += [k for k, a, b in differences(own, got)
                           if k not in differ and k.rsplit(".", 1)[-1] not in WEIGHTS_SOURCE and not (is_object(a) and is_object(b))]
            if differ:
                raise ConfigError(f"the evaluation would not be on the env the run evaluated on ({', '.join(differ)} differ)")
            loaded = ["policy"] if start else load_final_models(trainer, checkpoint)
            metrics, questions = _evaluate(trainer, what.format(learner=learner))
        finally:
            trainer.close()
    return FinalEvaluation(seed, results, learner, entry, checkpoint, loaded, metrics, questions)


def reevaluate(run: Path, learner: str | None = None, threads: int | None = None, dtype: str | None = None, update_results: bool = False) -> dict:
    """Evaluate the learner's final checkpoint again (its policy, behind its second model's greedy ranker where
    it trains one); returns (and writes) the evaluation and its paired differences; with `update_results`, it
    replaces the run's evaluation of the learner."""
    e = evaluate_final(run, learner, threads, dtype, "{learner} evaluated again")
    em = e.questions["eval_em"]
    pairs = {"re-evaluated - run's evaluation": (em, e.entry["eval_em"])}
    if e.learner != START:
        pairs["re-evaluated - start"] = (em, e.results["start"]["eval_em"])
    folder = run / f"seed{e.seed}" / learner_folder(e.learner)
    without = folder / "without_ranker.json"
    if len(e.loaded) > 1 and without.is_file():
        pairs["without ranker - re-evaluated"] = (json.loads(without.read_text())["eval_em"], em)
    out = {"learner": e.learner, "seed": e.seed, "checkpoint": str(e.checkpoint), "loaded": e.loaded, "eval": e.metrics, **e.questions,
           "paired": paired(pairs)}
    write_json(folder / "reevaluated.json", out)
    if update_results:
        replace_evaluation(run, e.seed, e.learner, e.metrics, e.questions, e.checkpoint)
    return out


def learner_folder(learner: str) -> str:
    """The folder of a seed's run that holds `learner`'s files (the start policy's: its cold start's)."""
    return "cold_start" if learner == START else learner


def replace_evaluation(run: Path, seed: int, learner: str, metrics: dict, questions: dict, checkpoint: Path) -> None:
    """Put a re-evaluation into the run's `results.json` (and the learner's `result.json`, or the start's
    `start.json`, which a `--resume` rerun reads) in place of the learner's evaluation; the replaced one is kept
    under `reevaluated.superseded` (the first one, when re-evaluated again). Merged reports take a re-evaluated
    start policy's entry over its copies in the runs of the learners that began from it (`merge.evaluated_starts`)."""
    def updated(entry: dict) -> dict:
        old = entry.get("reevaluated", {}).get("superseded") or {k: entry[k] for k in ("eval", *questions) if k in entry}
        return {**entry, "eval": metrics, **questions,
                "reevaluated": {"by": "python -m agents.experiments.reevaluate", "checkpoint": str(checkpoint), "superseded": old}}

    results_json = run / "results.json"
    saved = json.loads(results_json.read_text())
    saved["results"][str(seed)][learner] = updated(saved["results"][str(seed)][learner])
    write_json(results_json, saved)
    result_json = run / f"seed{seed}" / learner_folder(learner) / ("start.json" if learner == START else "result.json")
    if result_json.is_file():
        done = json.loads(result_json.read_text())
        key = START if learner == START else "entry"
        write_json(result_json, {**done, key: updated(done[key])})


def main(argv: list[str] | None = None) -> int:
    p = run_arguments("agents.experiments.reevaluate", __doc__, None, start=True)
    p.add_argument("--update-results", action="store_true",
                   help="replace the run's evaluation of the learner in its results.json by this one (the old one is kept in the entry)")
    args = p.parse_args(argv)
    try:
        out = reevaluate(Path(args.run), args.learner, args.threads, args.dtype, args.update_results)
    except ConfigError as e:
        p.error(str(e))
    m = out["eval"]
    hits = (f"; its ranker's Hit@1 {m['eval/ranker_hit@1']:.3f} against the retriever's {m['eval/retriever_hit@1']:.3f} "
            f"over {m['eval/ranker_answerable_calls']:.0f} answerable calls") if "eval/ranker_hit@1" in m else ""
    print(f"{out['learner']} seed {out['seed']}: test EM {m['eval/em']:.3f} evaluated again ({m['eval/questions']:.0f} questions){hits}")
    print(paired_lines(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
