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
3 reads two greedy runs. All of them run on the learning check's setting (`agents.experiments.learners`, preset
`cpu-learn`: 2-hop test-split questions of the synthetic world, 4 turns, 1 document shown, the short
prompt), with the gold judge labelling rounds and E-GRPO's exact entity matching. Writes `results.json`
and `results.md` under `--out`.

    python -m agents.experiments.learners --preset cpu-learn    # writes results/learners/seed0/cold_start/model
    python -m agents.experiments.signatures --model results/learners/seed0/cold_start/model --questions 50 --threads 1
    python -m agents.experiments.signatures --model smollm2-135m --hotpotqa ../shared/data/hotpotqa/hotpot_train_sample_official.json

The analysis functions are pure (`agents.experiments.signature_analyses`: `entity_contrast`,
`contribution_spread`, `f1_gain`, `search_hits`): plain inputs in, numbers out.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents.experiments.signature_analyses import (
    contribution_spread,
    entity_contrast,
    episode_em,
    f1_gain,
    group_outcomes,
    mean_or_nan,
    search_hits,
    successful_rounds,
)
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
    """The env and sampling of the analyses: by default the learning check's (`cpu-learn`)."""

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


def run(policy, setting: Setting, questions: int, group: int, hotpotqa: str | None = None, cache_dir: Path | None = None) -> dict[str, Any]:
    """All three analyses, on the synthetic world and (given its file) on HotpotQA; returns what
    `results.json` holds."""
    import gymnasium as gym

    firsts = [("synthetic", gym.make("SearchQA-Synthetic-v0", num_entities=setting.num_entities, hops=setting.hops, split="test",
                                     seed=setting.world_seed, num_questions=questions, cache_dir=cache_dir if cache_dir else False).unwrapped)]
    if hotpotqa:
        firsts.append(("HotpotQA", gym.make("SearchQA-HotpotQA-v0", data_path=hotpotqa, limit=questions,
                                            cache_dir=cache_dir if cache_dir else False).unwrapped))
    n = min(questions, len(firsts[0][1].records))
    results: dict[str, Any] = {"setting": {**asdict(setting), "questions": n, "group": group, "model": policy.describe()},
                               "sampled": [], "oracle_ranker": []}
    for name, first in firsts:
        count = min(questions, len(first.records))
        sampled = _rollouts(policy, _env_maker(first, setting, None), count, group, setting.temperature, setting,
                            f"{name}, G={group} sampled rollouts")
        results["sampled"].append({**sampled_analyses(sampled, group, name), "questions": count})
        results["oracle_ranker"].append(oracle_ranker_gain(policy, first, setting, count, name))
    return results


# -- the report --------------------------------------------------------------------------------------------

def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else "inf" if x == math.inf else f"{x:.{digits}f}"


def report(results: dict[str, Any]) -> str:
    """The three tables, each under a caption with the paper's figure; one row (or block) per setting."""
    s = results["setting"]
    lines = [
        f"Model {s['model'].get('model', s['model'])}; {s['questions']} test questions of the synthetic world ({'/'.join(map(str, s['hops']))}-hop, "
        f"{s['num_entities']} entities, world seed {s['world_seed']}), {s['max_turns']} turns, {s['top_k']} document(s) shown.",
        "",
        f"E-GRPO: questions where correct rollouts match more gold entities than wrong ones, over G={s['group']} rollouts at "
        f"temperature {s['temperature']} (paper: 1939 vs 487, about 4:1, over G=8)",
        "",
        "| setting | questions | sampled EM | correct > wrong | wrong > correct | ratio | ties | all right or all wrong (left out) | "
        "mean rate, correct | mean rate, wrong |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in results["sampled"]:
        ec = g["entity_contrast"]
        lines.append(f"| {g['setting']} | {g['questions']} | {_f(g['sampled_em'])} | {ec['correct_higher']} | {ec['wrong_higher']} | "
                     f"{_f(ec['ratio'], 2)} | {ec['ties']} | {ec['unmixed']} | {_f(ec['mean_rate_correct'])} | {_f(ec['mean_rate_wrong'])} |")
    for g in results["sampled"]:
        cs = g["contribution_spread"]
        lines += [
            "",
            f"CW-GRPO, {g['setting']}: contribution p = u*v (gold judge) over the search rounds of the {cs['trajectories']} successful "
            f"sampled trajectories (paper: concentrated in a few key rounds); share of rounds with p = 1: {_f(cs['contributing_share'])} "
            f"of {cs['rounds']}; {cs['no_search']} answered without searching",
            "",
            "| contributing rounds | trajectories |", "|---|---|",
            *[f"| {k} | {v} |" for k, v in cs["contributing"].items()],
            "",
            "| search rounds | trajectories |", "|---|---|",
            *[f"| {k} | {v} |" for k, v in cs["searches"].items()],
            "",
            "| round | rounds | share with p = 1 |", "|---|---|---|",
            *[f"| {j + 1} | {n} | {_f(share)} |" for j, (n, share) in enumerate(cs["by_position"])],
        ]
    lines += [
        "",
        "COSEARCH: greedy EM/F1 with answer-bearing candidates moved to the top (oracle ranker) vs the retriever's order "
        "(paper: +14.7% F1 for a 7B agent, +26.8% for 3B)",
        "",
        "| setting | questions | pool / shown | answer in pool | answer shown (retriever -> oracle) | EM retriever | EM oracle | "
        "F1 retriever | F1 oracle | F1 change | relative |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in results["oracle_ranker"]:
        r, o = g["retriever"], g["oracle"]
        rel = g["f1_relative_change"]
        lines.append(f"| {g['setting']} | {g['questions']} | {g['candidates']} / {g['top_k']} | {_f(r['answer_in_pool'])} | "
                     f"{_f(r['answer_shown'])} -> {_f(o['answer_shown'])} | {_f(r['em'])} | {_f(o['em'])} | {_f(r['f1'])} | "
                     f"{_f(o['f1'])} | {g['f1_change']:+.3f} | {'-' if math.isnan(rel) else f'{rel:+.1%}'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="each paper's signature analysis on a policy's rollouts")
    p.add_argument("--model", required=True, help="a model folder (e.g. a cold start written by agents.experiments.learners), "
                   "smollm2-135m, or tiny (a random model, for tests)")
    p.add_argument("--questions", type=int, default=50, help="synthetic test questions (and HotpotQA questions)")
    p.add_argument("--group", type=int, default=8, help="G: sampled rollouts per question for the E-GRPO and CW-GRPO analyses")
    p.add_argument("--candidates", type=int, default=Setting.candidates, help="the candidate pool per search the oracle reorders")
    p.add_argument("--entities", type=int, default=Setting.num_entities, help="synthetic world size")
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
    setting = Setting(num_entities=args.entities, candidates=args.candidates, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = run(load_policy(args.model, args.seed, args.dtype), setting, args.questions, args.group, args.hotpotqa, out / "cache")
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
