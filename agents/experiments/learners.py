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
`--out` (and the same per seed under `--out/seed<N>`). Each seed's results carry the `fingerprint` of its
evaluation env (`agents.experiments.fingerprint`), against which `python -m agents.experiments.compare` scores a new agent.

    python -m agents.experiments.learners --preset cpu              # SmolLM2-135M, 1- and 2-hop synthetic questions (the main job)
    python -m agents.experiments.learners --preset cpu --seeds 0 1  # the learning check over two seeds
    python -m agents.experiments.learners --preset gpu --hotpotqa hotpot_dev_distractor_v1.json  # see docs/learners.md
                                                            # ("The GPU preset"): SGLang rollouts, Qwen2.5-0.5B

With `--hotpotqa FILE` (HotpotQA questions with their paragraphs, e.g. the official distractor dev file),
the start policy and each learner's final policy are also evaluated greedily on its first questions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path

import numpy as np

from agents.memory import release_memory
from agents.train import TrainConfig
from searchgym.errors import ConfigError
from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
from agents.train.metrics import SIGNALS, signal_summary
from agents.experiments.curves import plot_curves
from agents.experiments.fingerprint import trainer_eval_fingerprint
from agents.experiments.progress import counting_calls, counting_passes, evaluation_budget, phase

SFT = "sft"
"""The supervised control: no RL; the start policy's cold start goes on for as many steps as the learners' RL."""

WHAT_DIFFERS = {
    "grpo": "outcome reward (EM), one advantage per trajectory for every token",
    "cw-grpo": "same reward; the advantage is moved between search rounds by the GoldJudge's contribution labels (alpha=inf)",
    "e-grpo": "wrong answers earn 0.3 x their group-normalized gold-entity match rate; over-long rollouts leave the loss",
    "cosearch": "the agent trains with GRPO while a second model reranks 5 candidates per search, trained on clustered calls (Eq. 6)",
    SFT: "no RL (a control): the cold start's supervised steps on oracle trajectories go on for as many steps as RL runs, "
         "with the cold start's batch and learning rate, on the next questions of its stream",
}
RL_LEARNERS = tuple(n for n in WHAT_DIFFERS if n != SFT)
"""What a run trains when neither `--learners` nor the preset names any: the four reference learners."""


# The CPU preset's prompt: the same tags and contract as Search-R1's instruction in a third of the tokens.
# On 2 cores prompt tokens dominate the step (each turn re-reads the whole context), so the preset spends
# its budget on rollouts instead of on the instruction.
SHORT_TEMPLATE = (
    "Answer the question. Think inside <think> </think>. To search, write <search> query </search>; results "
    "come back inside <information> </information>. Give the final answer inside <answer> </answer>.\n"
    "Question: {question}\n"
)


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
    template: str | None = None
    """None: Search-R1's instruction."""
    rollout_backend: str = "hf"
    """`hf` samples in the training process; `sglang` on `servers` SGLang servers (`RolloutConfig.backend`)."""
    servers: int = 0
    """SGLang servers the preset expects, by default at http://127.0.0.1:30000, :30001, ... (`--sglang-urls`)."""
    weight_sync: str = "disk"
    device: str = "cpu"
    """Where the update runs."""
    gradient_checkpointing: bool = False
    """Recompute activations in the update's backward pass (`OptimConfig.gradient_checkpointing`)."""
    max_batch_rows: int = 64
    """Rows the in-process policy decodes together (`RolloutConfig.max_batch_rows`)."""
    micro_batch: int = 4
    """Rows per forward and backward pass of the updates and the cold start (`OptimConfig.micro_batch`): fewer
    rows hold less memory and give the same gradient up to float rounding (tested), like
    `gradient_checkpointing`; both are how a run computes, not what it learns, so runs that differ in them merge."""
    max_turns: int = 3
    """Env turns per episode (`EnvConfig.max_turns`): a k-hop question needs k searches and an answer."""
    temperature: float = 1.0
    """The rollouts' sampling temperature (`RolloutConfig.temperature`): RL samples its groups at it, and Avg@k
    samples at it (the sampling policy RL trains). Part of the setting: runs at other temperatures do not merge."""
    eval_samples: int = 0
    """k >= 2 also reports Avg@k (mean EM of k sampled rollouts per eval question, as CW-GRPO reports); it
    costs k more rollouts per question than the greedy evaluation."""
    eval_base: bool = True
    """Also evaluate the model as released (the base policy) before its cold start."""
    learners: tuple[str, ...] | None = None
    """The learners a run of the preset trains by default (None: all four)."""
    learner_options: dict[str, dict] = field(default_factory=dict)
    """Options of a learner's config that differ from its defaults, by learner (`{"cw-grpo": {"kl_coef": 0.0}}`;
    `--learner-option cw-grpo.kl_coef=0`): part of the setting, so runs that differ in them do not merge."""
    seeds: tuple[int, ...] = (0,)
    """The seeds a run of the preset uses by default."""
    world_seed: int | None = None
    """The synthetic world's seed (`EnvConfig.world_seed`); None: each seed builds its own world."""
    workers: int = 1
    """Learners trained side by side, each in its own process with 1/`workers` of the threads: on a small CPU
    two one-thread processes get more done than one two-thread process (small matmuls scale poorly)."""
    shared_start: bool = False
    """Cold-start and evaluate the start policy once, under the first seed, and start every seed's learners
    from it: seeds then differ only in RL (question order, sampling). Needs a fixed `world_seed`, so that
    every seed evaluates on the same questions."""

    def __post_init__(self) -> None:
        for name in ("workers", "micro_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"Preset.{name} must be >= 1, got {getattr(self, name)}")
        if self.shared_start and self.world_seed is None:
            raise ConfigError("Preset.shared_start needs a fixed world_seed: every seed must evaluate on the start policy's questions")


PRESETS = {
    # Sized for 2 CPU cores and ~15 minutes per seed: few, small steps; the table reports what that budget buys.
    # 1- and 2-hop questions: a 2-hop episode has two search rounds, where CW-GRPO's credit differs from GRPO's;
    # 512 response tokens let a 2-hop episode reach its answer (two documents of ~110 tokens each).
    # lr 1e-5: at 2e-6 three updates left every learner sampling token-identical rollouts (same seed).
    # No activation checkpointing: it lowers the update's peak memory but made the update 25-40% slower here,
    # and the machine has the memory. 64 rows: sampled tok/s still rises from batch 8 to 32 (79 -> 141 tok/s),
    # so a step's 8 rows and an eval's 20 go in one chunk (`python -m benchmarks.step`, docs/learners.md
    # "Speed and memory on CPU").
    # Two learner processes at one thread each (COSEARCH, the longest, in one; the other three in turn in the
    # other) instead of one process at two threads. 2 RL steps and no evaluation of the released model
    # (`--eval-base` does it, ~40 s; it scored 0.000 on these questions in every run): with 3 steps and that
    # evaluation the job took 15.3-15.7 minutes on 2 idle cores, over its 15.
    "cpu": Preset("smollm2-135m", 1000, (1, 2), 8, 2, 2, 4, 20, 64, 512, 1, 1e-5, SHORT_TEMPLATE, gradient_checkpointing=False,
                  max_batch_rows=64, max_turns=4, workers=2, eval_base=False),
    # The learning check: 2-hop questions (two search rounds that differ in contribution), a short cold start
    # that leaves room to improve (8 steps: greedy test EM 0.68 on 60 questions, with 512 response tokens;
    # 320 cut most episodes before their answer), 200 held-out questions, three RL seeds from one shared
    # start in one world (docs/learners.md, "The learning check"). RL: 10 steps x 4 questions x 8 rollouts at
    # lr 1e-5 (GRPO +0.043 EM over the start on every seed); 6 x 2 x 8 at 2e-5 moved EM by +0.015/-0.240/+0.010.
    "cpu-learn": Preset("smollm2-135m", 1000, (2,), 8, 10, 4, 8, 200, 64, 512, 1, 1e-5, SHORT_TEMPLATE, max_turns=4,
                        eval_base=False, seeds=(0, 1, 2), world_seed=0, shared_start=True),
    # A random 2-layer model: checks the whole pipeline in seconds (the tests run it); learns nothing.
    "tiny": Preset("tiny", 300, (1,), 1, 1, 2, 2, 4, 16, 64, 1, 1e-4, SHORT_TEMPLATE),
    # One 80 GB GPU shared by an SGLang server and the update (documented in docs/learners.md with its
    # estimated run time; not run in CI): weights reach the server as CUDA tensors after every update.
    "gpu": Preset("Qwen/Qwen2.5-0.5B-Instruct", 10000, (1, 2), 50, 200, 16, 8, 500, 256, 2048, 3, 1e-6,
                  rollout_backend="sglang", servers=1, weight_sync="tensors", device="cuda"),
}


def backend_options(preset: Preset, urls: list[str] | None = None) -> dict:
    """Where rollouts are sampled (`RolloutConfig` fields, under "rollout") and where the update runs ("device")."""
    rollout: dict = {"backend": preset.rollout_backend}
    if preset.rollout_backend == "sglang":
        rollout["sglang_urls"] = tuple(urls or [f"http://127.0.0.1:{30000 + i}" for i in range(max(preset.servers, 1))])
        rollout["weight_sync"] = preset.weight_sync
    return {"device": preset.device, "rollout": rollout}


def hotpotqa_eval(trainer, path: str, questions: int) -> dict[str, float]:
    """Greedy EM/F1 of the trainer's current policy (sampled where its rollouts are) on the first
    `questions` questions of a HotpotQA file, searching the file's own paragraphs with the training run's
    turn, document and token budgets."""
    import gymnasium as gym

    from agents.experiments.eval import evaluate
    from searchgym.envs import SearchQAEnv

    c = trainer.config
    first = gym.make("SearchQA-HotpotQA-v0", data_path=path, limit=questions, max_turns=c.env.max_turns, top_k=c.env.top_k,
                     cache_dir=trainer.out / "cache", **c.env.options).unwrapped
    # Every episode's env shares the first one's questions, corpus and index: one env per question (the
    # rollout engine's evaluation layout) would otherwise reread the file and reload the index each time.
    # COSEARCH's agent searches through its trained ranker, as in training.
    options = {**trainer.learner_env_options(), **c.env.options}

    def make():
        return SearchQAEnv(first.records, first.corpus, retriever=first.retriever, max_turns=c.env.max_turns, top_k=c.env.top_k, cache_dir=False, **options)

    result = evaluate(trainer.rollout_policy, make, questions=questions, max_turn_tokens=c.rollout.max_turn_tokens,
                      max_response_tokens=c.rollout.max_response_tokens, seed=c.seed, progress=True)
    m = result["metrics"]
    return {"hotpotqa/em": m["avg@1/em"], "hotpotqa/f1": m["avg@1/f1"], "hotpotqa/searches": m["searches_per_episode"],
            "hotpotqa/questions": float(result["questions"])}


def _load(trainer_class, config: TrainConfig, what: str, model: str):
    """A trainer (model, optimizer, envs and their index) behind a line of elapsed time: the first run
    also converts the model's GGUF file, with nothing to count."""
    with phase(f"[{what}] loading {model} and building the envs"):
        return trainer_class(config)


def _local_model(trainer):
    """The torch module that samples the trainer's rollouts in this process (None when a server does)."""
    return trainer.model if trainer.config.rollout.backend == "hf" else None


def _evaluate(trainer, what: str, samples: int = 0) -> tuple[dict[str, float], dict[str, list[float]]]:
    """`trainer.evaluation()` (greedy, plus Avg@`samples` when >= 2) behind a progress bar of model passes
    against their upper bound; returns the metrics and the per-question results a policy's entry keeps for
    the paired checks: `eval_em` (each question's greedy EM) and with samples `eval_avg_em` (each
    question's mean EM over its samples)."""
    c = trainer.config
    rows = getattr(getattr(trainer.rollout_policy, "config", None), "max_batch_rows", None)
    budget = evaluation_budget(c.eval_questions, c.env.max_turns, c.rollout.max_turn_tokens, rows, samples)
    how = f"greedy + Avg@{samples}" if samples >= 2 else "greedy"
    with phase(f"[{what}] {how} eval, {c.eval_questions} test questions (model passes, at most)", budget, "pass") as bar, \
            counting_passes(_local_model(trainer), bar):
        result = trainer.evaluation(samples=samples)
    return result.metrics, {"eval_em": result.em, **({"eval_avg_em": result.avg_em} if result.avg_em is not None else {})}


def _cold_start(trainer) -> list[float]:
    """`trainer.cold_start()` behind a progress bar of its forward passes (one per micro-batch)."""
    c = trainer.config
    passes = c.optim.cold_start_steps * math.ceil(c.optim.cold_start_batch / c.optim.micro_batch)
    with phase(f"[cold start] {c.optim.cold_start_steps} supervised steps (model passes)", passes, "pass") as bar, counting_passes(trainer.model, bar):
        return trainer.cold_start()


def _train(trainer, learner: str) -> list[dict[str, float]]:
    """`trainer.run()` behind a progress bar of RL steps, with the last step's training reward and EM."""
    def shown(m: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{m['rollout/reward']:.2f}", "em": f"{m['rollout/em']:.2f}", **signal_summary(m)}

    with phase(f"[{learner}] RL steps", trainer.config.steps - trainer.step, "step") as bar, \
            counting_calls(trainer, "train_step", bar, postfix=shown):
        return trainer.run()


def train_config(preset: Preset, steps: int, seed: int, out: Path, backend: dict, threads: int | None, learner: str, model: str,
                 run: str, cold_start_steps: int = 0, resume: bool = False) -> TrainConfig:
    """The `TrainConfig` of one run of a seed of `preset`: the cold start (`cold_start_steps` > 0), a learner,
    or the supervised control (`SFT`: `steps` more cold-start steps, after the start's own `cold_start_steps`
    batches of the stream). `resume`: checkpoint after every RL step and continue from the newest checkpoint
    (`--resume`)."""
    env_options = {"template": preset.template} if preset.template else {}
    skip = 0
    if learner == SFT:
        learner, cold_start_steps, skip = "grpo", steps, preset.cold_start_steps
    if cold_start_steps == 0 and preset.learner_options.get(learner):  # the cold start does not read the learner's options
        from agents.learners.registry import get_learner

        learner = get_learner(learner).config(**preset.learner_options[learner])
    return TrainConfig(
        learner=learner, model=model, steps=steps, questions_per_step=preset.questions, eval_questions=preset.eval_questions,
        seed=seed, out_dir=str(out / run), resume=resume, checkpoint_every=1 if resume else 0, device=backend.get("device", "cpu"), threads=threads,
        env=EnvConfig(num_entities=preset.num_entities, hops=preset.hops, top_k=preset.top_k, max_turns=preset.max_turns,
                      world_seed=preset.world_seed, options=env_options),
        rollout=RolloutConfig(group_size=preset.group, temperature=preset.temperature, max_turn_tokens=preset.max_turn_tokens,
                              max_response_tokens=preset.max_response_tokens, max_batch_rows=preset.max_batch_rows,
                              **backend.get("rollout", {})),
        optim=OptimConfig(lr=preset.lr, cold_start_steps=cold_start_steps, cold_start_skip=skip,
                          gradient_checkpointing=preset.gradient_checkpointing, micro_batch=preset.micro_batch))


def _run_seed(preset: Preset, learners: list[str], steps: int, seed: int, out: Path, backend: dict | None = None,
              hotpotqa: str | None = None, start: tuple[Path, dict] | None = None, threads: int | None = None,
              resume: bool = False) -> dict:
    """Base eval, cold start, start eval, then each learner from the same start; returns this seed's results.
    `start`: (the start policy's folder, the results of the seed that made it) to begin from instead of a
    cold start of this seed's own (`Preset.shared_start`). `resume`: keep what an earlier run of the same
    command finished (the start policy and its evaluation, each learner's result) and continue each
    unfinished learner from its newest checkpoint."""
    from agents.models import save_model
    from agents.train.trainer import Trainer

    config = partial(train_config, preset, steps, seed, out, backend or {}, threads)
    if preset.workers > 1:  # the learners' processes share the threads; the cold start and its evaluation have them all
        from searchgym.threads import physical_cores

        learner_config = partial(train_config, preset, steps, seed, out, backend or {}, max(1, (threads or physical_cores()) // preset.workers),
                                 resume=resume)
    else:
        learner_config = partial(config, resume=resume)

    t0 = time.perf_counter()
    if start is not None:
        start_dir, first = start
        results = {k: first[k] for k in ("fingerprint", "base", "start") if k in first}
        shown = f"test EM {results['start']['eval']['eval/em']:.3f}" if "eval" in results["start"] else "evaluated by the run that made it"
        print(f"[start policy] shared: {start_dir} ({shown})", flush=True)
        return _train_learners(preset, learners, results, start_dir, learner_config, hotpotqa, t0)
    start_dir = out / "cold_start" / "model"
    saved_start = out / "cold_start" / "start.json"
    start_config = config("grpo", preset.model, "cold_start", cold_start_steps=preset.cold_start_steps)
    if resume and saved_start.is_file() and start_dir.is_dir():
        _check_same_setting(out / "cold_start" / "setting.json", _setting(start_config, RL_ONLY), "start policy")
        results = json.loads(saved_start.read_text())
        print(f"[start policy] resumed: {start_dir}, cold-started and evaluated by an earlier run (test EM "
              f"{results['start']['eval']['eval/em']:.3f})", flush=True)
        return _train_learners(preset, learners, results, start_dir, learner_config, hotpotqa, t0)
    starter = _load(Trainer, start_config, "base policy", preset.model)
    fingerprint = trainer_eval_fingerprint(starter)  # every policy of this seed is evaluated on this env
    results: dict = {"fingerprint": fingerprint}  # what agents.experiments.compare rebuilds and checks
    if preset.eval_base:
        base_eval, base_questions = _evaluate(starter, "base policy", preset.eval_samples)
        results["base"] = {"eval": base_eval, **base_questions}
        print(f"[base policy] {preset.model} as released: test EM {base_eval['eval/em']:.3f}, F1 {base_eval['eval/f1']:.3f}, "
              f"searches/ep {base_eval['eval/searches']:.2f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    losses = _cold_start(starter)
    print(f"[cold start] {preset.cold_start_steps} supervised steps on oracle trajectories: NLL {losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)
    save_model(starter.model, starter.tokenizer, start_dir)
    start_eval, start_questions = _evaluate(starter, "start policy", preset.eval_samples)
    start_hotpotqa = hotpotqa_eval(starter, hotpotqa, preset.eval_questions) if hotpotqa else None
    starter.close()
    del starter
    release_memory()  # the learners' processes need what the cold start held
    print(f"[start policy] cold-started: test EM {start_eval['eval/em']:.3f}, F1 {start_eval['eval/f1']:.3f}, "
          f"searches/ep {start_eval['eval/searches']:.2f} ({time.perf_counter() - t0:.0f} s)", flush=True)

    results["start"] = {"eval": start_eval, **start_questions, "minutes": (time.perf_counter() - t0) / 60}
    if start_hotpotqa:
        results["start"]["hotpotqa"] = start_hotpotqa
        print(f"[start policy] HotpotQA: EM {start_hotpotqa['hotpotqa/em']:.3f}, F1 {start_hotpotqa['hotpotqa/f1']:.3f}", flush=True)
    results["start"]["model"] = str(start_dir)
    _write_json(out / "cold_start" / "setting.json", _setting(start_config, RL_ONLY))  # what --resume keeps
    _write_json(saved_start, results)
    return _train_learners(preset, learners, results, start_dir, learner_config, hotpotqa, t0)


def _train_learners(preset: Preset, learners: list[str], results: dict, start_dir: Path, config, hotpotqa: str | None,
                    t0: float) -> dict:
    """Each learner trained from `start_dir` and evaluated, into `results`: one after another, or with
    `Preset.workers` > 1 side by side in that many processes (longest first: COSEARCH trains two models)."""
    start_em = f"{results['start']['eval']['eval/em']:.3f}" if "eval" in results["start"] else "(start not evaluated here)"
    jobs = {learner: partial(learner_result, config(learner, str(start_dir), learner), learner, preset.eval_samples, hotpotqa,
                             results.get("fingerprint")) for learner in learners}
    workers = min(preset.workers, len(learners))
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        threads = jobs[learners[0]].args[0].threads
        print(f"\n{len(learners)} learners in {workers} processes side by side, {threads or 'the default'} thread(s) each; "
              "their progress lines interleave", flush=True)
        # spawn, not fork: the parent holds torch's thread pools and numba's state, which a fork would copy.
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start) as pool:
            futures = {name: pool.submit(jobs[name]) for name in sorted(learners, key=lambda n: n != "cosearch")}
            done = {name: futures[name].result() for name in learners}
    else:
        done = {}
        for learner in learners:
            done[learner] = jobs[learner]()
    for learner in learners:
        entry, fingerprint = done[learner]
        if "fingerprint" not in results:
            # A run from --start-model: its eval env, as the first learner builds it (with a learner that asks the env
            # for more, e.g. COSEARCH's ranker, it differs from the start's and --merge refuses to pair them).
            results["fingerprint"] = fingerprint
        history, signals, final = entry["history"], entry["signals"], entry["eval"]
        if learner == SFT:
            print(f"[{learner}] supervised loss {history[0]['sft/loss']:.3f} -> {history[-1]['sft/loss']:.3f}; test EM "
                  f"{start_em} -> {final['eval/em']:.3f}", flush=True)
        else:
            print(f"[{learner}] train reward {history[0]['rollout/reward']:.3f} -> {history[-1]['rollout/reward']:.3f}; test EM "
                  f"{start_em} -> {final['eval/em']:.3f}; signals (mean over steps): "
                  + ", ".join(f"{SIGNALS[k]} {v:.2f}" for k, v in signals.items()), flush=True)
        if "hotpotqa" in entry:
            print(f"[{learner}] HotpotQA: EM {entry['hotpotqa']['hotpotqa/em']:.3f}, F1 {entry['hotpotqa']['hotpotqa/f1']:.3f}", flush=True)
        results[learner] = entry
    results["minutes"] = (time.perf_counter() - t0) / 60
    return results


def fingerprint_differences(got: dict, expected: dict, own_options: set[str] = frozenset()) -> list[str]:
    """The flattened fingerprint keys (`agents.experiments.fingerprint.flatten`) in which a learner's evaluation env
    differs from its start policy's, leaving aside every key that names an env option the learner asks for
    itself (its judge, its entity matching, COSEARCH's ranker: `make.ranker`, `setting.ranker.*`), which is
    part of what it trains, not of the world or the questions."""
    from agents.experiments.fingerprint import flatten

    a, b = flatten(got), flatten(expected)
    return sorted(k for k in {**a, **b} if a.get(k) != b.get(k) and not own_options.intersection(k.split(".")))


def _worker_start() -> None:
    """A learner's process: progress as whole lines (two bars redrawn in place on one terminal garble)."""
    import agents.experiments.progress as progress
    from transformers.utils import logging as hf_logging

    progress.LINES = True
    hf_logging.disable_progress_bar()


def _write_json(path: Path, value) -> None:
    """`path` holds all of `value` or what it held before: a run killed mid-write leaves no half file to resume from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


RESUME_FREE = ("threads", "resume", "checkpoint_every", "optim.micro_batch", "optim.gradient_checkpointing")
"""`TrainConfig` fields a resumed learner may change: how many threads compute it, whether it checkpoints and
how its update holds its memory do not change what it learns (the last two change float rounding, so a resume
is bit-exact only with the same ones)."""


RL_ONLY = ("steps", "questions_per_step", "learner", "learner_name", "optim.lr", "optim.warmup_steps", "rollout.group_size")
"""Fields of the cold start's `TrainConfig` that only its RL steps would read: a start policy is reused by
`--resume` whatever they are."""


def _setting(config: TrainConfig, leave_out: tuple[str, ...] = ()) -> dict:
    """What a run's result depends on: its config, flattened (`optim.lr`), without `RESUME_FREE` and `leave_out`."""
    from agents.train.setup import jsonable_config
    from agents.experiments.fingerprint import flatten

    dropped = RESUME_FREE + leave_out
    return {k: v for k, v in flatten(jsonable_config(config)).items() if not any(k == d or k.startswith(d + ".") for d in dropped)}


def _check_same_setting(path: Path, setting: dict, learner: str) -> None:
    """Refuse to resume a run whose earlier run (its `setting.json`) had another setting."""
    if not path.is_file():
        return
    before, now = json.loads(path.read_text()), setting
    differ = sorted(k for k in {**before, **now} if before.get(k) != now.get(k))
    if differ:
        raise ConfigError(f"[{learner}] --resume found an earlier run in {path.parent} with another setting ({', '.join(differ)} differ): "
                          "give another --out, or delete that folder to start it again")


def learner_result(config: TrainConfig, learner: str, eval_samples: int, hotpotqa: str | None,
                   fingerprint: dict | None = None) -> tuple[dict, dict]:
    """One learner trained by `config` and evaluated: its results entry, and its evaluation env's fingerprint
    (checked against `fingerprint`, the start policy's, before training when given). With `config.resume`, a
    learner that an earlier run of the same setting finished is read back from its `result.json`, and an
    unfinished one continues from its newest checkpoint; its history is then every step's line of its
    `metrics.jsonl`, the steps run before the interruption included. The supervised control (`SFT`) runs
    its steps from the start policy (again, when an earlier run stopped before its result) and saves its
    final weights as the checkpoint of step 0; its history holds each step's supervised loss (`sft/loss`)."""
    from agents.train.trainer import Trainer

    t = time.perf_counter()
    run_dir = Path(config.out_dir)
    print(f"\n[{learner}] {WHAT_DIFFERS[learner]}", flush=True)
    if config.resume:
        _check_same_setting(run_dir / "setting.json", _setting(config), learner)
        if (run_dir / "result.json").is_file():
            done = json.loads((run_dir / "result.json").read_text())
            print(f"[{learner}] resumed: finished by an earlier run ({run_dir / 'result.json'})", flush=True)
            return done["entry"], done["fingerprint"]
        _write_json(run_dir / "setting.json", _setting(config))
    sft = learner == SFT
    # The control's checkpoint is its final weights: a rerun must start from the start policy, not load it.
    trainer = _load(Trainer, replace(config, resume=False, checkpoint_every=0) if sft else config, learner, "the cold-started policy")
    try:
        own = trainer_eval_fingerprint(trainer)
        differ = fingerprint_differences(own, fingerprint, set(trainer.learner_env_options())) if fingerprint is not None else []
        if differ:
            raise ConfigError(f"[{learner}] is evaluated on another env than its start policy was ({', '.join(differ)} differ); "
                              "the two cannot be paired")
        if sft:
            history = [{"step": i + 1, "sft/loss": loss} for i, loss in enumerate(_cold_start(trainer))]
            trainer.save()
        else:
            if trainer.step:
                print(f"[{learner}] resumed from the checkpoint of RL step {trainer.step}", flush=True)
            history = _train(trainer, learner)
            if config.resume:
                history = logged_history(trainer.metrics_log.path)
        final, final_questions = _evaluate(trainer, learner, eval_samples)
        final_hotpotqa = hotpotqa_eval(trainer, hotpotqa, config.eval_questions) if hotpotqa else None
    finally:
        trainer.close()
    # Collected now, not at some later cycle collection: a trainer holds models, optimizer states and kept KV rows
    # in reference cycles, and the next learner's trainer (in this process) must not be built beside it.
    del trainer
    release_memory()
    entry = {"eval": final, **final_questions, "history": history, "signals": mean_signals(history),
             "minutes": (time.perf_counter() - t) / 60}
    if final_hotpotqa:
        entry["hotpotqa"] = final_hotpotqa
    if config.resume:
        _write_json(run_dir / "result.json", {"entry": entry, "fingerprint": own})
        from agents.train.checkpoint import list_checkpoints

        for old in list_checkpoints(run_dir / "checkpoints")[:-1]:  # the final one is all a finished learner needs
            shutil.rmtree(old, ignore_errors=True)
    return entry, own


def logged_history(path: Path) -> list[dict[str, float]]:
    """The RL steps' lines of a run's `metrics.jsonl` (step 0, the cold start's line, left out): what
    `Trainer.run` returns for a run from step 0 to its end."""
    return [m for m in map(json.loads, path.read_text().splitlines()) if m.get("step", 0) >= 1]


def mean_signals(history: list[dict[str, float]]) -> dict[str, float]:
    """Each signal metric (`agents.train.metrics.SIGNALS`) averaged over the steps that report it."""
    out = {}
    for key in SIGNALS:
        values = [m[key] for m in history if key in m]
        if values:
            out[key] = float(np.mean(values))
    return out


def _avg_columns(results: dict, names: list[str]) -> list[str]:
    """The Avg@k metric names any of these policies' evaluations report."""
    return sorted({k for n in names if n in results for k in results[n]["eval"] if k.startswith("eval/avg@") and k.endswith("/em")})


def _seed_table(results: dict, learners: list[str]) -> str:
    """One seed's policies: test EM/F1 (greedy, and Avg@k when measured), searches, training reward, time."""
    names = [n for n in ("base", "start", *learners) if "eval" in results.get(n, {})]
    avg = _avg_columns(results, names)
    head = ["policy", "test EM", *[f"Avg@{k.split('@')[1].split('/')[0]} EM" for k in avg], "test F1", "searches/ep",
            "train reward (first -> last)", "minutes"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    labels = {"base": "base (as released)", "start": "start (cold-started)"}
    for name in names:
        r = results[name]
        e = r["eval"]
        h = r.get("history")
        reward = f"{h[0]['rollout/reward']:.3f} -> {h[-1]['rollout/reward']:.3f}" if h and "rollout/reward" in h[0] else "-"
        minutes = f"{r['minutes']:.1f}" if "minutes" in r else "-"
        cells = [labels.get(name, name), f"{e['eval/em']:.3f}", *[f"{e[k]:.3f}" if k in e else "-" for k in avg],
                 f"{e['eval/f1']:.3f}", f"{e['eval/searches']:.2f}", reward, minutes]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def signal_table(results: dict, learners: list[str]) -> str:
    """Per learner, its signal metrics averaged over its RL steps (`agents.train.metrics.SIGNALS`); a dash
    where a learner does not report one."""
    keys = [k for k in SIGNALS if any(k in results[n].get("signals", {}) for n in learners)]
    lines = ["| learner | " + " | ".join(SIGNALS[k] for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name in learners:
        sig = results[name].get("signals", {})
        lines.append(f"| {name} | " + " | ".join(f"{sig[k]:.2f}" if k in sig else "-" for k in keys) + " |")
    return "\n".join(lines)


def hotpotqa_table(results: dict, learners: list[str]) -> str:
    """The HotpotQA evaluation of the start policy and each learner's final policy."""
    n = int(results["start"]["hotpotqa"]["hotpotqa/questions"])
    lines = [f"HotpotQA (greedy, first {n} questions of the file):", "", "| policy | EM | F1 | searches/ep |", "|---|---|---|---|"]
    for name in ["start", *learners]:
        h = results[name]["hotpotqa"]
        lines.append(f"| {name} | {h['hotpotqa/em']:.3f} | {h['hotpotqa/f1']:.3f} | {h['hotpotqa/searches']:.2f} |")
    return "\n".join(lines)


def learning_check(per_seed: dict[int, dict], learners: list[str], eval_questions: int) -> str:
    """The learning check over seeds: each learner's test EM against the base and the cold-started policy.

    Run-to-run noise is the sample standard deviation over seeds of a policy's test EM (the same recipe
    with another seed: other question order, sampling and cold-start batches); with one seed only the
    binomial standard error of an EM measured on `eval_questions` questions is available. A rise is
    above the noise when it exceeds twice the standard error of the difference of the two means
    (sqrt(SE_a^2 + SE_b^2), each SE the std over seeds / sqrt(seeds), or the binomial SE with one seed):
    the same two-SE rule as `paired_check`, which pairs questions and so is the sharper test where
    per-question results exist. A run without a base evaluation (`Preset.eval_base` False) shows dashes
    in the base columns.
    """
    seeds = sorted(per_seed)
    names = [n for n in ["base", "start", *learners] if all(n in per_seed[s] for s in seeds)]
    em = {name: np.array([per_seed[s][name]["eval"]["eval/em"] for s in seeds]) for name in names}

    def noise(values: np.ndarray) -> float:
        if len(values) > 1:
            return float(values.std(ddof=1))
        p = float(values[0])
        return float(np.sqrt(max(p * (1 - p), 1e-12) / eval_questions))

    kind = f"std over {len(seeds)} seeds" if len(seeds) > 1 else f"binomial SE on {eval_questions} questions"
    header = (f"| policy | test EM per seed ({', '.join(map(str, seeds))}) | mean | noise ({kind}) | "
              "rise over base | above base noise? | rise over start | above start noise? |")
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    def se(values: np.ndarray) -> float:
        return noise(values) / np.sqrt(len(values)) if len(values) > 1 else noise(values)

    def rise(values: np.ndarray, reference: np.ndarray) -> str:
        delta = values.mean() - reference.mean()
        return f" {delta:+.3f} | {'yes' if delta > 2 * np.hypot(se(values), se(reference)) else 'no'} |"

    for name in names:
        v = em[name]
        row = f"| {name} | {', '.join(f'{x:.3f}' for x in v)} | {v.mean():.3f} | {noise(v):.3f} |"
        row += " - | - |" if name == "base" or "base" not in em else rise(v, em["base"])
        row += " - | - |" if name in ("base", "start") else rise(v, em["start"])
        lines.append(row)
    return "\n".join(lines)


def paired_check(per_seed: dict[int, dict], learners: list[str], against: str = "start", key: str = "eval_em") -> str | None:
    """Each learner against the cold-started policy it started from (or against the learner `against`, trained
    with the same seed from the same start), question by question.

    Per seed, the difference of test EMs on the same questions (paired). Two standard errors of their mean
    are shown: over questions (each question's difference averaged over the seeds first, since every seed
    is scored on the same questions and their differences are not independent across seeds: evaluation
    noise) and over seeds (std of the per-seed differences / sqrt(seeds): training noise). A rise is beyond
    noise when it exceeds twice the larger of the two (`agents.experiments.paired`). `key` "eval_avg_em" pairs the
    per-question means of the Avg@k samples instead (runs with `--eval-samples`). None when the results
    carry no such per-question values.
    """
    from agents.experiments.paired import HEADER, RULE, paired_difference

    seeds = sorted(per_seed)
    learners = [n for n in learners if n != against]
    if not learners or not all(key in per_seed[s].get(n, {}) for s in seeds for n in [against, *learners]):
        return None
    what = "EM" if key == "eval_em" else "Avg@k EM"
    lines = [f"| learner | {what} - {against} per seed ({', '.join(map(str, seeds))}) | {HEADER}", RULE]
    for name in learners:
        d = paired_difference([np.asarray(per_seed[s][name][key], float) - np.asarray(per_seed[s][against][key], float)
                               for s in seeds])
        lines.append(f"| {name} | " + " | ".join(d.cells()) + " |")
    return "\n".join(lines)


def preset_fields(stored: dict) -> dict:
    """A preset as a `results.json` stored it, with each field added to `Preset` since then at its default
    (e.g. `temperature` 1.0, at which every earlier run sampled)."""
    return {**{f.name: f.default if f.default_factory is MISSING else f.default_factory() for f in fields(Preset)
               if f.default is not MISSING or f.default_factory is not MISSING}, **stored}


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
    """The seeds' results that evaluated their start policy, by the policy's resolved folder."""
    return {str(Path(r["start"]["model"]).resolve()): r for r in seed_results if "eval" in r.get("start", {})}


NOT_A_SETTING = ("steps", "seeds", "learners", "workers", "eval_base", "learner_options", "micro_batch", "gradient_checkpointing")
"""Preset fields two runs may differ in and still merge: the defaults a run's own flags replace (its RL step
count is compared as the run's `steps`), how many processes trained it (the same results, tested), whether
the released model was evaluated, the learners' options (compared learner by learner), and how the update
holds its memory (micro-batch, activation checkpointing: the same gradient up to float rounding, tested)."""


def merge_results(paths: list[Path]) -> tuple[dict, dict[int, dict]]:
    """The per-seed results of several runs of one preset (e.g. seeds, or learners, run side by side as
    separate processes), as one run's. Runs of one seed combine when their learners differ and they share
    the start policy and its evaluation env, so learners trained apart are paired question by question. A
    learner may run with its own `--learner-option`s, the same in every run that trains it. A seed that
    started from a shared start policy without evaluating it (`--start-model`) takes the start evaluation of
    the seed that made that policy: the same weights, the same world and questions (its fingerprint must
    match), so the same greedy evaluation."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    for run in runs:
        run["preset"] = preset_fields(run["preset"])

    def setting(run: dict) -> dict:
        return {"preset": {k: v for k, v in run["preset"].items() if k not in NOT_A_SETTING}, "steps": run.get("steps")}

    head = setting(runs[0])
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
                    or seen.get("fingerprint") != results.get("fingerprint")):
                raise ConfigError(f"{path}: seed {seed} there started from another policy or was evaluated on another env than "
                                  "in the runs before it; its learners cannot be paired with theirs")
            seen.update({n: results[n] for n in results if n in WHAT_DIFFERS})
            if "eval" not in seen["start"] and "eval" in results["start"]:
                seen["start"] = results["start"]
                if "base" in results:
                    seen["base"] = results["base"]
    head["preset"]["learner_options"] = {name: own for name, (own, _) in options.items() if own}
    evaluated = evaluated_starts(per_seed.values())
    for seed, results in per_seed.items():
        if "eval" in results["start"]:
            continue
        source = evaluated.get(str(Path(results["start"]["model"]).resolve()))
        if source is None:
            raise ConfigError(f"seed {seed} started from {results['start']['model']}, which no merged run evaluated; add the run that made it")
        if source.get("fingerprint") != results.get("fingerprint"):
            raise ConfigError(f"seed {seed} was evaluated on another env than the start policy it shares; its results cannot be paired")
        results["start"] = source["start"]
        if "base" in source:
            results["base"] = source["base"]
    return head, dict(sorted(per_seed.items()))


def paired_sections(per_seed: dict[int, dict], learners: list[str], eval_samples: int | None = None) -> str:
    """The report's paired tables, each under its question: every policy against the cold start; each RL
    learner against GRPO (what its own reward, weighting or loss settings changed); each RL learner against
    the supervised control when it ran (whether RL beats as many more steps of imitation); and, with Avg@k
    samples, every policy against the cold start on them. Tables without per-question results are left out."""
    sections = [("Paired against the cold start (same questions, per seed)", paired_check(per_seed, learners))]
    rl = [n for n in learners if n != SFT]
    if "grpo" in rl:
        sections.append(("Paired against GRPO (same seed, start and questions): what each learner's own reward, "
                         "weighting or loss settings changed", paired_check(per_seed, rl, against="grpo")))
    if SFT in learners and rl:
        sections.append(("Paired against the supervised control (same seed, start and questions, as many update steps): "
                         "whether RL beats more imitation", paired_check(per_seed, rl, against=SFT)))
    sections.append((f"Paired against the cold start on Avg@{eval_samples} (each question's mean EM over its {eval_samples} "
                     "samples at the rollout temperature: the sampling policy RL trains)",
                     paired_check(per_seed, learners, key="eval_avg_em")))
    return "".join(f"\n\n{title}:\n\n{table}" for title, table in sections if table)


def write_report(per_seed: dict[int, dict], learners: list[str], preset: dict, steps: int, out: Path, hotpotqa: str | None = None) -> str:
    """results.md, results.json and curves.png under `out`, for the first seed and the learning check over all;
    returns the learning check's tables."""
    seeds = list(per_seed)
    check = learning_check(per_seed, learners, preset["eval_questions"]) + paired_sections(per_seed, learners, preset.get("eval_samples"))
    options = preset.get("learner_options") or {}
    if options:
        check += "\n\nLearner options: " + "; ".join(f"{n}: " + ", ".join(f"{k}={v}" for k, v in o.items()) for n, o in options.items())
    first = seeds[0]
    plot_curves(per_seed[first], learners, out / "curves.png")
    report = (_seed_table(per_seed[first], learners) + "\n\nSignals (mean over RL steps):\n\n" + signal_table(per_seed[first], learners)
              + "\n\nLearning check (test EM):\n\n" + check + "\n")
    if hotpotqa:
        report += "\n" + hotpotqa_table(per_seed[first], learners) + "\n"
    (out / "results.md").write_text(report)
    (out / "results.json").write_text(json.dumps({"preset": preset, "steps": steps, "seeds": seeds,
                                                  "results": {str(s): r for s, r in per_seed.items()}}, indent=2))
    return check


def parse_learner_options(items: list[str], base: dict[str, dict] | None = None) -> dict[str, dict]:
    """`["cw-grpo.kl_coef=0", ...]` -> `{"cw-grpo": {"kl_coef": 0}}` on top of `base`, each option checked
    against its learner's config (a field it has, a value it accepts)."""
    from agents.learners.registry import get_learner

    out = {name: dict(opts) for name, opts in (base or {}).items()}
    for item in items:
        key, sep, text = item.partition("=")
        learner, dot, option = key.partition(".")
        if not (sep and dot and option):
            raise ConfigError(f"--learner-option takes LEARNER.OPTION=VALUE (e.g. cw-grpo.kl_coef=0), got {item!r}")
        if learner not in RL_LEARNERS:
            raise ConfigError(f"--learner-option {item!r}: no learner {learner!r} with options; learners: {', '.join(RL_LEARNERS)}")
        config = get_learner(learner).config
        names = [f.name for f in fields(config)]
        if option not in names:
            raise ConfigError(f"--learner-option {item!r}: {learner} has no option {option!r}; its options: {', '.join(names)}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            try:
                value = float(text)  # inf, nan
            except ValueError:
                value = text
        out.setdefault(learner, {})[option] = value
    for learner, options in out.items():
        get_learner(learner).config(**options)  # the config's own checks, before any model loads
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="compare the reference learners on the synthetic world")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    p.add_argument("--learners", nargs="+", choices=list(WHAT_DIFFERS), help="the learners to train (default: the preset's, else the "
                   f"four RL learners); {SFT} is the supervised control: no RL, the cold start goes on for as many steps")
    p.add_argument("--steps", type=int, help="override the preset's RL steps")
    p.add_argument("--seeds", type=int, nargs="+", help="one full run per seed (default: the preset's); two or more give the learning check's noise")
    p.add_argument("--eval-questions", type=int, help="override the preset's number of test questions")
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
    p.add_argument("--eval-base", action=argparse.BooleanOptionalAction, default=None,
                   help="also evaluate the model as released, before its cold start (default: the preset's; the cpu preset does not)")
    p.add_argument("--eval-samples", type=int, help="override the preset's Avg@k samples per test question (0: greedy only)")
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
    p.add_argument("--resume", action="store_true", help="checkpoint every learner after each RL step, and on a rerun of the "
                   "same command with the same --out keep what the earlier run finished (the start policy, finished learners) and "
                   "continue the others from their newest checkpoint; another setting in that --out is an error")
    p.add_argument("--merge", nargs="+", metavar="RESULTS_JSON", help="join the results.json of runs of one preset (seeds run as "
                   "separate processes) into one report under --out, and stop")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.merge:
        head, per_seed = merge_results([Path(m) for m in args.merge])
        learners = [n for n in WHAT_DIFFERS if all(n in r for r in per_seed.values())]
        out.mkdir(parents=True, exist_ok=True)
        print("Learning check (test EM):\n" + write_report(per_seed, learners, head["preset"], head["steps"], out))
        print(f"\nmerged seeds {list(per_seed)}; table: {out / 'results.md'}")
        return 0
    from transformers.utils import logging as hf_logging

    # One bar per phase (agents.experiments.progress) instead of a "Loading weights" bar at every model load.
    hf_logging.disable_progress_bar()
    preset = PRESETS[args.preset]
    overrides = {k: v for k, v in (("eval_questions", args.eval_questions), ("eval_samples", args.eval_samples), ("lr", args.lr),
                                   ("eval_base", args.eval_base),
                                   ("questions", args.questions), ("group", args.group), ("temperature", args.temperature),
                                   ("workers", args.workers), ("micro_batch", args.micro_batch),
                                   ("gradient_checkpointing", args.gradient_checkpointing)) if v is not None}
    if args.learner_option:
        overrides["learner_options"] = parse_learner_options(args.learner_option, preset.learner_options)
    preset = replace(preset, **overrides)
    args.learners = args.learners or list(preset.learners or RL_LEARNERS)
    args.seeds = args.seeds or list(preset.seeds)
    steps = args.steps or preset.steps
    out.mkdir(parents=True, exist_ok=True)
    if args.start_model and not preset.shared_start:
        raise ConfigError(f"--start-model needs a preset with a shared start (cpu-learn); {args.preset} cold-starts every seed")
    if args.start_results and not args.start_model:
        raise ConfigError("--start-results names the evaluation of a --start-model; give both")

    t0 = time.perf_counter()
    print(f"preset {args.preset}: {preset.model}, hops {preset.hops}, {preset.cold_start_steps} cold-start steps, "
          f"{steps} RL steps x {preset.questions} questions x {preset.group} rollouts at temperature {preset.temperature:g}, "
          f"eval on {preset.eval_questions} test questions, seeds {args.seeds}"
          + "".join(f"; {n} with {', '.join(f'{k}={v}' for k, v in o.items())}" for n, o in preset.learner_options.items()), flush=True)
    per_seed = {}
    shared = None
    if args.start_model:
        made = (start_evaluation(Path(args.start_results), Path(args.start_model), preset.eval_samples, preset.temperature)
                if args.start_results else {"start": {"model": args.start_model}})
        shared = (Path(args.start_model), made)
    for seed in args.seeds:
        print(f"\n===== seed {seed}", flush=True)
        results = per_seed[seed] = _run_seed(preset, args.learners, steps, seed, out / f"seed{seed}",
                                             backend_options(preset, args.sglang_urls), args.hotpotqa, shared, args.threads,
                                             args.resume)
        if preset.shared_start and shared is None:
            shared = (Path(results["start"]["model"]), results)
        table = _seed_table(results, args.learners) + "\n\nSignals (mean over RL steps):\n\n" + signal_table(results, args.learners)
        (out / f"seed{seed}").mkdir(parents=True, exist_ok=True)
        (out / f"seed{seed}" / "results.md").write_text(table + "\n")
        if "eval" in results["start"]:  # else the run that made the shared start has its evaluation
            plot_curves(results, args.learners, out / f"seed{seed}" / "curves.png")
        print(f"\nseed {seed} ({results['minutes']:.1f} min):\n{table}", flush=True)

    if args.start_model and not args.start_results:
        (out / "results.json").write_text(json.dumps({"preset": asdict(preset), "steps": steps, "seeds": args.seeds,
                                                      "results": {str(s): r for s, r in per_seed.items()}}, indent=2))
        print(f"\ntotal {(time.perf_counter() - t0) / 60:.1f} min; the start policy was not evaluated here: --merge this "
              f"{out / 'results.json'} with the results.json of the run that made {args.start_model}")
        return 0
    check = write_report(per_seed, args.learners, asdict(preset), steps, out, args.hotpotqa)
    print("\nLearning check (test EM):\n" + check)
    print(f"\ntotal {(time.perf_counter() - t0) / 60:.1f} min; plot: {out / 'curves.png'}; table: {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
