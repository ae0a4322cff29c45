"""Supervised cold start of COSEARCH's ranker on the synthetic world's oracle reranks.

A released small model (SmolLM2-135M) almost never writes `<reason>...</reason><rerank>[i] > ...</rerank>`
in the form the official validator accepts, so every ranker reward is -alpha and the ranker's GRPO groups
carry no signal. Before RL, the ranker learns the format, and a sensible first choice, from examples the
synthetic world can label itself:

1. For each search of a training question's oracle trajectory, the candidates are exactly what the env's
   `_search` hands the ranker: `retriever.search([query], N)` with N = `ranker_candidates`.
2. A candidate is useful when its id is among the record's `gold_docs` (the passages the question was built
   from) or its title + text holds a gold answer (`cosearch.relevance_text`, `cover_exact_match`).
3. The target is a one-line rationale naming the first chosen candidate and why, then `<rerank>` with
   min(k, N) distinct indices: useful candidates first, then the rest, each part in the order shown. It
   parses under `parse_rerank(strict=True)` and fits the ranker's token budget, or building it fails.
   On the oracle's sub-queries the retriever already puts a useful candidate first, so in retriever order
   nearly every target starts `[1]` and a ranker learns to keep the retriever's order. With `shuffle`
   (`CoSearchConfig.ranker_cold_start_shuffle`) each request shows its candidates in a seeded random
   order, so the target's first index is wherever the useful candidate landed: a ranker must read the
   candidates to match it.
4. An example is tokenized as `PolicyChatBackend` samples: the `LLMRanker` messages through the chat
   template with the generation prompt (loss mask 0), then the target's tokens (loss mask 1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agents.learners.cosearch import RankerCall, kept_order_rate, ranking_hits, relevance_text
from searchgym.errors import ConfigError
from searchgym.rankers.llm import RankRequest, parse_rerank
from searchgym.retrieval.base import Hit
from searchgym.rewards import cover_exact_match

__all__ = [
    "OracleRerank",
    "RerankExample",
    "oracle_reranks",
    "oracle_target",
    "rerank_example",
    "rerank_quality",
    "supervised_ranker_steps",
    "useful_candidates",
]


@dataclass(frozen=True)
class OracleRerank:
    """One ranker request of an oracle search and its supervised answer."""

    request: RankRequest
    useful: tuple[bool, ...]
    """Per candidate, in retriever order: a gold passage of the question or a holder of a gold answer."""
    answers: tuple[str, ...]
    """The question's gold answers (what Hit@k counts as relevant)."""
    target: str


@dataclass(frozen=True)
class RerankExample:
    """Token ids of prompt + target and the loss mask (1 on the target's tokens only)."""

    token_ids: list[int]
    loss_mask: list[int]


def useful_candidates(hits: Sequence[Hit], gold_docs: Sequence[str], answers: Sequence[str]) -> tuple[bool, ...]:
    """Per candidate: its id is a gold passage, or its title + text holds a gold answer."""
    gold = set(gold_docs)
    return tuple(h.doc.id in gold or cover_exact_match(relevance_text(h.doc.title, h.doc.text), answers) > 0 for h in hits)


def oracle_target(hits: Sequence[Hit], useful: Sequence[bool], answers: Sequence[str], k: int,
                  count_tokens: Callable[[str], int] | None = None, max_tokens: int | None = None) -> str:
    """`<reason>...</reason><rerank>[i] > ...</rerank>` choosing min(k, len(hits)) candidates: useful ones
    first, then the rest, each in retriever order.

    The rationale names the first choice's title and why it comes first; when `count_tokens(text)` exceeds
    `max_tokens`, shorter ones are tried (without the title, then without the why). A ConfigError when even
    the shortest does not fit.

    >>> from searchgym.corpus import Document
    >>> hits = [Hit(Document("a", "Rome", "Rome is a city."), 2.0), Hit(Document("b", "Paris", "Paris is in France."), 1.0)]
    >>> oracle_target(hits, [False, True], ["France"], 2)
    '<reason>Candidate 2, Paris, holds the answer.</reason><rerank>[2] > [1]</rerank>'
    """
    n = min(k, len(hits))
    if n < 1:
        raise ConfigError(f"a rerank needs k >= 1 and at least one candidate, got k={k} and {len(hits)} candidates")
    order = [i for i in range(len(hits)) if useful[i]] + [i for i in range(len(hits)) if not useful[i]]
    rerank = "<rerank>" + " > ".join(f"[{i + 1}]" for i in order[:n]) + "</rerank>"
    first = order[0]
    if not useful[first]:
        reasons = ["No candidate matches the sub-query; retriever order.", "Retriever order."]
    else:
        holds = cover_exact_match(relevance_text(hits[first].doc.title, hits[first].doc.text), answers) > 0
        why = "holds the answer" if holds else "matches the sub-query"
        # Not "[3] ...": a reason that opens like the ranking taught the model to copy it into <rerank>.
        reasons = [f"Candidate {first + 1}, {hits[first].doc.title}, {why}.", f"Candidate {first + 1} {why}.", f"Candidate {first + 1}."]
    for reason in reasons:
        target = f"<reason>{reason}</reason>{rerank}"
        if count_tokens is None or max_tokens is None or count_tokens(target) <= max_tokens:
            break
    else:
        raise ConfigError(f"the oracle rerank {target!r} takes {count_tokens(target)} tokens, over ranker_max_tokens="
                          f"{max_tokens}: raise ranker_max_tokens")
    parsed = parse_rerank(target, len(hits), k, strict=True)
    if not parsed.valid or list(parsed.order) != order[:n]:  # a broken target would teach the wrong format
        raise ConfigError(f"oracle rerank {target!r} does not parse as order {order[:n]} ({parsed.error})")
    return target


def oracle_reranks(env: Any, index: int, *, candidates: int, count_tokens: Callable[[str], int] | None = None,
                   max_tokens: int | None = None, question_as_query: bool = False,
                   shuffle: np.random.Generator | None = None) -> list[OracleRerank]:
    """The oracle reranks of question `index` of an env (one per search of its oracle trajectory,
    `searchgym.data.oracle`),
    with the env's retriever, `candidates` documents per search and k = the env's `top_k`. The env is not
    stepped, so its own ranker (a model) is never called.

    `question_as_query` makes one request whose sub-query is the question itself (what an agent that
    searches the question verbatim sends): there the retriever's first candidate is often not useful,
    whereas the oracle's sub-queries put a useful one first. `shuffle`: each request shows its candidates in
    an order drawn from this generator instead of the retriever's."""
    from searchgym.data.oracle import has_oracle, oracle_turns

    base = env.unwrapped
    record = base.records[index]
    if not has_oracle([record]):
        raise ConfigError("the ranker's cold start needs oracle trajectories: the synthetic world's questions, or questions "
                          "with gold titles and an answer (searchgym.data.oracle)")
    if question_as_query:
        queries = [record.question]
    else:
        actions = [base.protocol.parse(turn) for turn in oracle_turns(record)]
        queries = [a.query or "" for a in actions if a.kind == "search"]
    out = []
    for query in queries:
        hits = base.retriever.search([query], candidates)[0]
        if not hits:
            continue  # nothing to rank: the env asks no ranker either
        if shuffle is not None:
            hits = [hits[i] for i in shuffle.permutation(len(hits))]
        useful = useful_candidates(hits, record.gold_docs, record.answers)
        target = oracle_target(hits, useful, record.answers, base.top_k, count_tokens, max_tokens)
        out.append(OracleRerank(RankRequest(record.question, query, tuple(hits), base.top_k), useful, tuple(record.answers), target))
    return out


def rerank_example(tokenizer: Any, messages: Sequence[dict], target: str) -> RerankExample:
    """The chat-templated prompt (with the generation prompt), then the target; loss on the target only."""
    prompt = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    target_ids = tokenizer.encode(target, add_special_tokens=False)
    return RerankExample(prompt_ids + target_ids, [0] * len(prompt_ids) + [1] * len(target_ids))


def rerank_quality(ranker: Any, reranks: Sequence[OracleRerank], ks: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """Ask `ranker` (an `LLMRanker`) for every request in one batch and score what it shows:
    `ranker/valid_rate` (the share that parsed under its validator), `ranker/kept_order_rate` (the share of
    valid outputs that keep the retriever's order: `cosearch.kept_order_rate`), the answer-bearing Hit@k of the shown
    order and of the retriever's (`cosearch.ranking_hits`, over requests whose candidates hold a gold
    answer), and `ranker/useful@1` against `ranker/retriever_useful@1`: the share of requests whose first
    shown candidate is useful (a gold passage or an answer holder; intermediate hops count); and for each
    reason an output failed (`RerankParse.error`), the share of requests, as `ranker/error_<reason>`."""
    if not reranks:
        raise ConfigError("rerank_quality needs at least one request")
    results = ranker.rank_many([r.request for r in reranks])
    calls = [RankerCall(r.request.query, tuple(h.doc.id for h in r.request.candidates),
                        tuple(relevance_text(h.doc.title, h.doc.text) for h in r.request.candidates), order=res.order,
                        valid=bool(res.call and res.call["valid"]))
             for r, res in zip(reranks, results)]
    errors = Counter(res.call["error"] for res in results if res.call and res.call["error"])
    return {
        **{f"ranker/error_{kind}": n / len(reranks) for kind, n in sorted(errors.items())},
        "ranker/requests": float(len(reranks)),
        "ranker/valid_rate": float(np.mean([c.valid for c in calls])),
        **({"ranker/kept_order_rate": kept} if (kept := kept_order_rate(calls)) is not None else {}),
        "ranker/useful@1": float(np.mean([bool(c.order) and r.useful[c.order[0]] for c, r in zip(calls, reranks)])),
        "ranker/retriever_useful@1": float(np.mean([r.useful[0] for r in reranks])),
        **ranking_hits(calls, [r.answers for r in reranks], ks),
    }


def supervised_ranker_steps(
    model: torch.nn.Module, tokenizer: Any, env: Any, messages: Callable[[RankRequest], Sequence[dict]], *,
    steps: int, batch: int, lr: float, candidates: int, max_tokens: int, seed: int, micro_batch: int, max_grad_norm: float,
    sft_step: Callable[..., float], on_step: Callable[[int, float], None] | None = None, shuffle: bool = False,
) -> list[float]:
    """`steps` AdamW steps at `lr` on `batch` oracle reranks each, drawn from the env's questions in a seeded
    order (a new permutation each pass), with `shuffle` each request's candidates in a seeded random order
    (module docstring, 3); `messages` is the env ranker's prompt builder (`LLMRanker.messages`)
    and `sft_step(model, examples, pad_id=, micro_batch=)` accumulates the masked NLL's gradient and returns
    the loss. `on_step(step, loss)`, when given, is called after each optimizer step (1-based). Returns each
    step's loss."""
    if steps <= 0:
        return []
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    stream = _request_stream(env, np.random.default_rng([seed, 11]), candidates, count, max_tokens,
                             np.random.default_rng([seed, 13]) if shuffle else None)
    losses = []
    for _ in range(steps):
        chosen = [next(stream) for _ in range(batch)]
        examples = [rerank_example(tokenizer, messages(r.request), r.target) for r in chosen]
        optimizer.zero_grad(set_to_none=True)
        losses.append(sft_step(model, examples, pad_id=tokenizer.pad_token_id, micro_batch=micro_batch))
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        if on_step is not None:
            on_step(len(losses), losses[-1])
    return losses


def _request_stream(env: Any, rng: np.random.Generator, candidates: int, count, max_tokens: int,
                    shuffle: np.random.Generator | None = None):
    """Oracle reranks question by question, the questions in a fresh seeded permutation each pass (and with
    `shuffle`, each request's candidates in an order drawn from it)."""
    total = len(env.unwrapped.records)
    while True:
        found = False
        for index in rng.permutation(total):
            for rerank in oracle_reranks(env, int(index), candidates=candidates, count_tokens=count, max_tokens=max_tokens,
                                         shuffle=shuffle):
                found = True
                yield rerank
        if not found:
            raise ConfigError("no oracle trajectory of this env searches: the ranker's cold start has nothing to learn from")
