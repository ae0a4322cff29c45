"""Running the reference comparison: one seed's start policy (the base evaluation, the shared cold start and
its evaluation), then each learner trained from it and evaluated, one after another or side by side in
`Preset.workers` processes, each behind a progress bar (`agents.experiments.progress`).

With `Preset.credit_questions`, the credit view (`agents.experiments.credit`) is one more job after the
learners, in the process that finishes its learners first. With `resume`, every learner checkpoints after
each RL step, and a rerun keeps what an earlier run of the same setting finished (`agents.experiments.resume`). Each seed's results carry the fingerprint of its
evaluation env (`agents.experiments.fingerprint`): learners evaluated on another env than their start
policy are refused, since they could not be paired with it.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from agents.experiments.fingerprint import trainer_eval_fingerprint
from agents.experiments.presets import SFT, WHAT_DIFFERS, Preset
from agents.experiments.progress import counting_calls, counting_passes, evaluation_budget, phase
from agents.experiments.resume import RL_ONLY, check_same_setting, logged_history, run_setting, write_json
from agents.memory import huge_pages_in_effect, peak_rss_gb, release_memory
from agents.precision import dtype_name
from agents.train import TrainConfig
from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
from agents.train.metrics import SIGNALS, signal_summary
from searchgym.errors import ConfigError


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

    with trainer.evaluating():  # a greedy ranker
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
    return trainer.policy.sampling_model if trainer.config.rollout.backend == "hf" else None


def _evaluate(trainer, what: str, samples: int = 0) -> tuple[dict[str, float], dict[str, list[float]]]:
    """`trainer.evaluation()` (greedy, plus Avg@`samples` when >= 2) behind a progress bar of model passes
    against their upper bound; returns the metrics and the per-question results a policy's entry keeps for
    the paired checks: `eval_em` (each question's greedy EM), `eval_searches` (its greedy episode's searches),
    `eval_contributing` (of those, the ones its judge labelled contributing; when judged)
    and with samples `eval_avg_em` (each question's mean EM over its samples)."""
    c = trainer.config
    rows = getattr(getattr(trainer.rollout_policy, "config", None), "max_batch_rows", None)
    budget = evaluation_budget(c.eval_questions, c.env.max_turns, c.rollout.max_turn_tokens, rows, samples)
    how = f"greedy + Avg@{samples}" if samples >= 2 else "greedy"
    from agents.train.setup import eval_split

    with phase(f"[{what}] {how} eval, {c.eval_questions} {eval_split(c)} questions (model passes, at most)", budget, "pass") as bar, \
            counting_passes(_local_model(trainer), bar):
        result = trainer.evaluation(samples=samples)
    return result.metrics, {"eval_em": result.em, "eval_searches": result.searches,
                            **({"eval_contributing": result.contributing} if result.contributing is not None else {}),
                            **({"eval_avg_em": result.avg_em} if result.avg_em is not None else {})}


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
    env_options = {**({"template": preset.template} if preset.template else {}), **preset.env_options}
    skip = 0
    if learner == SFT:
        learner, cold_start_steps, skip = "grpo", steps, preset.cold_start_steps
    if cold_start_steps == 0 and preset.learner_options.get(learner):  # the cold start does not read the learner's options
        from agents.learners.registry import get_learner

        learner = get_learner(learner).config(**preset.learner_options[learner])
    return TrainConfig(
        learner=learner, model=model, steps=steps, questions_per_step=preset.questions, eval_questions=preset.eval_questions,
        seed=seed, out_dir=str(out / run), resume=resume, checkpoint_every=1 if resume else 0, device=backend.get("device", "cpu"), threads=threads,
        dtype=preset.dtype, malloc_mmap_threshold=preset.malloc_mmap_threshold or None,
        env=EnvConfig(id=preset.env_id, num_entities=preset.num_entities, hops=preset.hops, top_k=preset.top_k, max_turns=preset.max_turns,
                      world_seed=preset.world_seed, options=env_options, eval_split=preset.eval_split, data_path=preset.data_path,
                      train_questions=preset.train_questions),
        rollout=RolloutConfig(group_size=preset.group, temperature=preset.temperature, max_turn_tokens=preset.max_turn_tokens,
                              max_response_tokens=preset.max_response_tokens, max_batch_rows=preset.max_batch_rows,
                              **backend.get("rollout", {})),
        optim=OptimConfig(lr=preset.lr, cold_start_steps=cold_start_steps, cold_start_skip=skip, cold_start_shows=preset.cold_start_shows,
                          gradient_checkpointing=preset.gradient_checkpointing, micro_batch=preset.micro_batch,
                          park_idle=preset.park_idle))


def run_seed(preset: Preset, learners: list[str], steps: int, seed: int, out: Path, backend: dict | None = None,
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
        check_same_setting(out / "cold_start" / "setting.json", run_setting(start_config, RL_ONLY), "start policy")
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
    starter_dtype = dtype_name(starter.compute_dtype)
    starter.close()
    del starter
    release_memory()  # the learners' processes need what the cold start held
    print(f"[start policy] cold-started: test EM {start_eval['eval/em']:.3f}, F1 {start_eval['eval/f1']:.3f}, "
          f"searches/ep {start_eval['eval/searches']:.2f} ({time.perf_counter() - t0:.0f} s)", flush=True)

    results["start"] = {"eval": start_eval, **start_questions, "minutes": (time.perf_counter() - t0) / 60, "dtype": starter_dtype,
                        # the run's first process: the cold start and its evaluation
                        "peak_rss_gb": round(peak_rss_gb(), 2), "huge_pages": huge_pages_in_effect()}
    if start_hotpotqa:
        results["start"]["hotpotqa"] = start_hotpotqa
        print(f"[start policy] HotpotQA: EM {start_hotpotqa['hotpotqa/em']:.3f}, F1 {start_hotpotqa['hotpotqa/f1']:.3f}", flush=True)
    results["start"]["model"] = str(start_dir)
    write_json(out / "cold_start" / "setting.json", run_setting(start_config, RL_ONLY))  # what --resume keeps
    write_json(saved_start, results)
    return _train_learners(preset, learners, results, start_dir, learner_config, hotpotqa, t0)


def _train_learners(preset: Preset, learners: list[str], results: dict, start_dir: Path, config, hotpotqa: str | None,
                    t0: float) -> dict:
    """Each learner trained from `start_dir` and evaluated, into `results`: one after another, or with
    `Preset.workers` > 1 side by side in that many processes (longest first: COSEARCH trains two models)."""
    start_em = f"{results['start']['eval']['eval/em']:.3f}" if "eval" in results["start"] else "(start not evaluated here)"
    jobs = {learner: partial(learner_result, config(learner, str(start_dir), learner), learner, preset.eval_samples, hotpotqa,
                             results.get("fingerprint"), keep_optimizer_states=preset.keep_optimizer_states) for learner in learners}
    # A run that only makes the start policy (--start-only) trains no learner: it has no credit view to show.
    view = _credit_job(preset, config, start_dir) if preset.credit_questions and learners else None
    workers = min(preset.workers, len(learners))
    if workers > 1:
        threads = jobs[learners[0]].args[0].threads
        print(f"\n{len(learners)} learners in {workers} processes side by side, {threads or 'the default'} thread(s) each; "
              "their progress lines interleave", flush=True)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            # Longest first (COSEARCH); the view last: it runs beside COSEARCH once a process is free.
            futures = {name: pool.submit(in_own_process, jobs[name]) for name in sorted(learners, key=lambda n: n != "cosearch")}
            viewed = pool.submit(in_own_process, view) if view else None
            done = {name: futures[name].result() for name in learners}
            if viewed:
                results["credit"] = viewed.result()
    else:
        done = {}
        for learner in learners:
            done[learner] = jobs[learner]()
        if view:
            results["credit"] = view()
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
    if "credit" in results:
        from agents.experiments.credit_report import learner_notes

        if "second_model_step" in results.get("cosearch", {}):
            results["credit"]["ranker"] = results["cosearch"]["second_model_step"]

        print("\n[credit view] what each learner makes of one shared batch:\n"
              + "\n".join(f"[credit view] {name}: {note}" for name, note in learner_notes(results["credit"]).items()), flush=True)
    results["minutes"] = (time.perf_counter() - t0) / 60
    return results


def _credit_job(preset: Preset, config, start_dir: Path):
    """The credit view's job (`agents.experiments.credit`) from `start_dir`, with a learner process's config
    (`config`: (learner, model, run) -> `TrainConfig`)."""
    from agents.experiments.credit import VIEW_LEARNERS, credit_config, credit_result, view_configs

    configs = view_configs(preset.learner_options, VIEW_LEARNERS)
    base = config("grpo", str(start_dir), "credit_view")
    return partial(credit_result, credit_config(base, preset.credit_questions, preset.credit_group, configs), configs, base.steps,
                   preset.questions, base.resume)


def fingerprint_differences(got: dict, expected: dict, own_options: set[str] = frozenset()) -> list[str]:
    """The flattened fingerprint keys (`agents.experiments.fingerprint.flatten`) in which a learner's evaluation env
    differs from its start policy's, leaving aside every key that names an env option the learner asks for
    itself (its judge, its entity matching, COSEARCH's ranker: `make.ranker`, `setting.ranker.*`), which is
    part of what it trains, not of the world or the questions."""
    from agents.experiments.fingerprint import differences

    return [k for k, _, _ in differences(expected, got) if not own_options.intersection(k.split("."))]


def in_own_process(job):
    """`job()` run in a fresh process of its own (spawned, not forked: the parent holds torch's thread pools and
    numba's state, which a fork would copy), returning its result: a learner's peak memory is then its own, not
    the highest of the jobs that ran before it in a shared process, and no allocator state carries over. (A pool
    of processes each replaced after one task, `max_tasks_per_child=1`, would do the same on Python 3.11+ only,
    where that option can deadlock with queued tasks: CPython issue 115634.)"""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start) as pool:
        return pool.submit(job).result()


def _worker_start() -> None:
    """A learner's process: progress as whole lines (two bars redrawn in place on one terminal garble)."""
    import agents.experiments.progress as progress
    from transformers.utils import logging as hf_logging

    progress.LINES = True
    hf_logging.disable_progress_bar()


def learner_result(config: TrainConfig, learner: str, eval_samples: int, hotpotqa: str | None,
                   fingerprint: dict | None = None, keep_optimizer_states: bool = False) -> tuple[dict, dict]:
    """One learner trained by `config` and evaluated: its results entry, and its evaluation env's fingerprint
    (checked against `fingerprint`, the start policy's, before training when given). With `config.resume`, a
    learner that an earlier run of the same setting finished is read back from its `result.json`, and an
    unfinished one continues from its newest checkpoint; its history is then every step's line of its
    `metrics.jsonl`, the steps run before the interruption included. The supervised control (`SFT`) runs
    its steps from the start policy (again, when an earlier run stopped before its result) and saves its
    final weights as the checkpoint of step 0; its history holds each step's supervised loss (`sft/loss`).
    The final checkpoint keeps the learner's weights and, with `keep_optimizer_states` only, its optimizer
    states (`Preset.keep_optimizer_states`)."""
    from agents.train.trainer import Trainer

    t = time.perf_counter()
    run_dir = Path(config.out_dir)
    print(f"\n[{learner}] {WHAT_DIFFERS[learner]}", flush=True)
    if config.resume:
        check_same_setting(run_dir / "setting.json", run_setting(config), learner)
        if (run_dir / "result.json").is_file():
            done = json.loads((run_dir / "result.json").read_text())
            print(f"[{learner}] resumed: finished by an earlier run ({run_dir / 'result.json'})", flush=True)
            return done["entry"], done["fingerprint"]
        write_json(run_dir / "setting.json", run_setting(config))
    sft = learner == SFT
    # The control's checkpoint is its final weights: a rerun must start from the start policy, not load it.
    trainer = _load(Trainer, replace(config, resume=False, checkpoint_every=0) if sft else config, learner, "the cold-started policy")
    try:
        own = trainer_eval_fingerprint(trainer)
        differ = fingerprint_differences(own, fingerprint, set(trainer.learner_env_options())) if fingerprint is not None else []
        if differ:
            raise ConfigError(f"[{learner}] is evaluated on another env than its start policy was ({', '.join(differ)} differ); "
                              "the two cannot be paired")
        resumed_from = 0
        if sft:
            history = [{"step": i + 1, "sft/loss": loss} for i, loss in enumerate(_cold_start(trainer))]
            trainer.save()
        else:
            resumed_from = trainer.step
            if resumed_from:
                print(f"[{learner}] resumed from the checkpoint of RL step {resumed_from}", flush=True)
            history = _train(trainer, learner)
            if config.resume:
                history = logged_history(trainer.metrics_log.path)
        final, final_questions = _evaluate(trainer, learner, eval_samples)
        final_hotpotqa = hotpotqa_eval(trainer, hotpotqa, config.eval_questions) if hotpotqa else None
        second_step = trainer.second_model.last_step() if trainer.second_model is not None else None
    finally:
        trained_dtype = dtype_name(trainer.compute_dtype)
        trainer.close()
    # Collected now, not at some later cycle collection: a trainer holds models, optimizer states and kept KV rows
    # in reference cycles, and the next learner's trainer (in this process) must not be built beside it.
    del trainer
    release_memory()
    # A resumed run's minutes count the RL steps its earlier processes finished (their logged step times; the
    # part of a step an interruption threw away is not counted), so that a run's cost does not depend on how
    # often it was interrupted. Its peak is this process's only.
    earlier_s = sum(m.get("time/step_s", 0.0) for m in history if m["step"] <= resumed_from)
    entry = {"eval": final, **final_questions, "history": history, "signals": mean_signals(history),
             "minutes": (time.perf_counter() - t + earlier_s) / 60, "dtype": trained_dtype, "peak_rss_gb": round(peak_rss_gb(), 2),
             "huge_pages": huge_pages_in_effect()}
    if resumed_from:
        entry["resumed_from_step"] = resumed_from
    if final_hotpotqa:
        entry["hotpotqa"] = final_hotpotqa
    if second_step is not None:
        entry["second_model_step"] = second_step  # what its last RL step trained the second model on (the credit view)
    from agents.train.checkpoint import drop_optimizer_states, list_checkpoints

    if config.resume:
        write_json(run_dir / "result.json", {"entry": entry, "fingerprint": own})
        for old in list_checkpoints(run_dir / "checkpoints")[:-1]:  # the final one is all a finished learner needs
            shutil.rmtree(old, ignore_errors=True)
    if not keep_optimizer_states:
        for final in list_checkpoints(run_dir / "checkpoints")[-1:]:
            if freed := drop_optimizer_states(final):
                kept = sum(f.stat().st_size for f in final.iterdir() if f.is_file())
                print(f"[{learner}] final checkpoint {final}: its weights kept ({kept / 1e9:.2f} GB), its optimizer states "
                      f"dropped ({freed / 1e9:.2f} GB; --keep-optimizer-states keeps them)", flush=True)
    return entry, own


def mean_signals(history: list[dict[str, float]]) -> dict[str, float]:
    """Each signal metric (`agents.train.metrics.SIGNALS`) averaged over the steps that report it."""
    out = {}
    for key in SIGNALS:
        values = [m[key] for m in history if key in m]
        if values:
            out[key] = float(np.mean(values))
    return out


