"""COSEARCH: the agent and a generative ranker trained together. How it differs from plain GRPO:

1. Two policies learn: the agent and the LLM ranker that picks which K of the retriever's N candidates the
   agent sees (`searchgym.rankers.llm`); the ranker is the learner's second model (`cosearch_ranker`).
2. The agent's reward is the official code's: answer F1, or -0.2 when the trajectory's format is invalid
   (`reward_key`, `agent_format_penalty`); its advantages are GRPO's.
3. The ranker's GRPO groups are not "same prompt": ranker calls are split by the user question they serve
   (across that question's G trajectories) and by whether any candidate holds a gold answer (I_ans); within
   a split, sub-queries are normalized (lowercase, articles dropped, punctuation to spaces) and each call
   joins the first cluster whose representative, its first member, has unigram F1 >= delta (0.8) with it,
   else it starts a new cluster.
4. Clusters under 3 calls, and clusters whose rewards are all equal, are dropped.
5. The ranker's reward is Eq. 6, with r_rel = mean(Hit@1, Hit@3, Hit@5) over the shown order (a document
   is relevant when its title or text contains a gold answer), r_main = the trajectory's answer token F1
   and f = the ranker output parsed (by the official validator's rules, `LLMRankerConfig.strict`):
       -alpha (0.2)        if f = 0
       r_rel               if I_ans and r_rel <= gamma (0.5)
       r_rel + r_main      if I_ans and r_rel > gamma
       r_main              if not I_ans
6. Each policy is updated by the GRPO core on its own groups (ranker clusters differ in size, so their
   advantages use the flat layout of `agents.core.group_advantages`), with the official runs' k3 KL of
   0.001 to its starting weights and verl's dual clip at 3.

Choices where the method's description is silent, or where this differs from the official code:
- "Contains a gold answer" is `searchgym.rewards.cover_exact_match`: a normalized gold answer occurring
  as whole tokens in the normalized title + text ("Paris" is not in "Parisian").
- When fewer than k documents are shown, Hit@k looks at those shown (Hit@5 = Hit@3 with top_k = 3).
- "Format invalid" is the env's `episode["format_valid"]` (the action grammar's rules, running out of
  turns included), not the official per-turn tag count.
- The ranker's reward is the paper's Eq. 6; the official training script assigns a variant (the agent's
  F1 binarized at 0.8, thresholds 0.8), not implemented.
- GRPO's clip-higher (0.2 / 0.28) stays; the official runs clip symmetrically at 0.2.

The call records read from step info and their Hit@k metrics are in `agents.learners.cosearch_calls`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch

from agents.core import group_advantages
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.cosearch_calls import (
    RankerCall,
    answer_holders,
    calls_from_trajectory,
    hits_at,
    kept_order_rate,
    ranking_hits,
)
from agents.learners.grpo import GRPOConfig, RewardKey, grpo_advantages, outcome_reward
from agents.learners.registry import EnvNeeds, SecondModel, SecondModelContext, register_learner
from searchgym.errors import BatchError, ConfigError

__all__ = [
    "CoSearchConfig",
    "RankerBatch",
    "RankerCall",
    "RankerScore",
    "answer_holders",
    "batch_advantages",
    "agent_rewards",
    "calls_from_trajectory",
    "cluster_calls",
    "hits_at",
    "kept_order_rate",
    "normalize_query",
    "corpus_texts",
    "relevance_text",
    "unigram_f1",
    "rank_batch",
    "ranking_hits",
    "ranker_reward",
    "score_call",
    "select_groups",
]


@dataclass
class CoSearchConfig(GRPOConfig):
    """GRPO's options (used by both policies) plus the agent's reward and the ranker's grouping and reward."""

    reward_key: RewardKey = "f1"
    """The agent's outcome reward: answer F1, as the official code trains on."""
    agent_format_penalty: float | None = 0.2
    """An agent trajectory whose format is invalid (`episode["format_valid"]` False, which includes running
    out of turns) gets -agent_format_penalty instead of its outcome, as in the official code (0.2); None
    scores it by its outcome alone, as GRPO does."""
    kl_coef: float = 0.001
    """Weight of the k3 KL to each policy's starting weights: 0.001, as in the official runs, for the agent
    and the ranker (0 trains KL-free)."""
    clip_ratio_c: float | None = 3.0
    """Dual clip at 3, verl's default, on which the official code runs (None turns it off)."""
    group_by_question: bool = True
    """Ranker calls form clusters only with calls serving the same user question (the official code keys
    groups by question, then I_ans, then sub-query similarity); False clusters across questions."""

    delta: float = 0.8
    """Token-F1 threshold for a call to join a cluster."""
    min_group_size: int = 3
    """Clusters with fewer calls are dropped."""
    format_penalty: float = 0.2
    """alpha of Eq. 6: the reward of a ranker output that did not parse is -alpha."""
    rel_threshold: float = 0.5
    """gamma of Eq. 6: above it, a ranking that found the answer also earns the agent's answer F1."""
    hit_ks: tuple[int, ...] = (1, 3, 5)
    """r_rel is the mean of Hit@k over these k."""
    ranker_model: str | None = None
    """The ranker's model; None uses the agent's model name (a separate copy)."""
    ranker_candidates: int = 5
    """N: documents retrieved per search for the ranker to choose the env's `top_k` from (the paper: 50)."""
    ranker_temperature: float = 1.0
    """Sampling temperature of the ranker's outputs (GRPO needs samples that differ)."""
    ranker_max_tokens: int = 48
    """Token budget of one ranker output."""
    ranker_max_doc_chars: int = 160
    """Each candidate is cut to this many characters in the ranker's prompt."""
    ranker_cold_start_steps: int = 10
    """Supervised steps of the ranker on the synthetic world's oracle reranks (`agents.learners.ranker_sft`)
    before RL, in a run that starts from step 0 (a resumed run has the ranker's weights from its checkpoint);
    0 turns it off. The default brought SmolLM2-135M's strict valid rate on 50 held-out requests from 0 to
    1.0 at temperature 1 and greedy (`python -m agents.experiments.ranker_cold_start`, docs/experiment-log.md).
    Skipped, with a warning, on envs without oracle trajectories."""
    ranker_cold_start_batch: int = 4
    """Oracle reranks per supervised step of the ranker."""
    ranker_cold_start_lr: float = 5e-4
    """AdamW learning rate of the ranker's supervised steps (a fresh optimizer, as the agent's cold start)."""
    ranker_cold_start_shuffle: bool = False
    """Show each cold-start request's candidates in a seeded random order instead of the retriever's, so that
    its target's first choice is not always candidate 1 (`agents.learners.ranker_sft`, 3)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.delta <= 1:
            raise ConfigError(f"delta must be in (0, 1], got {self.delta}")
        if self.min_group_size < 2:
            raise ConfigError(
                f"min_group_size must be >= 2 (a group of one has no relative advantage), got {self.min_group_size}"
            )
        if self.agent_format_penalty is not None and self.agent_format_penalty < 0:
            raise ConfigError(f"agent_format_penalty must be >= 0 (the reward is -agent_format_penalty), got {self.agent_format_penalty}")
        if self.format_penalty < 0:
            raise ConfigError(f"format_penalty must be >= 0 (the reward is -format_penalty), got {self.format_penalty}")
        if not 0 <= self.rel_threshold <= 1:
            raise ConfigError(f"rel_threshold must be in [0, 1], got {self.rel_threshold}")
        if not self.hit_ks or any(k < 1 for k in self.hit_ks):
            raise ConfigError(f"hit_ks must be positive cut-offs, got {self.hit_ks}")
        self.hit_ks = tuple(int(k) for k in self.hit_ks)
        for name in ("ranker_candidates", "ranker_max_tokens", "ranker_max_doc_chars", "ranker_cold_start_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.ranker_cold_start_steps < 0:
            raise ConfigError(f"ranker_cold_start_steps must be >= 0 (0 turns the ranker's cold start off), got {self.ranker_cold_start_steps}")
        if not self.ranker_cold_start_lr > 0:
            raise ConfigError(f"ranker_cold_start_lr must be > 0, got {self.ranker_cold_start_lr}")
        if not self.ranker_temperature >= 0:
            raise ConfigError(f"ranker_temperature must be >= 0, got {self.ranker_temperature}")


def ranker_reward(
    *, valid: bool, has_answer: bool, r_rel: float, r_main: float, alpha: float = 0.2, gamma: float = 0.5
) -> float:
    """COSEARCH's Eq. 6 (see the module docstring)."""
    if not valid:
        return -alpha
    if not has_answer:
        return r_main
    return r_rel + r_main if r_rel > gamma else r_rel


@dataclass(frozen=True)
class RankerScore:
    reward: float
    r_rel: float
    r_main: float
    has_answer: bool
    """I_ans: some candidate holds a gold answer."""
    valid: bool


def score_call(call: RankerCall, golds: Sequence[str], r_main: float, config: CoSearchConfig) -> RankerScore:
    """Eq. 6 for one call; `golds` are the question's answers, `r_main` its trajectory's answer F1."""
    relevant = answer_holders(call, golds)
    r_rel = sum(hits_at(call.order, relevant, config.hit_ks)) / len(config.hit_ks)
    has_answer = any(relevant)
    reward = ranker_reward(
        valid=call.valid,
        has_answer=has_answer,
        r_rel=r_rel,
        r_main=r_main,
        alpha=config.format_penalty,
        gamma=config.rel_threshold,
    )
    return RankerScore(reward, r_rel, r_main, has_answer, call.valid)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")


def normalize_query(query: str) -> str:
    """Lowercase, articles dropped, punctuation to spaces, single spaces: the official code's sub-query
    normalization. Punctuation becomes a space rather than vanishing, so "obama's" is "obama s".

    >>> normalize_query("Obama's wife, the First Lady?")
    'obama s wife first lady'
    """
    return " ".join(_PUNCTUATION.sub(" ", _ARTICLES.sub(" ", query.lower())).split())


def unigram_f1(candidate: str, reference: str) -> float:
    """ROUGE-1 F1 of two normalized strings (whitespace tokens, counted with multiplicity); 0 if either
    is empty.

    >>> unigram_f1("obama s wife", "obama wife")  # 2 common: p 2/3, r 1
    0.8
    """
    cand, ref = candidate.split(), reference.split()
    if not cand or not ref:
        return 0.0
    same = sum((Counter(cand) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(cand), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def cluster_calls(
    queries: Sequence[str], has_answer: Sequence[bool], delta: float = 0.8, questions: Sequence[Hashable] | None = None
) -> list[list[int]]:
    """Greedy clusters of call indices, in creation order, before any is dropped.

    Calls are first split by the question they serve (`questions[i]`; None puts all in one) and by I_ans;
    within such a split each call joins the first cluster whose representative (first member) has
    `unigram_f1` >= delta with it, compared after `normalize_query`, else starts a new cluster.

    >>> cluster_calls(["The capital of France?", "capital of france", "river of Rome"], [True, True, True])
    [[0, 1], [2]]
    >>> cluster_calls(["capital of france", "capital of france"], [True, True], questions=["q1", "q2"])
    [[0], [1]]
    """
    if len(queries) != len(has_answer):
        raise BatchError(f"{len(queries)} queries but {len(has_answer)} I_ans flags")
    if questions is not None and len(questions) != len(queries):
        raise BatchError(f"{len(queries)} queries but {len(questions)} questions")
    clusters: list[tuple[tuple[Hashable, bool], str, list[int]]] = []
    for i, (query, answerable) in enumerate(zip(queries, has_answer)):
        key = (None if questions is None else questions[i], bool(answerable))
        norm = normalize_query(query)
        for other, representative, members in clusters:
            if other == key and unigram_f1(norm, representative) >= delta:
                members.append(i)
                break
        else:
            clusters.append((key, norm, [i]))
    return [members for _, _, members in clusters]


def select_groups(clusters: Sequence[Sequence[int]], rewards: Sequence[float], min_size: int = 3) -> list[list[int]]:
    """The clusters with at least `min_size` calls whose rewards are not all equal."""
    kept = []
    for members in clusters:
        values = [rewards[i] for i in members]
        if len(members) >= min_size and max(values) != min(values):
            kept.append(list(members))
    return kept


@dataclass(frozen=True)
class RankerBatch:
    """What the ranker's GRPO update needs from one batch of calls."""

    scores: list[RankerScore]
    """One per call, in input order."""
    groups: list[list[int]]
    """The kept clusters (call indices)."""
    advantages: dict[int, float]
    """Call index -> GRPO advantage within its cluster, for calls in a kept cluster only."""
    dropped_small: int = 0
    """Clusters dropped for having fewer than `min_group_size` calls."""
    dropped_flat: int = 0
    """Clusters large enough but dropped because their calls' rewards are all equal (no relative signal)."""


def rank_batch(
    calls: Sequence[RankerCall],
    golds: Sequence[Sequence[str]],
    r_main: Sequence[float],
    config: CoSearchConfig,
    questions: Sequence[Hashable] | None = None,
) -> RankerBatch:
    """Score, cluster, filter and compute advantages for a batch of ranker calls.

    `golds[i]` and `r_main[i]` belong to call i (its question's answers, its trajectory's answer F1).
    `questions[i]` names the user question call i serves (e.g. the question id); without it, each call's
    `question` text does. Clusters stay within one question unless `config.group_by_question` is False.
    """
    if not len(calls) == len(golds) == len(r_main):
        raise BatchError(f"{len(calls)} calls, {len(golds)} gold lists and {len(r_main)} r_main values must match")
    scores = [score_call(c, g, m, config) for c, g, m in zip(calls, golds, r_main)]
    rewards = [s.reward for s in scores]
    keys = (list(questions) if questions is not None else [c.question for c in calls]) if config.group_by_question else None
    clusters = cluster_calls([c.query for c in calls], [s.has_answer for s in scores], config.delta, keys)
    groups = select_groups(clusters, rewards, config.min_group_size)
    small = sum(len(c) < config.min_group_size for c in clusters)
    members = [i for group in groups for i in group]
    advantages: dict[int, float] = {}
    if members:
        ids = torch.tensor([g for g, group in enumerate(groups) for _ in group])
        values = group_advantages(
            torch.tensor([rewards[i] for i in members], dtype=torch.float64),
            ids,
            scale=config.scale,
            eps=config.eps,
            unbiased=config.unbiased_std,
        )
        advantages = dict(zip(members, values.tolist()))
    return RankerBatch(scores, groups, advantages, dropped_small=small, dropped_flat=len(clusters) - len(groups) - small)


def _ranker_trainer(ctx: SecondModelContext) -> SecondModel:
    from agents.learners.cosearch_ranker import RankerTrainer  # loads the policy code only when COSEARCH trains

    return RankerTrainer(ctx)


def agent_rewards(trajectories: Sequence[Trajectory], config: CoSearchConfig) -> list[float]:
    """The agent's rewards: its outcome (`reward_key`, F1 by default), or -agent_format_penalty when the
    trajectory's format is invalid (the official code's score)."""
    out = []
    for t in trajectories:
        infos = t.step_infos
        episode = infos[-1].get("episode") if infos else None
        invalid = episode is None or not episode.get("format_valid", False)
        if config.agent_format_penalty is not None and invalid:
            out.append(-config.agent_format_penalty)
        else:
            out.append(outcome_reward(infos, config.reward_key) if infos else 0.0)
    return out


def relevance_text(title: str, text: str) -> str:
    """What "contains a gold answer" is checked on: a document's title and text."""
    return f"{title}\n{text}"


def corpus_texts(corpus) -> Callable[[str], str] | None:
    """Doc id -> `relevance_text` from `corpus` (None without one): the texts a ranker call's candidates are
    checked on when the call record does not carry them."""
    if corpus is None:
        return None

    def text(doc_id: str) -> str:
        doc = corpus.get(doc_id)
        return relevance_text(doc.title, doc.text)

    return text


@register_learner("cosearch", config=CoSearchConfig, needs=EnvNeeds(ranker=True), second_model=_ranker_trainer,
                  summary="GRPO agent plus a generative ranker trained on clustered ranker calls")
def batch_advantages(trajectories: Sequence[Trajectory], config: CoSearchConfig) -> LearnerBatch:
    """COSEARCH's agent targets: GRPO on `agent_rewards` (the ranker trains in `cosearch_ranker`)."""
    rewards = torch.tensor(agent_rewards(trajectories, config), dtype=torch.float64)
    advantages, keep = grpo_advantages(rewards, config, torch.tensor([t.group for t in trajectories]))
    return LearnerBatch(
        advantages=[torch.full((len(t.token_ids),), float(a)) for t, a in zip(trajectories, advantages.tolist())],
        include=[bool(k) for k in keep.tolist()],
        rewards=rewards.tolist(),
    )
