"""Each reference paper's signature analysis, in miniature, printed beside the paper's own figure.

1. E-GRPO: over G rollouts per question, do correct rollouts match more gold entities in their thinking
   than wrong ones? The count of questions where the correct rollouts' mean entity match rate is higher,
   against those where the wrong ones' is (the paper: 1939 vs 487 over G=8, about 4:1).
2. CW-GRPO: in successful trajectories, how is contribution p = u * v spread over the search rounds? A
   histogram of contributing rounds per trajectory, the share of rounds with p = 1, and that share by the
   round's position (the paper finds contribution concentrated in a few key rounds).
3. COSEARCH: the oracle-ranker experiment. Greedy EM/F1 when the candidates that hold a gold answer are
   moved to the top of the pool (`searchgym.rankers.OracleRanker`) against the retriever's own order (the
   paper: +14.7% F1 for a 7B agent, +26.8% for 3B).

Each runs on the synthetic world and, given `--hotpotqa`, on that file's first questions too (real
questions and paragraphs, the gold judge reading their supporting-fact titles).

Analyses 1 and 2 read one batch of G sampled rollouts per question (the learners' sampling temperature);
3 reads two greedy runs (`--analyses` picks either). By default all of them run on the learning check's
setting (`agents.experiments.learners`, preset `cpu-learn`: 2-hop test-split questions of the synthetic
world, 4 turns, 1 document shown, the short prompt); `--preset NAME` runs them on that preset's setting,
on its validation split where it has one (a question file's preset: on its training questions), so that
its test questions serve the learning check alone. The gold judge labels rounds and gold entities match
by E-GRPO's exact rule. The report opens with each method's premise against its bound (`PREMISES`: the
oracle ranker's F1 gain >= +10%, the share of successful rounds with p = 1 <= 0.7). Writes `results.json`
and `results.md` under `--out`.

    python -m agents.experiments.learners --preset cpu-learn    # writes results/learners/seed0/cold_start/model
    python -m agents.experiments.signatures --model results/learners/seed0/cold_start/model --questions 50 --threads 1
    python -m agents.experiments.signatures --model smollm2-135m --hotpotqa ../shared/data/hotpotqa/hotpot_train_sample_official.json
    python -m agents.experiments.learners --preset cpu-ranker --start-only --eval-split validation --out results/ranker-start
    python -m agents.experiments.signatures --preset cpu-ranker --model results/ranker-start/seed0/cold_start/model --analyses oracle

The analysis functions are pure (`agents.experiments.signature_analyses`: `entity_contrast`,
`contribution_spread`, `f1_gain`, `search_hits`): plain inputs in, numbers out.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.experiments.signature_analyses import (
    contribution_spread,
    entity_contrast,
    episode_em,
    f1_gain,
    group_outcomes,
    mean_or_nan,
    retrieval_room,
    search_hits,
    successful_rounds,
)
# The report's names stay importable from here, where they were before the report had a module of its own.
from agents.experiments.signature_report import PREMISES as PREMISES
from agents.experiments.signature_report import SYNTHETIC, report
from agents.experiments.signature_report import premises as premises
from agents.precision import PRECISIONS
from searchgym.errors import ConfigError


def _finite(value: Any) -> Any:
    """`value` with nan and inf as None: strict JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# -- running the analyses ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """The env and sampling of the analyses: by default the learning check's (`cpu-learn`); `from_preset`
    gives a preset's."""

    num_entities: int = 1000
    """Synthetic world size."""
    world_seed: int = 0
    """The synthetic world's seed (`cpu-learn` fixes 0)."""
    hops: tuple[int, ...] = (2,)
    max_turns: int = 4
    top_k: int = 1
    """Documents shown per search."""
    candidates: int = 50
    """The pool the ranker picks from (the oracle moves answer-bearing ones among these to the top); COSEARCH's
    N = 50. With a pool of 5 the retriever's first document already held an answer whenever the pool did, in
    every search measured (docs/experiment-log.md, "Signature analyses")."""
    max_turn_tokens: int = 64
    max_response_tokens: int = 512
    temperature: float = 1.0
    """Sampling temperature of the G rollouts per question (the learners' default)."""
    seed: int = 0
    env_id: str = SYNTHETIC
    """The env whose questions are analysed."""
    split: str = "test"
    """The synthetic world's split analysed: a preset with a validation split is analysed on it, so that its
    test questions serve the learning check alone."""
    env_options: dict = field(default_factory=dict)
    """Further `gym.make` options of the synthetic world and its questions (`Preset.env_options`)."""
    data_path: str | None = None
    """The question file of an env over one."""
    limit: int | None = None
    """Over a question file: analyse only its first `limit` questions (a preset's training questions, so that
    its held-out ones serve the learning check alone)."""

    @classmethod
    def from_preset(cls, preset: Any, candidates: int | None = None) -> Setting:
        """A preset's env and sampling, on its validation split where it has one (else its test split; over a
        question file, its training questions); `candidates` defaults to the pool COSEARCH's ranker picks from
        in that preset (its `ranker_candidates`)."""
        from agents.learners.cosearch import CoSearchConfig

        if candidates is None:
            candidates = preset.learner_options.get("cosearch", {}).get("ranker_candidates", CoSearchConfig.ranker_candidates)
        options = {k: v for k, v in preset.env_options.items()}
        return cls(num_entities=preset.num_entities, world_seed=preset.world_seed or 0, hops=tuple(preset.hops),
                   max_turns=preset.max_turns, top_k=preset.top_k, candidates=candidates, max_turn_tokens=preset.max_turn_tokens,
                   max_response_tokens=preset.max_response_tokens, temperature=preset.temperature, env_id=preset.env_id,
                   split="validation" if options.get("validation_fraction") else "test", env_options=options,
                   data_path=preset.data_path, limit=preset.train_questions)

    def __post_init__(self) -> None:
        if self.candidates < self.top_k:
            raise ConfigError(f"candidates ({self.candidates}) must be >= top_k ({self.top_k})")
        if min(self.num_entities, self.max_turns, self.top_k, self.max_turn_tokens, self.max_response_tokens) < 1:
            raise ConfigError("num_entities, max_turns, top_k and the token budgets must be >= 1")


def load_policy(model: str, seed: int = 0, dtype: str = "auto"):
    """An in-process policy: `tiny` (a random 2-layer model, for tests), `smollm2-135m`, or a model folder,
    computing in `dtype` (`agents.precision`)."""
    from agents.policies.hf import HFPolicy, HFPolicyConfig
    from agents.train.setup import load_model

    net, tokenizer = load_model(model, seed)
    return HFPolicy(net, tokenizer, config=HFPolicyConfig(model=model, seed=seed, dtype=dtype))


def _env_maker(first, setting: Setting, ranker: str | None):
    """Envs over `first`'s questions, corpus and retriever (one index for every episode's env)."""
    from searchgym.envs import SearchQAEnv
    from agents.experiments.presets import SHORT_TEMPLATE

    def make():
        return SearchQAEnv(first.records, first.corpus, retriever=first.retriever, ranker=ranker, template=SHORT_TEMPLATE,
                           max_turns=setting.max_turns, top_k=setting.top_k, candidates=setting.candidates, judge="gold",
                           entity_match="exact", cache_dir=False)
    return make


def _rollouts(policy, make, questions: int, group: int, temperature: float, setting: Setting, what: str):
    from agents.rollout import RolloutConfig, RolloutEngine
    from agents.experiments.progress import counting_passes, generation_budget, phase

    config = RolloutConfig(group_size=group, temperature=temperature, max_turn_tokens=setting.max_turn_tokens,
                           max_response_tokens=setting.max_response_tokens, seed=setting.seed)
    engine = RolloutEngine(policy, make, config)
    rows = getattr(getattr(policy, "config", None), "max_batch_rows", None)
    budget = generation_budget(questions * group, setting.max_turns, setting.max_turn_tokens, rows)
    try:
        with phase(f"[{what}] {questions} questions x {group} (model passes, at most)", budget, "pass") as bar, \
                counting_passes(getattr(policy, "sampling_model", None), bar):
            return engine.rollout([{"options": {"index": i}} for i in range(questions)])
    finally:
        engine.close()


def oracle_ranker_gain(policy, first, setting: Setting, questions: int, name: str) -> dict[str, Any]:
    """Greedy EM/F1 on `first`'s first `questions` questions with the retriever's order and with the oracle
    ranker over the same candidate pool, plus how often a pool and the shown documents hold an answer."""
    from searchgym.rankers import answer_bearing

    n = min(questions, len(first.records))
    answers = {r.id: r.answers for r in first.records}

    def holds(qid: str, ids: list[str]) -> bool:
        return bool(answer_bearing((first.corpus.get(i) for i in ids), answers[qid]))

    out: dict[str, Any] = {"setting": name, "questions": n, "candidates": setting.candidates, "top_k": setting.top_k}
    for ranker in ("retriever", "oracle"):
        trajectories = _rollouts(policy, _env_maker(first, setting, None if ranker == "retriever" else "oracle"), n, 1, 0.0,
                                 setting, f"{name}, {ranker} order, greedy")
        episodes = [t.step_infos[-1].get("episode") or {} for t in trajectories]
        out[ranker] = {metric: mean_or_nan([e.get(metric, 0.0) for e in episodes]) for metric in ("em", "f1", "cover_em")}
        out[ranker].update(search_hits(trajectories, holds, holds))
    out["f1_change"], out["f1_relative_change"] = f1_gain(out["retriever"]["f1"], out["oracle"]["f1"])
    return out


def sampled_analyses(trajectories: Sequence[Any], group: int, name: str) -> dict[str, Any]:
    """E-GRPO's entity contrast and CW-GRPO's contribution spread over G sampled rollouts per question."""
    contrast = entity_contrast(group_outcomes(trajectories, group))
    return {"setting": name, "entity_contrast": {**asdict(contrast), "ratio": contrast.ratio},
            "contribution_spread": asdict(contribution_spread(successful_rounds(trajectories))),
            "sampled_em": mean_or_nan([episode_em(t.step_infos) for t in trajectories])}


ANALYSES = ("sampled", "oracle", "retrieval")
"""`sampled`: E-GRPO's and CW-GRPO's analyses (G sampled rollouts per question); `oracle`: COSEARCH's (two greedy
runs); `retrieval`: where the retriever ranks each oracle search's gold passage (no model, seconds)."""


def retrieval_room_of(first, setting: Setting, questions: int, name: str) -> dict[str, Any]:
    """`retrieval_room` over `first`'s first `questions` questions: each search of the oracle trajectory
    (`searchgym.data.oracle`) that names a gold title (a hop's subject, a HotpotQA title; not an aside) is
    after that title's gold passage; the pool is `setting.candidates` deep."""
    from searchgym.data.oracle import oracle_turns
    from searchgym.entities import normalize_entity

    rows = []
    for record in first.records[:questions]:
        targets = list(zip(map(normalize_entity, record.gold_titles), record.gold_docs))
        row = []
        for turn in oracle_turns(record):
            action = first.protocol.parse(turn)
            query = normalize_entity(action.query or "") if action.kind == "search" else ""
            wanted = {doc for title, doc in targets if title and query.startswith(title)}
            if wanted:
                ids = [h.doc.id for h in first.retriever.search([action.query], setting.candidates)[0]]
                row.append((bool(ids) and ids[0] in wanted, bool(wanted.intersection(ids))))
        rows.append(row)
    return {"setting": name, "candidates": setting.candidates, **asdict(retrieval_room(rows))}


def oracle_lengths(first, setting: Setting, tokenizer, questions: int) -> dict[str, float]:
    """Response tokens (the policy's turns and the documents shown, after the prompt) of the oracle
    trajectories of `first`'s first `questions` questions, as the cold start tokenizes them: whether the
    setting's `max_response_tokens` fits what the cold start teaches."""
    import numpy as np

    from agents.train.sft import oracle_example

    env = _env_maker(first, setting, None)()
    lengths = []
    for i in range(min(questions, len(first.records))):
        example = oracle_example(env, tokenizer, i)
        lengths.append(len(example.token_ids) - example.loss_mask.index(1))
    return {"mean": float(np.mean(lengths)), "p90": float(np.percentile(lengths, 90)), "max": float(max(lengths)),
            "over_budget": float(np.mean([n > setting.max_response_tokens for n in lengths]))}


def analysis_envs(setting: Setting, questions: int, hotpotqa: str | None = None, cache_dir: Path | None = None) -> list[tuple[str, Any]]:
    """(name, env) of each question set analysed: the setting's (its synthetic split, or its question file's
    first `limit` questions), then `hotpotqa`'s first questions."""
    import gymnasium as gym

    cache = cache_dir if cache_dir else False
    if setting.env_id == SYNTHETIC:
        first = gym.make(SYNTHETIC, num_entities=setting.num_entities, hops=setting.hops, split=setting.split, seed=setting.world_seed,
                         num_questions=questions, cache_dir=cache, **setting.env_options)
        name = "synthetic" if setting.split == "test" and not setting.env_options else f"synthetic ({setting.split})"
    else:
        limit = questions if setting.limit is None else min(questions, setting.limit)
        first = gym.make(setting.env_id, data_path=setting.data_path, limit=limit, cache_dir=cache, **setting.env_options)
        name = setting.env_id.removeprefix("SearchQA-").removesuffix("-v0")
    envs = [(name, first.unwrapped)]
    if hotpotqa:
        envs.append(("HotpotQA", gym.make("SearchQA-HotpotQA-v0", data_path=hotpotqa, limit=questions, cache_dir=cache).unwrapped))
    return envs


def run(policy, setting: Setting, questions: int, group: int, hotpotqa: str | None = None, cache_dir: Path | None = None,
        analyses: Sequence[str] = ANALYSES) -> dict[str, Any]:
    """The analyses asked for (`ANALYSES`), on the setting's questions and (given its file) on HotpotQA;
    returns what `results.json` holds."""
    firsts = analysis_envs(setting, questions, hotpotqa, cache_dir)
    n = min(questions, len(firsts[0][1].records))
    model = policy.describe() if policy is not None else {"model": "none (retrieval only)"}
    results: dict[str, Any] = {"setting": {**asdict(setting), "questions": n, "group": group, "model": model},
                               "sampled": [], "oracle_ranker": [], "retrieval": []}
    for name, first in firsts:
        count = min(questions, len(first.records))
        if "sampled" in analyses:
            sampled = _rollouts(policy, _env_maker(first, setting, None), count, group, setting.temperature, setting,
                                f"{name}, G={group} sampled rollouts")
            results["sampled"].append({**sampled_analyses(sampled, group, name), "questions": count})
        if "oracle" in analyses:
            results["oracle_ranker"].append(oracle_ranker_gain(policy, first, setting, count, name))
        if "retrieval" in analyses:
            room = retrieval_room_of(first, setting, count, name)
            if policy is not None:
                room["oracle_tokens"] = oracle_lengths(first, setting, policy.tokenizer, count)
            results["retrieval"].append(room)
    return results


def _setting(args: argparse.Namespace) -> Setting:
    """The analyses' setting: `--preset`'s, or the learning check's, with the flags' overrides."""
    from dataclasses import replace

    if args.preset is None:
        if args.data_path or args.env_option:
            raise ConfigError("--data-path and --env-option go with a --preset")
        return Setting(num_entities=args.entities or Setting.num_entities, candidates=args.candidates or Setting.candidates,
                       seed=args.seed)
    from agents.experiments.presets import PRESETS

    if args.preset not in PRESETS:
        raise ConfigError(f"--preset {args.preset!r}: no such preset; presets: {', '.join(sorted(PRESETS))}")
    setting = replace(Setting.from_preset(PRESETS[args.preset], args.candidates), seed=args.seed)
    if args.entities:
        setting = replace(setting, num_entities=args.entities)
    if args.env_option:
        from agents.experiments.presets import parse_env_options

        setting = replace(setting, env_options=parse_env_options(args.env_option, setting.env_options))
    if args.data_path:
        if setting.env_id == SYNTHETIC:
            raise ConfigError(f"--data-path: preset {args.preset} is over the synthetic world, not a question file")
        setting = replace(setting, data_path=args.data_path)
    return setting


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="each paper's signature analysis on a policy's rollouts")
    p.add_argument("--model", help="a model folder (e.g. a cold start written by agents.experiments.learners), "
                   "smollm2-135m, or tiny (a random model, for tests); not needed for --analyses retrieval alone")
    p.add_argument("--questions", type=int, default=50, help="synthetic test questions (and HotpotQA questions)")
    p.add_argument("--group", type=int, default=8, help="G: sampled rollouts per question for the E-GRPO and CW-GRPO analyses")
    p.add_argument("--preset", help="analyse a preset's setting (agents.experiments.presets: cpu-ranker, cpu-rounds, cpu-hotpotqa, "
                   "cpu-learn, ...) on its validation split, or its training questions over a question file; default: the "
                   "learning check's setting on its test split")
    p.add_argument("--analyses", nargs="+", choices=ANALYSES, default=list(ANALYSES), help="sampled: E-GRPO's and CW-GRPO's "
                   "(G sampled rollouts per question); oracle: COSEARCH's oracle ranker (two greedy runs); retrieval: where the "
                   "retriever ranks each oracle search's gold passage (no model; given --model, also the oracle trajectories' "
                   "response tokens in its tokenizer)")
    p.add_argument("--data-path", help="with --preset over a question file: the file (default: the preset's)")
    p.add_argument("--env-option", nargs="+", default=[], metavar="OPTION=VALUE", help="with --preset: set a gym.make option of "
                   "its env (decoy_rate=1.0, ...)")
    p.add_argument("--candidates", type=int, help=f"the candidate pool per search the oracle reorders (default {Setting.candidates}; "
                   "with --preset, the pool COSEARCH's ranker picks from in it)")
    p.add_argument("--entities", type=int, help=f"synthetic world size (default {Setting.num_entities}, or the preset's)")
    p.add_argument("--hotpotqa", metavar="FILE", help="also run the three analyses on this HotpotQA file's first questions")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="threads for torch, numba and BLAS (default: the physical cores)")
    p.add_argument("--out", default="results/signatures")
    p.add_argument("--dtype", choices=PRECISIONS, default="auto", help="the policy's precision (agents.precision)")
    args = p.parse_args(argv)
    if args.questions < 1 or args.group < 2:
        raise ConfigError(f"--questions must be >= 1 and --group >= 2 (a contrast needs several rollouts), got {args.questions}, {args.group}")
    from transformers.utils import logging as hf_logging

    from searchgym.threads import set_threads

    set_threads(args.threads)
    hf_logging.disable_progress_bar()
    setting = _setting(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    needs_model = set(args.analyses) - {"retrieval"}
    if needs_model and not args.model:
        raise ConfigError(f"--analyses {' '.join(sorted(needs_model))} roll a policy out: give --model")
    # With a model, the retrieval analysis also counts the oracle trajectories' tokens in its tokenizer.
    policy = load_policy(args.model, args.seed, args.dtype) if args.model else None
    results = run(policy, setting, args.questions, args.group, args.hotpotqa, out / "cache", args.analyses)
    results["command"] = "python -m agents.experiments.signatures " + " ".join(argv if argv is not None else __import__("sys").argv[1:])
    table = report(results)
    (out / "results.json").write_text(json.dumps(_finite(results), indent=2, default=str))
    (out / "results.md").write_text(f"`{results['command']}`\n\n{table}\n")
    print(table)
    print(f"\nwritten: {out / 'results.json'}, {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
