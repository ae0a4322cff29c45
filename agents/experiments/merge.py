"""Joining runs of one preset (`--merge`), and pairing a run from a shared start policy against the
evaluation of the run that made it (`--start-results`): seeds or learners trained as separate processes
become one report, as long as they share the setting, the start policy and its evaluation env.
"""

from __future__ import annotations

import json
from pathlib import Path

from agents.experiments.presets import WHAT_DIFFERS, preset_fields
from searchgym.errors import ConfigError


def start_evaluation(results_json: Path, start_model: Path, eval_samples: int = 0, temperature: float = 1.0) -> dict:
    """The fingerprint and start evaluation (and base, if any) of the seed of `results_json` that made and
    evaluated `start_model`, to pair a later run from that policy against them. A later run with Avg@k
    (`eval_samples` >= 2) must sample at the temperature the start's Avg@k was sampled at."""
    run = json.loads(results_json.read_text())
    results = evaluated_starts(run.get("results", {}).values()).get(str(start_model.resolve()))
    if results is None:
        raise ConfigError(f"{results_json}: no seed there made and evaluated {start_model}")
    made_at = preset_fields(run.get("preset", {}))["temperature"]
    if eval_samples >= 2 and "eval_avg_em" in results["start"] and made_at != temperature:
        raise ConfigError(f"{results_json}: the start's Avg@k was sampled at temperature {made_at:g}, this run samples at "
                          f"{temperature:g}; their Avg@k would not pair (leave out --eval-samples, or use the start's temperature)")
    return {k: results[k] for k in ("fingerprint", "base", "start") if k in results}


def evaluated_starts(seed_results) -> dict[str, dict]:
    """The seeds' results that evaluated their start policy, by the policy's resolved folder: where several
    did (the run that made it, and the copies its learners' runs took), the first, unless a later one's
    evaluation was re-evaluated (`agents.experiments.reevaluate --learner start --update-results`) and the
    first's was not."""
    found: dict[str, dict] = {}
    for r in seed_results:
        if "eval" in r.get("start", {}):
            key = str(Path(r["start"]["model"]).resolve())
            if key not in found or replaces(r["start"], found[key]["start"]):
                found[key] = r
    return found


def replaces(entry: dict, other: dict) -> bool:
    """Whether a start policy's evaluated `entry` is taken over `other`, an evaluation of the same policy: it
    holds a re-evaluation in place of its run's evaluation, and `other` does not."""
    return "reevaluated" in entry and "reevaluated" not in other


NOT_A_SETTING = ("steps", "seeds", "learners", "workers", "eval_base", "learner_options", "micro_batch", "gradient_checkpointing", "park_idle",
                 "malloc_mmap_threshold", "credit_questions", "credit_group", "dtype", "keep_optimizer_states")
"""Preset fields two runs may differ in and still merge: the defaults a run's own flags replace (its RL step
count is compared as the run's `steps`), how many processes trained it (the same results, tested), whether
the released model was evaluated, the learners' options (compared learner by learner), how the update
holds its memory (micro-batch, activation checkpointing: the same gradient up to float rounding, tested;
parking idle tensors in files and glibc's mmap threshold: the same numbers),
the credit view's batch (nothing trains on it), and the precision setting, whose `auto` resolves per
machine: the precision each learner ran at (its entry's `dtype`) is compared instead (`precisions`)."""


def preset_setting(preset: dict) -> dict:
    """A run's preset fields that make its setting (those two runs must share to merge)."""
    return {k: v for k, v in preset.items() if k not in NOT_A_SETTING}


def merged_learners(per_seed: dict[int, dict]) -> list[str]:
    """The learners every merged seed trained, in the report's order."""
    return [n for n in WHAT_DIFFERS if all(n in r for r in per_seed.values())]


def left_out(per_seed: dict[int, dict]) -> str | None:
    """A note naming the learners some merged seeds trained and others did not (so `merged_learners` leaves them
    out of the report, whose tables pair every learner over the same seeds), with the seeds each has; None when
    every learner is in every seed. Merging only the runs of those seeds reports them."""
    seeds = sorted(per_seed)
    partial = {n: [s for s in seeds if n in per_seed[s]] for n in WHAT_DIFFERS}
    partial = {n: have for n, have in partial.items() if have and len(have) < len(seeds)}
    if not partial:
        return None
    named = "; ".join(f"{n} (trained on seed{'s' if len(have) > 1 else ''} {', '.join(map(str, have))} only)"
                      for n, have in partial.items())
    return (f"Left out of this report, which pairs every learner over all the merged seeds ({', '.join(map(str, seeds))}): "
            f"{named}. Merge only the runs of the seeds a learner has to report it.")


def precisions(run: dict) -> set[str]:
    """The precisions a run's learners computed in (each entry's `dtype`; runs from before the setting: float32)."""
    return {r[n].get("dtype", "float32") for r in run["results"].values() for n in r if n in WHAT_DIFFERS and isinstance(r[n], dict)}


def _same_env(a: dict | None, b: dict | None) -> bool:
    """Whether two fingerprints describe one evaluation env (their precisions may differ)."""
    from agents.experiments.fingerprint import differences

    return a == b or (a is not None and b is not None and not differences(a, b))


def merge_results(paths: list[Path]) -> tuple[dict, dict[int, dict]]:
    """The per-seed results of several runs of one preset (e.g. seeds, or learners, run side by side as
    separate processes), as one run's. Runs of one seed combine when their learners differ and they share
    the start policy and its evaluation env, so learners trained apart are paired question by question. A
    learner may run with its own `--learner-option`s, the same in every run that trains it. A seed that
    started from a shared start policy without evaluating it (`--start-model`) takes the start evaluation of
    the seed that made that policy: the same weights, the same world and questions (its fingerprint must
    match), so the same greedy evaluation. A start policy's entry evaluated again (`agents.experiments.reevaluate
    --learner start --update-results`) replaces its copies in every seed that began from it."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    for run in runs:
        run["preset"] = preset_fields(run["preset"])

    def setting(run: dict) -> dict:
        return {"preset": preset_setting(run["preset"]), "steps": run.get("steps")}

    head = setting(runs[0])
    computed = set().union(*(precisions(run) for run in runs))
    if len(computed) > 1:
        raise ConfigError(f"the runs' learners computed in {' and '.join(sorted(computed))}: only runs of one precision merge into "
                          "one report; pair two policies across precisions with python -m agents.experiments.compare --paired")
    options: dict[str, tuple[dict, Path]] = {}
    per_seed: dict[int, dict] = {}
    for path, run in zip(paths, runs):
        if setting(run) != head:
            raise ConfigError(f"{path}: another preset or step count than {paths[0]}; only runs of one setting merge")
        for name in sorted({n for r in run["results"].values() for n in r if n in WHAT_DIFFERS}):
            own = run["preset"]["learner_options"].get(name, {})
            first, where = options.setdefault(name, (own, path))
            if own != first:
                raise ConfigError(f"{path}: {name} ran with options {own or 'none'}, in {where} with {first or 'none'}; "
                                  "only one setting of a learner merges")
        for seed, results in run["results"].items():
            seen = per_seed.get(int(seed))
            if seen is None:
                per_seed[int(seed)] = results
                continue
            both = sorted(n for n in results if n in WHAT_DIFFERS and n in seen)
            if both:
                raise ConfigError(f"{path}: seed {seed} is in two of the runs to merge, with {', '.join(both)} in both")
            if (Path(seen["start"]["model"]).resolve() != Path(results["start"]["model"]).resolve()
                    or not _same_env(seen.get("fingerprint"), results.get("fingerprint"))):
                raise ConfigError(f"{path}: seed {seed} there started from another policy or was evaluated on another env than "
                                  "in the runs before it; its learners cannot be paired with theirs")
            seen.update({n: results[n] for n in results if n in WHAT_DIFFERS})
            if "credit" in results:
                seen.setdefault("credit", results["credit"])
            if "eval" in results["start"] and ("eval" not in seen["start"] or replaces(results["start"], seen["start"])):
                seen["start"] = results["start"]
                if "base" in results:
                    seen["base"] = results["base"]
    head["preset"]["learner_options"] = {name: own for name, (own, _) in options.items() if own}
    evaluated = evaluated_starts(per_seed.values())
    for seed, results in per_seed.items():
        source = evaluated.get(str(Path(results["start"]["model"]).resolve()))
        if "eval" in results["start"] and (source is None or not replaces(source["start"], results["start"])):
            continue
        if source is None:
            raise ConfigError(f"seed {seed} started from {results['start']['model']}, which no merged run evaluated; add the run that made it")
        if not _same_env(source.get("fingerprint"), results.get("fingerprint")):
            raise ConfigError(f"seed {seed} was evaluated on another env than the start policy it shares; its results cannot be paired")
        results["start"] = source["start"]
        if "base" in source:
            results["base"] = source["base"]
    # A seed with no learner is a start-only run's (`--start-only` keeps seed 0): once its evaluation has reached the
    # seeds that began from its policy it has nothing to report, and left in it would empty the report's learners.
    trained = {seed: results for seed, results in per_seed.items() if any(n in results for n in WHAT_DIFFERS)}
    return head, dict(sorted((trained or per_seed).items()))


