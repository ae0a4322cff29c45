"""The per-format record parsers: one raw record in, one `QARecord` (and its gold paragraphs) out.

The gold annotations each format yields are listed in `searchgym.data.loaders`; `_PARSERS` maps each
format name to its parser, and `_CONTEXT_FORMATS` names the formats whose context paragraphs make a corpus.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgym.data.fields import (
    _answer_entity,
    _as_id,
    _as_int,
    _as_list,
    _as_mapping,
    _as_str,
    _as_str_list,
    _extra,
    _field,
    _make_record,
    _RecordError,
    _unique,
)
from searchgym.data.formats import _guess_source
from searchgym.data.records import QARecord

if TYPE_CHECKING:
    # Type-only: the loader builds the context corpus and imports this module.
    from searchgym.data.loaders import _ContextCorpusBuilder

# Messages keep the logger they had before the loader was split into modules.
logger = logging.getLogger("searchgym.data.loaders")


@dataclass
class _Draft:
    record: QARecord
    gold_keys: tuple[tuple[str, str], ...] = ()
    """(title, text) of the supporting paragraphs; mapped to document ids once all records are read."""


@dataclass
class _ParseContext:
    """What a record parser needs besides the record: where it is and the shared context corpus."""

    path: Path
    source: str | None
    default_source: str
    paragraphs: _ContextCorpusBuilder | None
    seen_ids: set[str] = field(default_factory=set)
    number: int = 0

    def source_for(self, data_source: str | None = None) -> str:
        if self.source is not None:
            return self.source
        if data_source:
            return _guess_source(data_source) or data_source
        return self.default_source


# ------------------------------------------------------------------------ HotpotQA and 2Wiki parsers


def _join_hotpotqa(sentences: list[str]) -> str:
    # HotpotQA's sentences keep the text's own separators (every sentence after the first starts with a
    # space, except where the splitter cut inside a quotation), so plain concatenation restores the
    # paragraph exactly.
    return "".join(sentences).strip()


def _join_adaptive(sentences: list[str]) -> str:
    # Files that keep the separators (as HotpotQA does) are concatenated; files with bare sentences get
    # a single space between them.
    if any(s[:1].isspace() for s in sentences[1:]):
        return "".join(sentences).strip()
    return " ".join(s.strip() for s in sentences if s.strip())


def _supporting_facts(value: Any) -> list[tuple[str, int]]:
    if isinstance(value, Mapping):
        titles = _as_str_list(_field(value, "title", "supporting_facts"), "supporting_facts.title")
        sent_ids = _as_list(_field(value, "sent_id", "supporting_facts"), "supporting_facts.sent_id")
        if len(titles) != len(sent_ids):
            raise _RecordError(f"supporting_facts: {len(titles)} titles but {len(sent_ids)} sent_ids")
        return [(t, _as_int(s, "supporting_facts.sent_id")) for t, s in zip(titles, sent_ids, strict=True)]
    facts = []
    for i, fact in enumerate(_as_list(value, "supporting_facts")):
        pair = _as_list(fact, f"supporting_facts[{i}]")
        if len(pair) != 2:
            raise _RecordError(f"field 'supporting_facts[{i}]': expected [title, sent_id], got {len(pair)} items")
        facts.append((_as_str(pair[0], f"supporting_facts[{i}][0]"), _as_int(pair[1], f"supporting_facts[{i}][1]")))
    return facts


def _context_paragraphs(value: Any, join: Callable[[list[str]], str]) -> list[tuple[str, str]]:
    """(title, text) per context paragraph, from the list form or the column form of `context`."""
    if isinstance(value, Mapping):
        titles = _as_str_list(_field(value, "title", "context"), "context.title")
        body_key = "sentences" if "sentences" in value else "content"
        bodies = _as_list(_field(value, body_key, "context"), f"context.{body_key}")
        if len(titles) != len(bodies):
            raise _RecordError(f"context: {len(titles)} titles but {len(bodies)} {body_key}")
        pairs = list(zip(titles, bodies, strict=True))
    else:
        pairs = []
        for i, item in enumerate(_as_list(value, "context")):
            pair = _as_list(item, f"context[{i}]")
            if len(pair) != 2:
                raise _RecordError(f"field 'context[{i}]': expected [title, [sentences]], got {len(pair)} items")
            pairs.append((_as_str(pair[0], f"context[{i}][0]"), pair[1]))
    paragraphs = []
    for i, (title, body) in enumerate(pairs):
        if not title.strip():
            raise _RecordError(f"context paragraph {i} has an empty title")
        sentences = _as_str_list(body, f"context[{i}] sentences", allow_scalar=True)
        paragraphs.append((title, join(sentences)))
    return paragraphs


def _add_context(ctx: _ParseContext, paragraphs: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Register the paragraphs in the shared corpus; map each title to its (first) paragraph's key."""
    assert ctx.paragraphs is not None
    by_title: dict[str, tuple[str, str]] = {}
    for title, text in paragraphs:
        by_title.setdefault(title, ctx.paragraphs.add(title, text))
    return by_title


def _gold_keys_for_titles(
    titles: Iterable[str], by_title: Mapping[str, tuple[str, str]], ctx: _ParseContext
) -> tuple[tuple[str, str], ...]:
    keys = []
    for title in titles:
        if title in by_title:
            keys.append(by_title[title])
        else:
            logger.warning(
                "%s record %d: supporting title %r is not among its context paragraphs; left out of gold_docs",
                ctx.path,
                ctx.number,
                title,
            )
    return tuple(keys)


def _hotpot_common(
    raw: Mapping[str, Any], ctx: _ParseContext, join: Callable[[list[str]], str]
) -> tuple[str, str, str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    rid = _as_id(raw["_id"] if "_id" in raw else _field(raw, "id"), "_id")
    question = _as_str(_field(raw, "question"), "question")
    answer = _as_str(_field(raw, "answer"), "answer")
    facts = _supporting_facts(_field(raw, "supporting_facts"))
    by_title = _add_context(ctx, _context_paragraphs(_field(raw, "context"), join))
    titles = _unique(title for title, _ in facts)
    return rid, question, answer, titles, _gold_keys_for_titles(titles, by_title, ctx)


def _parse_hotpotqa(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid, question, answer, titles, gold_keys = _hotpot_common(raw, ctx, _join_hotpotqa)
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique([answer]),
        gold_entities=_unique([*titles, *_answer_entity(answer)]),
        gold_titles=titles,
        hops=2,
        source=ctx.source_for(),
        metadata=_extra(raw, ("_id", "id", "question", "answer", "context")),
    )
    return _Draft(record, gold_keys)


def _evidence_entities(value: Any) -> list[str]:
    """Subjects and objects of 2Wiki's evidence triples, from the list form or the column form."""
    if isinstance(value, Mapping):
        subjects = _as_str_list(value.get("fact", []), "evidences.fact")
        objects = _as_str_list(value.get("entity", []), "evidences.entity")
        if len(subjects) != len(objects):
            raise _RecordError(f"evidences: {len(subjects)} facts but {len(objects)} entities")
        return [e for pair in zip(subjects, objects, strict=True) for e in pair]
    entities = []
    for i, triple in enumerate(_as_list(value, "evidences")):
        items = _as_list(triple, f"evidences[{i}]")
        if len(items) != 3:
            raise _RecordError(f"field 'evidences[{i}]': expected [subject, relation, object], got {len(items)} items")
        entities += [_as_str(items[0], f"evidences[{i}][0]"), _as_str(items[2], f"evidences[{i}][2]")]
    return entities


def _parse_2wiki(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid, question, answer, titles, gold_keys = _hotpot_common(raw, ctx, _join_adaptive)
    evidence = _evidence_entities(raw.get("evidences") or [])
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique([answer]),
        gold_entities=_unique([*titles, *evidence, *_answer_entity(answer)]),
        gold_titles=titles,
        hops=len(titles) or None,
        source=ctx.source_for(),
        metadata=_extra(raw, ("_id", "id", "question", "answer", "context")),
    )
    return _Draft(record, gold_keys)


# ----------------------------------------------------------------------------------- MuSiQue parser


def _musique_paragraphs(value: Any) -> list[tuple[int, str, str, bool]]:
    paragraphs = []
    for i, item in enumerate(_as_list(value, "paragraphs")):
        para = _as_mapping(item, f"paragraphs[{i}]")
        idx = _as_int(para.get("idx", i), f"paragraphs[{i}].idx")
        title = _as_str(_field(para, "title", f"paragraphs[{i}]"), f"paragraphs[{i}].title")
        if not title.strip():
            raise _RecordError(f"paragraphs[{i}] has an empty title")
        text = _as_str(_field(para, "paragraph_text", f"paragraphs[{i}]"), f"paragraphs[{i}].paragraph_text")
        paragraphs.append((idx, title, text.strip(), bool(para.get("is_supporting", False))))
    return paragraphs


def _decomposition(value: Any) -> list[Mapping[str, Any]]:
    return [
        _as_mapping(step, f"question_decomposition[{i}]")
        for i, step in enumerate(_as_list(value, "question_decomposition"))
    ]


def _decomposition_answers(steps: list[Mapping[str, Any]]) -> list[str]:
    return [
        _as_str(step["answer"], f"question_decomposition[{i}].answer")
        for i, step in enumerate(steps)
        if step.get("answer") is not None
    ]


def _chain_entities(step_answers: Iterable[str], answer: str) -> tuple[str, ...]:
    """Decomposition answers, deduplicated, with the final answer last."""
    entities = [e for e in _unique(step_answers) if e != answer.strip()]
    return _unique([*entities, answer])


def _musique_gold_keys(
    steps: list[Mapping[str, Any]], paragraphs: list[tuple[int, str, str, bool]], keys: dict[int, tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    ordered: list[tuple[str, str]] = []
    for i, step in enumerate(steps):
        support = step.get("paragraph_support_idx")
        if support is None:
            continue
        support = _as_int(support, f"question_decomposition[{i}].paragraph_support_idx")
        if support not in keys:
            raise _RecordError(
                f"question_decomposition[{i}].paragraph_support_idx {support} matches no paragraph "
                f"(paragraph idx values: {sorted(keys)})"
            )
        ordered.append(keys[support])
    # Supporting paragraphs that no step points at still count, after the decomposition's own.
    ordered += [keys[idx] for idx, _, _, supporting in paragraphs if supporting]
    return tuple(dict.fromkeys(ordered))


def _parse_musique(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    assert ctx.paragraphs is not None
    rid = _as_id(_field(raw, "id"), "id")
    question = _as_str(_field(raw, "question"), "question")
    answer = _as_str(_field(raw, "answer"), "answer")
    aliases = _as_str_list(raw.get("answer_aliases") or [], "answer_aliases")
    paragraphs = _musique_paragraphs(_field(raw, "paragraphs"))
    keys = {idx: ctx.paragraphs.add(title, text) for idx, title, text, _ in paragraphs}
    steps = _decomposition(_field(raw, "question_decomposition"))
    gold_keys = _musique_gold_keys(steps, paragraphs, keys)
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique([answer, *aliases]),
        gold_entities=_chain_entities(_decomposition_answers(steps), answer),
        gold_titles=_unique(title for title, _ in gold_keys),
        hops=len(steps) or None,
        source=ctx.source_for(),
        metadata=_extra(raw, ("id", "question", "answer", "answer_aliases", "paragraphs")),
    )
    return _Draft(record, gold_keys)


# ------------------------------------------------------------------- FlashRAG, Search-R1, NQ-open


def _popqa_entities(meta: Mapping[str, Any]) -> tuple[str, ...] | None:
    subj, obj = meta.get("subj"), meta.get("obj")
    if isinstance(subj, str) and isinstance(obj, str) and subj.strip() and obj.strip():
        return _unique([subj, obj])
    return None


def _multihop_annotations(
    meta: Mapping[str, Any], answer: str, source: str
) -> tuple[tuple[str, ...], tuple[str, ...], int | None] | None:
    """(gold_entities, gold_titles, hops) from a FlashRAG multi-hop row's metadata, or None.

    FlashRAG keeps the original datasets' annotations in `metadata`: HotpotQA's and 2Wiki's
    `supporting_facts` (and 2Wiki's `evidences`), MuSiQue's `question_decomposition`.
    """
    if "question_decomposition" in meta:
        steps = _decomposition(meta["question_decomposition"])
        titles = _unique(
            step["support_paragraph"]["title"]
            for step in steps
            if isinstance(step.get("support_paragraph"), Mapping)
            and isinstance(step["support_paragraph"].get("title"), str)
        )
        return _chain_entities(_decomposition_answers(steps), answer), titles, len(steps) or None
    if "supporting_facts" in meta:
        titles = _unique(title for title, _ in _supporting_facts(meta["supporting_facts"]))
        evidence = _evidence_entities(meta.get("evidences") or [])
        hops = 2 if source == "hotpotqa" else (len(titles) or None)
        return _unique([*titles, *evidence, *_answer_entity(answer)]), titles, hops
    return None


def _flashrag_annotations(
    meta: Mapping[str, Any], answers: list[str], source: str
) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    popqa = _popqa_entities(meta)
    if popqa is not None:
        return popqa, (), None
    canonical = answers[0] if answers else ""
    try:
        multihop = _multihop_annotations(meta, canonical, source)
    except _RecordError as exc:
        # Metadata is carried along as found; a shape we do not know only costs the extra annotations.
        logger.debug("ignoring unrecognised multi-hop metadata: %s", exc)
        multihop = None
    if multihop is not None:
        return multihop
    return _unique([canonical]), (), None


def _parse_flashrag(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid = _as_id(raw["id"], "id") if raw.get("id") is not None else str(ctx.number)
    question = _as_str(_field(raw, "question"), "question")
    answers = _as_str_list(_field(raw, "golden_answers"), "golden_answers", allow_scalar=True)
    meta = _as_mapping(raw.get("metadata") or {}, "metadata")
    source = ctx.source_for()
    entities, titles, hops = _flashrag_annotations(meta, list(_unique(answers)), source)
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique(answers),
        gold_entities=entities,
        gold_titles=titles,
        hops=hops,
        source=source,
        metadata={**_extra(raw, ("id", "question", "golden_answers", "metadata")), **meta},
    )
    return _Draft(record)


def _searchr1_answers(raw: Mapping[str, Any]) -> list[str]:
    reward = raw.get("reward_model")
    if isinstance(reward, Mapping) and reward.get("ground_truth") is not None:
        truth = reward["ground_truth"]
        if isinstance(truth, Mapping):
            return _as_str_list(
                _field(truth, "target", "reward_model.ground_truth"),
                "reward_model.ground_truth.target",
                allow_scalar=True,
            )
        return _as_str_list(truth, "reward_model.ground_truth", allow_scalar=True)
    if raw.get("golden_answers") is not None:
        return _as_str_list(raw["golden_answers"], "golden_answers", allow_scalar=True)
    raise _RecordError(
        f"no answers: expected reward_model.ground_truth.target or golden_answers (found keys: {sorted(raw)})"
    )


def _searchr1_id(raw: Mapping[str, Any], ctx: _ParseContext, source: str) -> str:
    extra = raw.get("extra_info")
    if raw.get("id") is not None:
        rid = _as_id(raw["id"], "id")
    elif isinstance(extra, Mapping) and extra.get("index") is not None:
        rid = _as_id(extra["index"], "extra_info.index")
    else:
        rid = str(ctx.number)
    # Search-R1's merged training files (nq + hotpotqa) repeat ids such as "train_0" across sources.
    if rid in ctx.seen_ids and source:
        rid = f"{source}/{rid}"
    return rid


def _parse_searchr1(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    data_source = raw.get("data_source")
    source = ctx.source_for(data_source if isinstance(data_source, str) else None)
    question = _as_str(_field(raw, "question"), "question")
    answers = _unique(_searchr1_answers(raw))
    record = _make_record(
        id=_searchr1_id(raw, ctx, source),
        question=question.strip(),
        answers=answers,
        gold_entities=answers[:1],
        source=source,
        # The prompt is the question rendered in Search-R1's template; it is dropped to keep memory
        # proportional to the questions.
        metadata=_extra(raw, ("id", "question", "golden_answers", "reward_model", "prompt")),
    )
    return _Draft(record)


def _parse_nq_open(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid = _as_id(raw["id"], "id") if raw.get("id") is not None else str(ctx.number)
    question = _as_str(_field(raw, "question"), "question")
    answers = _unique(_as_str_list(_field(raw, "answer"), "answer", allow_scalar=True))
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=answers,
        gold_entities=answers[:1],
        source=ctx.source_for(),
        metadata=_extra(raw, ("id", "question", "answer")),
    )
    return _Draft(record)


_PARSERS: dict[str, Callable[[Mapping[str, Any], _ParseContext], _Draft]] = {
    "hotpotqa": _parse_hotpotqa,
    "hotpotqa_hf": _parse_hotpotqa,
    "2wiki": _parse_2wiki,
    "musique": _parse_musique,
    "flashrag": _parse_flashrag,
    "searchr1": _parse_searchr1,
    "nq_open": _parse_nq_open,
}
_CONTEXT_FORMATS = frozenset({"hotpotqa", "hotpotqa_hf", "2wiki", "musique"})
