"""The reference comparison's named settings (`Preset`, `PRESETS`), the learners it trains, and the
`--learner-option` settings a run gives them.

`python -m agents.experiments.learners --preset NAME` runs one (docs/learners.md); `merge.merge_results`
reads the presets stored in earlier runs' `results.json` back through `preset_fields`.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields

from agents.memory import MMAP_THRESHOLD, check_mmap_threshold
from agents.precision import PRECISIONS
from searchgym.cli.keyvalues import key_values
from searchgym.errors import ConfigError

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
    """One named setting of the reference comparison: the model, the synthetic world, the cold start, the RL
    budget (steps x questions x group), the evaluation, and how the run computes (backend, device, workers)."""

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
    park_idle: bool = False
    """Let the tensors a phase of a step does not read wait in files (`OptimConfig.park_idle`): how a run holds its
    memory, not what it learns (the same numbers), so runs that differ in it merge."""
    max_batch_rows: int = 64
    """Rows the in-process policy decodes together (`RolloutConfig.max_batch_rows`)."""
    dtype: str = "auto"
    """The precision every run of the preset computes in (`TrainConfig.dtype`, `agents.precision`): `auto`
    (bfloat16 on a CPU with native bfloat16 instructions, float32 elsewhere), `float32` or `bfloat16`. Each
    policy's results entry records the precision it ran at (`dtype`); runs at different precisions do not
    merge, and pair question by question through `agents.experiments.compare --paired`."""
    malloc_mmap_threshold: int = MMAP_THRESHOLD
    """glibc's mmap threshold of every process of a run (`TrainConfig.malloc_mmap_threshold`; 0: glibc's own,
    which raises it as large blocks are freed): how a run holds its memory, not what it learns (the same
    numbers, tested), so runs that differ in it merge."""
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
    """Learners trained side by side, `workers` at a time, each in a fresh process of its own with 1/`workers` of
    the threads: on a small CPU two one-thread processes get more done than one two-thread process (small
    matmuls scale poorly), and each learner's peak memory (`peak_rss_gb` in its results entry) is its own."""
    credit_questions: int = 0
    """Questions of the credit view's batch (`agents.experiments.credit`): sampled once by the start policy, with
    `credit_group` rollouts each, and shown as each learner's advantages per round; 0 leaves the view out."""
    credit_group: int = 8
    """Rollouts per question of the credit view's batch."""
    shared_start: bool = False
    """Cold-start and evaluate the start policy once, under the first seed, and start every seed's learners
    from it: seeds then differ only in RL (question order, sampling). Needs a fixed `world_seed`, so that
    every seed evaluates on the same questions."""
    env_id: str = "SearchQA-Synthetic-v0"
    """The env the setting trains and evaluates on (`EnvConfig.id`)."""
    env_options: dict = field(default_factory=dict)
    """Further `gym.make` options of the setting's env (`EnvConfig.options`): the synthetic world's and its
    questions' knobs (`decoy_rate`, `aside_rate`, `validation_fraction`, ...; all off by default)."""
    eval_split: str = "test"
    """The synthetic questions every policy is evaluated on (`EnvConfig.eval_split`): `test`, the reported
    questions, or `validation` (needs `validation_fraction` in `env_options`), to choose a setting on."""
    data_path: str | None = None
    """The question file of an env over one (`EnvConfig.data_path`), relative to the directory the run starts in."""
    train_questions: int | None = None
    """Over a question file: train on its first `train_questions` questions and evaluate on those after them
    (`EnvConfig.train_questions`)."""
    cold_start_shows: str = "retriever"
    """What the cold start's oracle searches show (`OptimConfig.cold_start_shows`): the retriever's order, or
    `gold`, each hop's gold passage first."""
    keep_optimizer_states: bool = False
    """Keep each finished learner's optimizer states in its final checkpoint. By default they are dropped once
    the learner is evaluated (`agents.train.checkpoint.drop_optimizer_states`): its weights stay for
    `python -m agents export` and `agents.experiments.eval --checkpoint`, and the checkpoint shrinks to a
    third (~0.54 GB of ~1.6 GB for SmolLM2-135M with AdamW, twice that for COSEARCH's two models); with them
    it could train on. Where results are kept, not what they are: runs that differ in it merge."""

    def __post_init__(self) -> None:
        for name in ("workers", "micro_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"Preset.{name} must be >= 1, got {getattr(self, name)}")
        check_mmap_threshold(self.malloc_mmap_threshold, "Preset.malloc_mmap_threshold")
        if self.dtype not in PRECISIONS:
            raise ConfigError(f"Preset.dtype must be one of {', '.join(PRECISIONS)}, got {self.dtype!r}")
        if self.credit_questions < 0:
            raise ConfigError(f"Preset.credit_questions must be >= 0 (0 leaves the credit view out), got {self.credit_questions}")
        if self.credit_group < 2:
            raise ConfigError(f"Preset.credit_group must be >= 2: advantages are relative to a question's group, got {self.credit_group}")
        if self.shared_start and self.world_seed is None:
            raise ConfigError("Preset.shared_start needs a fixed world_seed: every seed must evaluate on the start policy's questions")
        if self.eval_split not in ("test", "validation"):
            raise ConfigError(f"Preset.eval_split must be 'test' or 'validation', got {self.eval_split!r}")
        if self.eval_split == "validation" and not self.env_options.get("validation_fraction"):
            raise ConfigError("Preset.eval_split='validation' needs a world with a validation split: "
                              "env_options={'validation_fraction': 0.1}, for instance")


PRESETS = {
    # Sized for 2 CPU cores and ~15 minutes per seed: few, small steps; the table reports what that budget buys.
    # 1- and 2-hop questions: a 2-hop episode has two search rounds, where CW-GRPO's credit differs from GRPO's;
    # 512 response tokens let a 2-hop episode reach its answer (two documents of ~110 tokens each).
    # lr 1e-5: at 2e-6 three updates left every learner sampling token-identical rollouts (same seed).
    # Activation checkpointing: with it the update of the GRPO-family learners peaks under 4 GB (so a 16 GB laptop
    # holds the job's processes), at the price of a recompute that the bfloat16 update, twice as fast, pays for
    # (docs/learners.md, "CPU precision (bfloat16)"); idle tensors (the optimizers' states, the references, the model
    # that is not updating) wait in files, which COSEARCH's two models need to stay under 4 GB. 64 rows: sampled
    # tok/s still rises from batch 8 to 32, so a step's 8 rows and an eval's 20 go in one chunk (`python -m benchmarks.step`, docs/learners.md
    # "Speed and memory on CPU").
    # Two learner processes at one thread each (COSEARCH, the longest, in one; the other three in turn in the
    # other) instead of one process at two threads. 2 RL steps and no evaluation of the released model
    # (`--eval-base` does it, ~40 s; it scored 0.000 on these questions in every run): with 3 steps and that
    # evaluation the job took 15.3-15.7 minutes on 2 idle cores, over its 15.
    # The credit view: 4 questions (the 2 steps' 2 + 2, so every question the learners train on) x 8 rollouts,
    # sampled in the process that finishes GRPO, CW-GRPO and E-GRPO while COSEARCH still trains.
    "cpu": Preset("smollm2-135m", 1000, (1, 2), 8, 2, 2, 4, 20, 64, 512, 1, 1e-5, SHORT_TEMPLATE, gradient_checkpointing=True,
                  park_idle=True, max_batch_rows=64, max_turns=4, workers=2, eval_base=False, credit_questions=4),
    # The learning check: 2-hop questions (two search rounds that differ in contribution), a short cold start
    # that leaves room to improve (8 steps: greedy test EM 0.68 on 60 questions, with 512 response tokens;
    # 320 cut most episodes before their answer), 200 held-out questions, three RL seeds from one shared
    # start in one world (docs/learners.md, "The learning check"). RL: 10 steps x 4 questions x 8 rollouts at
    # lr 1e-5 (GRPO +0.043 EM over the start on every seed); 6 x 2 x 8 at 2e-5 moved EM by +0.015/-0.240/+0.010.
    "cpu-learn": Preset("smollm2-135m", 1000, (2,), 8, 10, 4, 8, 200, 64, 512, 1, 1e-5, SHORT_TEMPLATE, max_turns=4,
                        eval_base=False, seeds=(0, 1, 2), world_seed=0, shared_start=True),
    # Settings where each mechanism has room (docs/learners.md, "Settings where each mechanism has room"): the
    # learning check's budget and RL setting, in worlds with a validation split (10% of the entities, taken
    # from the train ones) on which the knobs were chosen; the reported test questions serve nothing else.
    # Retrieval as the bottleneck: half the facts get decoy sentences (their keyword in the entity's other
    # passages), so the retriever's first document states the fact in ~70% of oracle searches, and a pool of 5
    # always holds it; the cold start shows the gold passages, so its oracle turns read what they were shown.
    "cpu-ranker": Preset("smollm2-135m", 1000, (2,), 8, 10, 4, 8, 200, 64, 512, 1, 1e-5, SHORT_TEMPLATE, max_turns=4,
                         eval_base=False, seeds=(0, 1, 2), world_seed=0, shared_start=True,
                         env_options={"decoy_rate": 0.5, "validation_fraction": 0.1}, cold_start_shows="gold"),
    # Rounds that differ in contribution: every question that can opens with an aside (another fact of its
    # start entity), whose entity the oracle looks up first: a search round that contributes nothing. 640
    # response tokens, as the third document makes the oracle's episodes ~140 tokens longer (p90 566).
    "cpu-rounds": Preset("smollm2-135m", 1000, (2,), 8, 10, 4, 8, 200, 64, 640, 1, 1e-5, SHORT_TEMPLATE, max_turns=4,
                         eval_base=False, seeds=(0, 1, 2), world_seed=0, shared_start=True,
                         env_options={"aside_rate": 1.0, "validation_fraction": 0.1}),
    # HotpotQA with its own paragraphs (the distractor setting): trains on the file's first 100 questions and
    # evaluates on the 200 after them, searching the file's ~3000 paragraphs; the cold start imitates one
    # search per gold title, shown its gold passage. 640 response tokens: the oracle's episodes run to 467 at
    # p90 (787 at most). The path is the shared sample's from a checkout's root (`--data-path` to move it).
    "cpu-hotpotqa": Preset("smollm2-135m", 1000, (2,), 8, 10, 4, 8, 200, 64, 640, 1, 1e-5, SHORT_TEMPLATE, max_turns=4,
                           eval_base=False, seeds=(0, 1, 2), world_seed=0, shared_start=True, env_id="SearchQA-HotpotQA-v0",
                           data_path="../shared/data/hotpotqa/hotpot_train_sample_hf.jsonl", train_questions=100,
                           cold_start_shows="gold"),
    # A random 2-layer model: checks the whole pipeline in seconds (the tests run it); learns nothing.
    "tiny": Preset("tiny", 300, (1,), 1, 1, 2, 2, 4, 16, 64, 1, 1e-4, SHORT_TEMPLATE, credit_questions=2, credit_group=2),
    # One 80 GB GPU shared by an SGLang server and the update (documented in docs/learners.md with its
    # estimated run time; not run in CI): weights reach the server as CUDA tensors after every update.
    "gpu": Preset("Qwen/Qwen2.5-0.5B-Instruct", 10000, (1, 2), 50, 200, 16, 8, 500, 256, 2048, 3, 1e-6,
                  rollout_backend="sglang", servers=1, weight_sync="tensors", device="cuda"),
}

def eval_questions_name(preset: Preset | dict) -> str:
    """What a preset's evaluation questions are, in words: the synthetic world's test or validation split, or a
    question file's questions held out from training."""
    get = preset.get if isinstance(preset, dict) else lambda k, d=None: getattr(preset, k, d)
    if get("env_id", "SearchQA-Synthetic-v0") != "SearchQA-Synthetic-v0":
        held = get("train_questions")
        return "training questions" if held is None else f"questions held out (after the first {held} of the file)"
    return f"{get('eval_split', 'test')} questions" + (" (validation split: for choosing a setting)" if get("eval_split") == "validation" else "")


def preset_fields(stored: dict) -> dict:
    """A preset as a `results.json` stored it, with each field added to `Preset` since then at its default
    (e.g. `temperature` 1.0, at which every earlier run sampled)."""
    return {**{f.name: f.default if f.default_factory is MISSING else f.default_factory() for f in fields(Preset)
               if f.default is not MISSING or f.default_factory is not MISSING}, **stored}


def parse_env_options(items: list[str], base: dict | None = None) -> dict:
    """`["decoy_rate=0.3", ...]` -> `{"decoy_rate": 0.3}` on top of `base` (values as JSON, else text); the env
    checks the names when it is built."""
    return key_values(items, "--env-option", base)


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


