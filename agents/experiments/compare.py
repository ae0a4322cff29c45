"""Benchmark a new agent against the reference learners, on the exact env they were evaluated on.

`--reference` is the `results.json` of the learners benchmark (`python -m agents.experiments.learners`): each seed's
results carry the fingerprint of its evaluation env (`agents.experiments.fingerprint`). For every seed, the env is
rebuilt from that fingerprint and checked against it, the agent is evaluated greedily on the same questions
(the first `eval_questions` of the env) with the same turn and token budgets, and one table is printed: the
reference policies (base, cold-started, each learner) and the agent, with test EM, F1 and searches per
episode; mean +- sample std over seeds when there are several. `--samples K` also samples K episodes per
question and adds an Avg@K EM column (CW-GRPO's metric): a model samples at `--temperature` (1.0, the
learners' evaluation's) seeded by the reference seed, so a reference policy given as a model scores the
Avg@K the learners benchmark's `--eval-samples K` recorded for it; reference policies evaluated without
samples show "-" there.

`--agent` is a Python callable (`module:callable`), an OpenAI-compatible endpoint (`http(s)://...`) or a
model name/folder (with `--checkpoint`); `agents.experiments.agent_spec` says how each is called.
`--fingerprint KEY=VALUE` states the setting you mean to compare in (e.g. `top_k=3`, `make.hops=[2]`):
a reference evaluated in another setting is refused, naming every differing key with both values.

    python -m agents.experiments.compare --reference results/learners/results.json --agent agents.experiments.examples.scripted_agent:first_title
    python -m agents.experiments.compare --reference results/learners/results.json --agent http://127.0.0.1:30000/v1
    python -m agents.experiments.compare --reference results/learners/results.json --agent results/learners/seed0/cold_start/model
    python -m agents.experiments.compare --paired mine.json theirs.json   # two --out files: paired differences

`--paired A.json B.json` takes two agents' `--out` files, written on the same reference envs, and prints
their paired difference question by question (greedy EM, and Avg@k when both sampled k), per seed and with
its standard errors over questions and over seeds (`agents.experiments.paired`). Either may instead be
`RESULTS_JSON:POLICY`, one policy of a learners results.json (greedy EM), e.g. a learner trained from a
control's final policy against that control: `--paired grpo-from-sft/results.json:grpo sft/results.json:sft`.

See docs/benchmark-your-agent.md.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.experiments.eval import env_fingerprint
from agents.experiments.fingerprint import jsonable, check_requests, differences, env_factory, format_differences, parse_requests
from agents.precision import PRECISIONS
from searchgym.errors import ConfigError, DataError

METRICS = (("eval/em", "test EM"), ("eval/f1", "test F1"), ("eval/searches", "searches/ep"))


def metrics(samples: int = 0) -> tuple[tuple[str, str], ...]:
    """The table's columns: `METRICS`, with Avg@k EM after test EM when the agent was sampled k times."""
    if samples < 2:
        return METRICS
    return (METRICS[0], (f"eval/avg@{samples}/em", f"Avg@{samples} EM"), *METRICS[1:])

RERUN = "re-run the learners benchmark (python -m agents.experiments.learners ...) with this version for a reference compare can rebuild"


def load_reference(path: str | Path) -> dict[str, Any]:
    """A learners benchmark's results.json, checked: every seed has its results and its env fingerprint."""
    path = Path(path)
    try:
        reference = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such reference file; the learners benchmark writes results.json under its --out folder") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not a JSON file ({e})") from e
    if not isinstance(reference, dict) or not isinstance(reference.get("results"), dict) or not reference["results"]:
        raise DataError(f"{path}: not a learners benchmark results.json (no per-seed 'results')")
    unprinted = sorted(seed for seed, r in reference["results"].items() if not isinstance(r, dict) or "fingerprint" not in r)
    if unprinted:
        raise ConfigError(f"{path}: the results of seed(s) {', '.join(unprinted)} carry no env fingerprint (written before "
                          f"fingerprints were recorded), so their evaluation env cannot be rebuilt; {RERUN}")
    return reference


def policies(seed_results: Mapping[str, Any]) -> list[str]:
    """The reference policies of one seed, in the order written (base, start, then each learner)."""
    return [name for name, r in seed_results.items() if isinstance(r, dict) and "eval" in r]


def compare(reference_path: str | Path, agent_spec: str | Any, *, questions: int | None = None, seeds: Sequence[str] | None = None,
            requests: Mapping[str, Any] | None = None, cache_dir: str | Path | None | bool = None, checkpoint: str | None = None,
            model_name: str = "default", api_key: str | None = None, progress: bool = False, samples: int = 0,
            temperature: float = 1.0, dtype: str = "auto") -> dict[str, Any]:
    """Evaluate the agent `agent_spec` (an `--agent` string, or a Python agent object: a function, an object
    with `act`, or a class; `agents.experiments.agent_spec`) on every (or each of `seeds`) seed's fingerprinted env.

    `samples` = k >= 2 also runs k sampled episodes per question (Avg@k) at `temperature`, seeded by each
    reference seed (a seed that is not a number seeds 0). `dtype`: the precision a model agent computes in
    (`agents.precision`; its `describe` records it).

    Returns {"reference": path, "agent": spec, "describe": the agent's description, "seeds": [...],
    "questions": per seed evaluated, "eval_questions": the reference's count, "fingerprints": {seed: the env's
    fingerprint}, "samples": k, "temperature": t,
    "per_seed": {seed: metrics}, "per_question": {seed: {"em": greedy EM per question, "avg_em": mean EM of
    each question's samples (with samples)}}}. Raises ConfigError before any episode when a requested
    setting, a seed, `questions`, `samples` or the rebuilt env differs from the reference."""
    from agents.experiments.agent_spec import agent_name, resolve_agent
    from agents.experiments.progress import phase

    if samples == 1 or samples < 0:
        raise ConfigError(f"--samples {samples}: give 0 (greedy only) or k >= 2 sampled episodes per question for Avg@k")
    if samples and temperature <= 0:
        raise ConfigError(f"--temperature {temperature}: samples at temperature 0 would all be the greedy episode")
    reference = load_reference(reference_path)
    available = list(reference["results"])
    chosen = [str(s) for s in seeds] if seeds else available
    missing = [s for s in chosen if s not in reference["results"]]
    if missing:
        raise ConfigError(f"{reference_path}: no seed {', '.join(missing)}; it has seeds {', '.join(available)}")
    fingerprints = {s: reference["results"][s]["fingerprint"] for s in chosen}
    for seed, fp in fingerprints.items():
        check_requests(fp, requests or {}, f"{reference_path} (seed {seed})")
    counts = {fp["eval_questions"] for fp in fingerprints.values()}
    if len(counts) != 1:
        raise DataError(f"{reference_path}: its seeds were evaluated on different numbers of questions {sorted(counts)}")
    eval_questions = counts.pop()
    n = eval_questions if questions is None else questions
    if not 1 <= n <= eval_questions:
        raise ConfigError(f"--questions {n}: the reference learners were evaluated on the first {eval_questions} questions "
                          f"(fingerprint key eval_questions); give 1 to {eval_questions}, or leave it out to compare on all")

    # Every env is rebuilt and checked before the agent is loaded: a refusal costs no model load.
    factories = {}
    for seed, fp in fingerprints.items():
        source = f"{reference_path} (seed {seed})"
        make_env = env_factory(fp, cache_dir=cache_dir, source=source)
        env = make_env()
        try:
            diffs = differences({"setting": fp["setting"]}, {"setting": jsonable(env_fingerprint(env))})
            max_turns = env.unwrapped.max_turns
        finally:
            env.close()
        if diffs:
            raise ConfigError(f"{source}: the env rebuilt from its fingerprint is not the one the reference learners were "
                              f"evaluated on (this searchgym version builds it differently); differing keys:\n"
                              f"{format_differences(diffs, 'reference', 'rebuilt')}\n{RERUN}")
        factories[seed] = (make_env, max_turns)

    agent = resolve_agent(agent_spec, checkpoint=checkpoint, model_name=model_name, api_key=api_key, dtype=dtype)
    name = agent_name(agent_spec) + (f" with checkpoint {checkpoint}" if checkpoint else "")
    per_seed, per_question = {}, {}
    how = f"greedy + {samples} samples each" if samples else "greedy"
    try:
        for seed, (make_env, max_turns) in factories.items():
            rollout = fingerprints[seed]["rollout"]
            kwargs = {"samples": samples, "temperature": temperature, "seed": int(seed) if seed.lstrip("-").isdigit() else 0}
            if progress:
                total, unit = agent.progress(n, max_turns, rollout, samples)
                with phase(f"[{name}] seed {seed}: {n} questions, {how}", total, unit) as bar:
                    evaluation = agent.evaluate(make_env, n, rollout, bar, **kwargs)
            else:
                evaluation = agent.evaluate(make_env, n, rollout, **kwargs)
            per_seed[seed] = evaluation.metrics
            per_question[seed] = {"em": evaluation.em, **({"avg_em": evaluation.avg_em} if evaluation.avg_em is not None else {})}
        describe = agent.describe()
    finally:
        agent.close()
    return {"reference": str(reference_path), "agent": name, "describe": describe, "seeds": chosen, "questions": n,
            "eval_questions": eval_questions, "fingerprints": fingerprints, "samples": samples, "temperature": temperature, "per_seed": per_seed,
            "per_question": per_question}


def _cell(values: list[float | None]) -> str:
    if not values or any(v is None for v in values):
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}"


def table(reference: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """One Markdown table: each reference policy, then the agent; mean ± sample std over the seeds."""
    seeds = list(result["seeds"])
    first = reference["results"][seeds[0]]
    fp = first["fingerprint"]
    make = fp["make"]
    split = f" {make['split']} split" if "split" in make else ""
    over = f"mean ± std over seeds {', '.join(seeds)}" if len(seeds) > 1 else f"seed {seeds[0]}"
    samples = result.get("samples", 0)
    columns = metrics(samples)
    how = f"greedy, and Avg@{samples} of {samples} samples at temperature {result['temperature']:g}" if samples else "greedy"
    lines = [f"{fp['env_id']}{split}, first {fp['eval_questions']} questions per seed, {how}; {over}", "",
             "| policy | " + " | ".join(label for _, label in columns) + " | questions |",
             "|---" * (len(columns) + 2) + "|"]
    for name in policies(first):
        rows = [reference["results"][s][name]["eval"] for s in seeds if name in reference["results"][s]]
        cells = [_cell([r.get(key) for r in rows]) for key, _ in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {fp['eval_questions']} |")
    agent_rows = [result["per_seed"][s] for s in seeds]
    cells = [_cell([r.get(key) for r in agent_rows]) for key, _ in columns]
    lines.append(f"| agent: {result['agent']} | " + " | ".join(cells) + f" | {result['questions']} |")
    if result["questions"] < fp["eval_questions"]:
        lines += ["", f"The agent answered only the first {result['questions']} of the reference's {fp['eval_questions']} "
                      "questions (--questions): its row is not on the same questions as the others."]
    return "\n".join(lines)


def paired(a: Mapping[str, Any], b: Mapping[str, Any], names: tuple[str, str] = ("A", "B")) -> str:
    """The paired difference A - B of two `compare` results (their `--out` files) on the seeds both played:
    greedy EM, and Avg@k when both sampled the same k, as a Markdown table. Refuses (ConfigError) results
    on other envs (their fingerprints differ on a shared seed), on other questions, or without a shared seed."""
    from agents.experiments.paired import HEADER, RULE, paired_difference

    for name, r in zip(names, (a, b)):
        if "per_question" not in r or "fingerprints" not in r:
            raise ConfigError(f"{name}: not an agents.experiments.compare --out file of this version (no per_question or fingerprints); "
                              "run compare again with --out")
    seeds = [s for s in a["per_question"] if s in b["per_question"]]
    if not seeds:
        raise ConfigError(f"{names[0]} played seeds {', '.join(a['per_question'])}, {names[1]} seeds {', '.join(b['per_question'])}: "
                          "none in common")
    for seed in seeds:
        diffs = differences(a["fingerprints"][seed], b["fingerprints"][seed])
        if diffs:
            raise ConfigError(f"seed {seed}: {names[0]} and {names[1]} were evaluated on different envs; differing keys:\n"
                              + format_differences(diffs, names[0], names[1]))
    if a["questions"] != b["questions"]:
        raise ConfigError(f"{names[0]} answered {a['questions']} questions per seed, {names[1]} {b['questions']}: not the same questions")
    rows = [("test EM", "em")]
    k = a.get("samples", 0)
    sampled_alike = k >= 2 and (b.get("samples", 0), b.get("temperature")) == (k, a.get("temperature"))
    if sampled_alike:
        rows.append((f"Avg@{k} EM", "avg_em"))
    lines = [f"{names[0]} - {names[1]}, paired over {a['questions']} questions per seed", "",
             f"| metric | difference per seed ({', '.join(seeds)}) | {HEADER}", RULE]
    for label, key in rows:
        d = paired_difference([np.asarray(a["per_question"][s][key]) - np.asarray(b["per_question"][s][key]) for s in seeds])
        lines.append(f"| {label} | " + " | ".join(d.cells()) + " |")
    if not sampled_alike and (k or b.get("samples", 0)):
        def sampling(r: Mapping[str, Any]) -> str:
            n = r.get("samples", 0)
            return f"{n} episodes per question at temperature {r.get('temperature')}" if n else "0 episodes (greedy only)"

        lines += ["", f"No Avg@k row: {names[0]} sampled {sampling(a)}, {names[1]} {sampling(b)}."]
    return "\n".join(lines)


def _read_result(path: str) -> dict[str, Any]:
    """A `--paired` operand: a compare `--out` file, or `RESULTS_JSON:POLICY`, one policy of a learners
    results.json (`start`, a learner, `sft`) with its greedy per-question EM (`learners_policy`)."""
    file, policy = path, None
    if not Path(path).exists() and ":" in path:
        file, policy = path.rsplit(":", 1)
    try:
        data = json.loads(Path(file).read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{file}: no such file; agents.experiments.compare --out writes one, or give RESULTS_JSON:POLICY "
                          "for a policy of an agents.experiments.learners results.json") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{file}: not a JSON file ({e})") from e
    return data if policy is None else learners_policy(data, policy, file)


def learners_policy(run: Mapping[str, Any], policy: str, where: str = "results.json") -> dict[str, Any]:
    """One policy of a learners results.json in the shape of a compare `--out` file (greedy only): its
    per-question test EM and the fingerprint of each seed that evaluated it, so that two policies of
    different runs on the same envs (e.g. a learner trained from a control's final policy, and that control)
    pair question by question."""
    if "results" not in run:
        raise ConfigError(f"{where}: not an agents.experiments.learners results.json (no results)")
    seeds = {s: r for s, r in run["results"].items() if "eval_em" in r.get(policy, {})}
    if not seeds:
        held = sorted({n for r in run["results"].values() for n, v in r.items() if isinstance(v, dict) and "eval_em" in v})
        raise ConfigError(f"{where}: no seed there evaluated {policy!r} question by question; policies with per-question "
                          f"results: {', '.join(held) or 'none'}")
    counts = {len(r[policy]["eval_em"]) for r in seeds.values()}
    # The policy's own precision (its entry's), where the seed's fingerprint has the start policy's evaluation's.
    own = {s: {"precision": r[policy]["dtype"]} if "dtype" in r[policy] else {} for s, r in seeds.items()}
    return {"agent": f"{where}:{policy}", "questions": min(counts), "samples": 0,
            "fingerprints": {s: {**r.get("fingerprint", {}), **own[s]} for s, r in seeds.items()},
            "per_question": {s: {"em": r[policy]["eval_em"]} for s, r in seeds.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="benchmark an agent against the reference learners on their fingerprinted env")
    p.add_argument("--reference", help="results.json written by python -m agents.experiments.learners")
    p.add_argument("--agent", help="module:callable, an OpenAI-compatible URL, or a model name/folder")
    p.add_argument("--paired", nargs=2, metavar=("A_JSON", "B_JSON"),
                   help="instead of evaluating: the paired difference A - B of two agents' --out files (or RESULTS_JSON:POLICY, "
                        "a policy of a learners results.json, greedy), question by question")
    p.add_argument("--checkpoint", help="a training checkpoint folder (step-NNNNNN) to load on top of a model --agent")
    p.add_argument("--questions", type=int, help="evaluate only the first N of the reference's questions (default: all)")
    p.add_argument("--seeds", nargs="+", help="the reference seeds to compare on (default: all)")
    p.add_argument("--fingerprint", nargs="+", default=[], metavar="KEY=VALUE",
                   help="the setting you expect (e.g. top_k=3 make.hops=[2]); a reference in another one is refused")
    p.add_argument("--model-name", default="default", help="the model field sent to an OpenAI-compatible endpoint")
    p.add_argument("--api-key-env", metavar="VAR", help="an environment variable holding the endpoint's API key")
    p.add_argument("--samples", type=int, default=0, metavar="K",
                   help="also sample K episodes per question and report Avg@K EM (CW-GRPO reports Avg@4); 0: greedy only")
    p.add_argument("--temperature", type=float, default=1.0, help="the samples' temperature (default 1.0, the learners' evaluation's)")
    p.add_argument("--threads", type=int, help="threads for torch, numba and BLAS (default: the physical cores)")
    p.add_argument("--dtype", choices=PRECISIONS, default="auto", help="the precision a model --agent computes in (agents.precision: "
                   "auto is bfloat16 on a CPU with native bfloat16 instructions, float32 elsewhere)")
    p.add_argument("--cache-dir", help="where rebuilt envs cache their retrieval index (default: searchgym's cache)")
    p.add_argument("--out", help="also write the agent's per-seed metrics as JSON here")
    args = p.parse_args(argv)
    if args.paired:
        a, b = (_read_result(path) for path in args.paired)
        print(paired(a, b, tuple(args.paired)))
        return 0
    if not args.reference or not args.agent:
        p.error("--reference and --agent are required (or --paired A_JSON B_JSON)")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the evaluation's own bar is the one to watch
    from searchgym.threads import set_threads

    set_threads(args.threads)
    from agents.memory import ask_huge_pages

    ask_huge_pages()
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    result = compare(args.reference, args.agent, questions=args.questions, seeds=args.seeds, requests=parse_requests(args.fingerprint),
                     cache_dir=args.cache_dir, checkpoint=args.checkpoint, model_name=args.model_name, api_key=api_key, progress=True,
                     samples=args.samples, temperature=args.temperature, dtype=args.dtype)
    print(table(load_reference(args.reference), result))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
