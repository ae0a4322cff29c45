"""Parsers of the question-and-answers formats: FlashRAG, Search-R1 / verl, NQ-open (and TriviaQA's and
Bamboogle's plain layouts), and PopQA's original release. None of them carries context paragraphs.

The driver and the parse context are in `searchgym.data.parsers` and `searchgym.data.loaders`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from searchgym.data.fields import (
    RecordShapeError,
    answer_entities,
    as_answer_list,
    as_list,
    as_mapping,
    as_str,
    as_str_list,
    extra_fields,
    is_boolean_answer,
    make_record,
    required_field,
    unique_texts,
)
from searchgym.data.formats import record_dataset
from searchgym.data.parsers import (
    DraftRecord,
    ParseContext,
    chain_entities,
    decomposition_answers,
    evidence_entities,
    parse_decomposition,
    parse_supporting_facts,
    record_id,
)

# Messages keep the logger they had before the loader was split into modules.
logger = logging.getLogger("searchgym.data.loaders")

_QUESTION_MARK = "Question:"
"""Where Search-R1's template (and most verl agentic-RAG templates derived from it) puts the question."""


# ------------------------------------------------------------------------------------------ FlashRAG


def _popqa_entities(meta: Mapping[str, Any]) -> tuple[str, ...] | None:
    subj, obj = meta.get("subj"), meta.get("obj")
    if isinstance(subj, str) and isinstance(obj, str) and subj.strip() and obj.strip():
        return unique_texts([subj, obj])
    return None


def _multihop_annotations(
    meta: Mapping[str, Any], answer: str, source: str
) -> tuple[tuple[str, ...], tuple[str, ...], int | None] | None:
    """(gold_entities, gold_titles, hops) from a FlashRAG multi-hop row's metadata, or None.

    FlashRAG keeps the original datasets' annotations in `metadata`: HotpotQA's and 2Wiki's
    `supporting_facts` (and 2Wiki's `evidences`), MuSiQue's `question_decomposition`.
    """
    if "question_decomposition" in meta:
        steps = parse_decomposition(meta["question_decomposition"])
        titles = unique_texts(
            step["support_paragraph"]["title"]
            for step in steps
            if isinstance(step.get("support_paragraph"), Mapping)
            and isinstance(step["support_paragraph"].get("title"), str)
        )
        return chain_entities(decomposition_answers(steps), answer), titles, len(steps) or None
    if "supporting_facts" in meta:
        titles = unique_texts(title for title, _ in parse_supporting_facts(meta["supporting_facts"]))
        evidence = evidence_entities(meta.get("evidences") or [])
        hops = 2 if source == "hotpotqa" else (len(titles) or None)
        return unique_texts([*titles, *evidence, *answer_entities(answer)]), titles, hops
    return None


def _flashrag_annotations(
    meta: Mapping[str, Any], answers: list[str], source: str, ctx: ParseContext, boolean: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    popqa = _popqa_entities(meta)
    if popqa is not None:
        return popqa, (), None
    canonical = answers[0] if answers else ""
    try:
        multihop = _multihop_annotations(meta, canonical, source)
    except RecordShapeError as exc:
        # The metadata stays in the record as found; the loader warns once, with a count, that these
        # records lack the entities and titles their metadata was meant to give.
        ctx.lost_annotations.append(f"record {ctx.number}: {exc}")
        multihop = None
    if multihop is not None:
        return multihop
    # A boolean answer (yes/no) names no entity.
    return (answer_entities(canonical) if boolean else unique_texts([canonical])), (), None


def parse_flashrag(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One FlashRAG record (`golden_answers`, annotations in `metadata`)."""
    question = as_str(required_field(raw, "question"), "question")
    golden = required_field(raw, "golden_answers")
    answers = as_answer_list(golden, "golden_answers")
    rid = record_id(raw, ctx, question, answers)
    meta = as_mapping(raw.get("metadata") or {}, "metadata")
    source = ctx.source_for()
    entities, titles, hops = _flashrag_annotations(
        meta, list(unique_texts(answers)), source, ctx, is_boolean_answer(golden)
    )
    record = make_record(
        id=rid,
        question=question.strip(),
        answers=unique_texts(answers),
        gold_entities=entities,
        gold_titles=titles,
        hops=hops,
        source=source,
        metadata={**extra_fields(raw, ("id", "question", "golden_answers", "metadata")), **meta},
    )
    return DraftRecord(record, dataset=record_dataset("flashrag", raw))


# ------------------------------------------------------------------------------------- Search-R1 / verl


_JOINERS = (", ", ",", "; ", ";", " | ", "|", " / ", "/")


def _searchr1_answers(raw: Mapping[str, Any]) -> list[str]:
    """The record's answers: `reward_model.ground_truth` (or its `target`), else `golden_answers`. Where the
    ground truth is one string and the record also lists its answers one by one (`golden_answers`,
    `extra_info.answers` or `extra_info.golden_answers`), the list wins: the string is often the list joined
    by commas, which no answer equals."""
    reward = raw.get("reward_model")
    if isinstance(reward, Mapping) and reward.get("ground_truth") is not None:
        truth, name = reward["ground_truth"], "reward_model.ground_truth"
        if isinstance(truth, Mapping):
            truth, name = required_field(truth, "target", name), f"{name}.target"
        listed = _listed_answers(raw) if isinstance(truth, str) else None
        if isinstance(truth, str) and listed is not None:
            return _list_over_joined(truth, listed)
        return as_answer_list(truth, name)
    listed = _listed_answers(raw)
    if listed is not None:
        return listed
    if raw.get("golden_answers") is not None:
        return as_answer_list(raw["golden_answers"], "golden_answers")
    raise RecordShapeError(
        f"no answers: expected reward_model.ground_truth.target or golden_answers (found keys: {sorted(raw)})"
    )


def _listed_answers(raw: Mapping[str, Any]) -> list[str] | None:
    """The answers the record lists one by one besides its ground truth, or None."""
    extra = raw.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    for name, value in (("golden_answers", raw.get("golden_answers")), ("extra_info.answers", extra.get("answers")),
                        ("extra_info.golden_answers", extra.get("golden_answers"))):
        if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
            value = value.tolist()
        if isinstance(value, (list, tuple)) and value:
            return as_answer_list(value, name)
    return None


def _list_over_joined(truth: str, listed: list[str]) -> list[str]:
    """`listed`, and `truth` after it only when it is neither one of them nor them joined."""
    text = truth.strip()
    items = [a.strip() for a in listed]
    if text in items or any(sep.join(items) == text for sep in _JOINERS):
        return listed
    return [*listed, truth]


def _searchr1_question(raw: Mapping[str, Any]) -> str:
    """The question: the `question` column, else `extra_info.question`, else the text after the last
    `Question:` of the prompt's last user message (Search-R1's template ends with `Question: {question}`)."""
    if raw.get("question") is not None:
        return as_str(raw["question"], "question")
    extra = raw.get("extra_info")
    if isinstance(extra, Mapping) and extra.get("question") is not None:
        return as_str(extra["question"], "extra_info.question")
    prompt = raw.get("prompt")
    if prompt is None:
        raise RecordShapeError(
            f"no question: expected question, extra_info.question or prompt (found keys: {sorted(raw)})"
        )
    text = _last_user_message(prompt)
    cut = text.rfind(_QUESTION_MARK)
    if cut < 0:
        raise RecordShapeError(
            f"no question: the record has no question or extra_info.question column, and its prompt's user "
            f"message has no {_QUESTION_MARK!r} to find it after (message starts {text[:80]!r}); add a question column"
        )
    return text[cut + len(_QUESTION_MARK) :].strip()


def _last_user_message(prompt: Any) -> str:
    if isinstance(prompt, str):
        return as_str(prompt, "prompt")
    messages = as_list(prompt, "prompt")
    for i in range(len(messages) - 1, -1, -1):
        message = as_mapping(messages[i], f"prompt[{i}]")
        if message.get("role", "user") == "user":
            return as_str(required_field(message, "content", f"prompt[{i}]"), f"prompt[{i}].content")
    raise RecordShapeError("field 'prompt': no user message in the chat message list")


def _searchr1_id(
    raw: Mapping[str, Any], ctx: ParseContext, source: str, question: str, answers: tuple[str, ...]
) -> str:
    extra = raw.get("extra_info")
    if raw.get("id") is None and isinstance(extra, Mapping) and extra.get("index") is not None:
        rid = record_id(extra, ctx, question, answers, ("index",))
    else:
        rid = record_id(raw, ctx, question, answers)
    # Search-R1's merged training files (nq + hotpotqa) repeat ids such as "train_0" across sources.
    if rid in ctx.seen_ids and source:
        rid = f"{source}/{rid}"
    return rid


def parse_searchr1(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One Search-R1 / verl row (`prompt`, `reward_model`, `data_source`)."""
    data_source = raw.get("data_source")
    source = ctx.source_for(data_source if isinstance(data_source, str) else None)
    question = _searchr1_question(raw)
    answers = unique_texts(_searchr1_answers(raw))
    record = make_record(
        id=_searchr1_id(raw, ctx, source, question, answers),
        question=question.strip(),
        answers=answers,
        gold_entities=_first_entity(answers, _boolean_truth(raw)),
        source=source,
        # The prompt is the question rendered in Search-R1's template; it is dropped to keep memory
        # proportional to the questions.
        metadata=extra_fields(raw, ("id", "question", "golden_answers", "reward_model", "prompt")),
    )
    return DraftRecord(record, dataset=record_dataset("searchr1", raw))


def _boolean_truth(raw: Mapping[str, Any]) -> bool:
    reward = raw.get("reward_model")
    truth = reward.get("ground_truth") if isinstance(reward, Mapping) else raw.get("golden_answers")
    if isinstance(truth, Mapping):
        truth = truth.get("target")
    return is_boolean_answer(truth)


def _first_entity(answers: tuple[str, ...], boolean: bool) -> tuple[str, ...]:
    """The canonical answer as the only gold entity; none for a boolean (yes/no) answer."""
    return () if boolean else answers[:1]


# ------------------------------------------------------------------- NQ-open, TriviaQA, Bamboogle


def _plain_answers(raw: Mapping[str, Any]) -> list[str]:
    answer = required_field(raw, "answer")
    if isinstance(answer, Mapping):
        # TriviaQA as Hugging Face's `trivia_qa` exports it: {value, aliases, normalized_value, ...}.
        value = [answer["value"]] if isinstance(answer.get("value"), str) else []
        return value + as_str_list(answer.get("aliases") or [], "answer.aliases")
    answers = as_answer_list(answer, "answer")
    return answers + as_answer_list(raw.get("answer_aliases") or [], "answer_aliases")


def parse_nq_open(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One question-and-answer row (NQ-open, TriviaQA, Bamboogle layouts)."""
    if any(isinstance(k, str) and k != k.lower() for k in raw):
        # Bamboogle's Hugging Face export names its columns `Question` and `Answer`.
        raw = {k.lower() if isinstance(k, str) else k: v for k, v in raw.items()}
    question = as_str(required_field(raw, "question"), "question")
    answers = unique_texts(_plain_answers(raw))
    dataset = record_dataset("nq_open", raw)
    record = make_record(
        id=record_id(raw, ctx, question, answers, ("id", "question_id")),
        question=question.strip(),
        answers=answers,
        gold_entities=_first_entity(answers, is_boolean_answer(raw.get("answer"))),
        source=ctx.source_for(dataset),
        metadata=extra_fields(raw, ("id", "question_id", "question", "answer", "answer_aliases")),
    )
    return DraftRecord(record, dataset=dataset)


# ------------------------------------------------------------------------------------------- PopQA


def _possible_answers(value: Any) -> list[str]:
    # The original release stores the list JSON-encoded, as a string, in every layout (TSV, CSV, JSON).
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RecordShapeError(
                f"field 'possible_answers': not a JSON-encoded list of strings ({exc.msg})"
            ) from None
    return as_str_list(value, "possible_answers", allow_scalar=True)


def parse_popqa(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One PopQA record (subject, property, object and possible answers)."""
    question = as_str(required_field(raw, "question"), "question")
    answers = unique_texts(_possible_answers(required_field(raw, "possible_answers")))
    subj = as_str(required_field(raw, "subj"), "subj")
    obj = as_str(required_field(raw, "obj"), "obj")
    record = make_record(
        id=record_id(raw, ctx, question, answers),
        question=question.strip(),
        answers=answers,
        gold_entities=unique_texts([subj, obj]),
        source=ctx.source_for(),
        metadata=extra_fields(raw, ("id", "question", "possible_answers")),
    )
    return DraftRecord(record, dataset="popqa")
