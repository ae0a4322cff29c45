"""The per-format record parsers: one raw record in, one `QARecord` (and its gold paragraphs) out.

This module holds the parse context and the formats that carry context paragraphs (HotpotQA, 2Wiki,
MuSiQue); `searchgym.data.flat_parsers` holds the question-and-answers formats (FlashRAG, Search-R1,
NQ-open, PopQA). The gold annotations each format yields are listed in `searchgym.data.loaders`, which
also maps each format name to its parser.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgym.data.fields import (
    RecordShapeError,
    answer_entities,
    as_id,
    as_int,
    as_list,
    as_mapping,
    as_str,
    as_str_list,
    extra_fields,
    make_record,
    required_field,
    unique_texts,
)
from searchgym.data.formats import source_from_name
from searchgym.data.records import QARecord

if TYPE_CHECKING:
    # Type-only: the loader builds the context corpus and imports this module.
    from searchgym.data.dataset import ContextCorpusBuilder


@dataclass
class DraftRecord:
    """A parsed record before its gold paragraphs have corpus ids."""
    record: QARecord
    gold_keys: tuple[tuple[str, str], ...] = ()
    """(title, text) of the supporting paragraphs; mapped to document ids once all records are read."""
    dataset: str | None = None
    """The benchmark the record's own content says it belongs to (`formats.record_dataset`)."""


@dataclass
class ParseContext:
    """What a record parser needs besides the record: where it is and the shared context corpus."""

    path: Path
    source: str | None
    default_source: str
    paragraphs: ContextCorpusBuilder | None
    named_dataset: str | None = None
    """The benchmark the file's path names (`formats.source_from_path`), for layouts whose records do not
    say (KILT's task files are named `nq-dev-kilt.jsonl`, `hotpotqa-dev-kilt.jsonl`...)."""
    seen_ids: set[str] = field(default_factory=set)
    number: int = 0
    derived_ids: int = 0
    """Records that had no id and got one derived from their question and answers."""
    lost_annotations: list[str] = field(default_factory=list)
    """Where a record's metadata had annotations of a shape the parser does not know (left in metadata)."""
    missing_titles: list[str] = field(default_factory=list)
    """Supporting titles that are not among their record's context paragraphs (`record N: 'Title'`)."""

    def source_for(self, data_source: str | None = None) -> str:
        if self.source is not None:
            return self.source
        if data_source:
            return source_from_name(data_source) or data_source
        return self.default_source

    def derive_id(self, question: str, answers: Iterable[str]) -> str:
        """A stable id for a record without one: a hash of its question and answers, so that it does not
        change when records are added, removed or reordered. A repeated question with the same answers gets
        `-2`, `-3`... in file order."""
        self.derived_ids += 1
        text = "\x1f".join([question.strip(), *answers])
        base = "sha1:" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        rid, n = base, 2
        while rid in self.seen_ids:
            rid, n = f"{base}-{n}", n + 1
        return rid


def record_id(
    raw: Mapping[str, Any], ctx: ParseContext, question: str, answers: Iterable[str], keys: tuple[str, ...] = ("id",)
) -> str:
    """The record's own id (the first of `keys` present), or one derived from its question and answers."""
    for key in keys:
        if raw.get(key) is not None:
            return as_id(raw[key], key)
    return ctx.derive_id(question, answers)


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


def parse_supporting_facts(value: Any) -> list[tuple[str, int]]:
    """HotpotQA's supporting facts as (title, sentence index) pairs, from the list or the column form."""
    if isinstance(value, Mapping):
        titles = as_str_list(required_field(value, "title", "supporting_facts"), "supporting_facts.title")
        sent_ids = as_list(required_field(value, "sent_id", "supporting_facts"), "supporting_facts.sent_id")
        if len(titles) != len(sent_ids):
            raise RecordShapeError(f"supporting_facts: {len(titles)} titles but {len(sent_ids)} sent_ids")
        return [(t, as_int(s, "supporting_facts.sent_id")) for t, s in zip(titles, sent_ids, strict=True)]
    facts = []
    for i, fact in enumerate(as_list(value, "supporting_facts")):
        pair = as_list(fact, f"supporting_facts[{i}]")
        if len(pair) != 2:
            raise RecordShapeError(f"field 'supporting_facts[{i}]': expected [title, sent_id], got {len(pair)} items")
        facts.append((as_str(pair[0], f"supporting_facts[{i}][0]"), as_int(pair[1], f"supporting_facts[{i}][1]")))
    return facts


def _context_paragraphs(value: Any, join: Callable[[list[str]], str]) -> list[tuple[str, str]]:
    """(title, text) per context paragraph, from the list form or the column form of `context`."""
    if isinstance(value, Mapping):
        titles = as_str_list(required_field(value, "title", "context"), "context.title")
        body_key = "sentences" if "sentences" in value else "content"
        bodies = as_list(required_field(value, body_key, "context"), f"context.{body_key}")
        if len(titles) != len(bodies):
            raise RecordShapeError(f"context: {len(titles)} titles but {len(bodies)} {body_key}")
        pairs = list(zip(titles, bodies, strict=True))
    else:
        pairs = []
        for i, item in enumerate(as_list(value, "context")):
            pair = as_list(item, f"context[{i}]")
            if len(pair) != 2:
                raise RecordShapeError(f"field 'context[{i}]': expected [title, [sentences]], got {len(pair)} items")
            pairs.append((as_str(pair[0], f"context[{i}][0]"), pair[1]))
    paragraphs = []
    for i, (title, body) in enumerate(pairs):
        if not title.strip():
            raise RecordShapeError(f"context paragraph {i} has an empty title")
        sentences = as_str_list(body, f"context[{i}] sentences", allow_scalar=True)
        paragraphs.append((title, join(sentences)))
    return paragraphs


def _add_context(ctx: ParseContext, paragraphs: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Register the paragraphs in the shared corpus; map each title to its (first) paragraph's key."""
    assert ctx.paragraphs is not None
    by_title: dict[str, tuple[str, str]] = {}
    for title, text in paragraphs:
        by_title.setdefault(title, ctx.paragraphs.add(title, text))
    return by_title


def _gold_keys_for_titles(
    titles: Iterable[str], by_title: Mapping[str, tuple[str, str]], ctx: ParseContext
) -> tuple[tuple[str, str], ...]:
    keys = []
    for title in titles:
        if title in by_title:
            keys.append(by_title[title])
        else:
            # Counted, and reported once for the file by the loader.
            ctx.missing_titles.append(f"record {ctx.number}: {title!r}")
    return tuple(keys)


def _hotpot_common(
    raw: Mapping[str, Any], ctx: ParseContext, join: Callable[[list[str]], str]
) -> tuple[str, str, str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    question = as_str(required_field(raw, "question"), "question")
    answer = as_str(required_field(raw, "answer"), "answer")
    rid = record_id(raw, ctx, question, [answer], ("_id", "id"))
    facts = parse_supporting_facts(required_field(raw, "supporting_facts"))
    by_title = _add_context(ctx, _context_paragraphs(required_field(raw, "context"), join))
    titles = unique_texts(title for title, _ in facts)
    return rid, question, answer, titles, _gold_keys_for_titles(titles, by_title, ctx)


def parse_hotpotqa(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One HotpotQA record, in the official list layout or the Hugging Face column layout."""
    rid, question, answer, titles, gold_keys = _hotpot_common(raw, ctx, _join_hotpotqa)
    record = make_record(
        id=rid,
        question=question.strip(),
        answers=unique_texts([answer]),
        gold_entities=unique_texts([*titles, *answer_entities(answer)]),
        gold_titles=titles,
        hops=2,
        source=ctx.source_for(),
        metadata=extra_fields(raw, ("_id", "id", "question", "answer", "context")),
    )
    return DraftRecord(record, gold_keys, "hotpotqa")


def evidence_entities(value: Any) -> list[str]:
    """Subjects and objects of 2Wiki's evidence triples, from the list form or the column form."""
    if isinstance(value, Mapping):
        subjects = as_str_list(value.get("fact", []), "evidences.fact")
        objects = as_str_list(value.get("entity", []), "evidences.entity")
        if len(subjects) != len(objects):
            raise RecordShapeError(f"evidences: {len(subjects)} facts but {len(objects)} entities")
        return [e for pair in zip(subjects, objects, strict=True) for e in pair]
    entities = []
    for i, triple in enumerate(as_list(value, "evidences")):
        items = as_list(triple, f"evidences[{i}]")
        if len(items) != 3:
            raise RecordShapeError(
                f"field 'evidences[{i}]': expected [subject, relation, object], got {len(items)} items"
            )
        entities += [as_str(items[0], f"evidences[{i}][0]"), as_str(items[2], f"evidences[{i}][2]")]
    return entities


def parse_2wiki(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One 2WikiMultihopQA record: HotpotQA's layout plus evidence triples."""
    rid, question, answer, titles, gold_keys = _hotpot_common(raw, ctx, _join_adaptive)
    evidence = evidence_entities(raw.get("evidences") or [])
    record = make_record(
        id=rid,
        question=question.strip(),
        answers=unique_texts([answer]),
        gold_entities=unique_texts([*titles, *evidence, *answer_entities(answer)]),
        gold_titles=titles,
        hops=len(titles) or None,
        source=ctx.source_for(),
        metadata=extra_fields(raw, ("_id", "id", "question", "answer", "context")),
    )
    return DraftRecord(record, gold_keys, "2wiki")


# ----------------------------------------------------------------------------------- MuSiQue parser


def _musique_paragraphs(value: Any) -> list[tuple[int, str, str, bool]]:
    paragraphs = []
    for i, item in enumerate(as_list(value, "paragraphs")):
        para = as_mapping(item, f"paragraphs[{i}]")
        idx = as_int(para.get("idx", i), f"paragraphs[{i}].idx")
        title = as_str(required_field(para, "title", f"paragraphs[{i}]"), f"paragraphs[{i}].title")
        if not title.strip():
            raise RecordShapeError(f"paragraphs[{i}] has an empty title")
        text = as_str(required_field(para, "paragraph_text", f"paragraphs[{i}]"), f"paragraphs[{i}].paragraph_text")
        paragraphs.append((idx, title, text.strip(), bool(para.get("is_supporting", False))))
    return paragraphs


def parse_decomposition(value: Any) -> list[Mapping[str, Any]]:
    """MuSiQue's `question_decomposition` as a list of step objects."""
    return [
        as_mapping(step, f"question_decomposition[{i}]")
        for i, step in enumerate(as_list(value, "question_decomposition"))
    ]


def decomposition_answers(steps: list[Mapping[str, Any]]) -> list[str]:
    """The answer of each decomposition step, in order."""
    return [
        as_str(step["answer"], f"question_decomposition[{i}].answer")
        for i, step in enumerate(steps)
        if step.get("answer") is not None
    ]


def chain_entities(step_answers: Iterable[str], answer: str) -> tuple[str, ...]:
    """Decomposition answers, deduplicated, with the final answer last."""
    entities = [e for e in unique_texts(step_answers) if e != answer.strip()]
    return unique_texts([*entities, answer])


def _musique_gold_keys(
    steps: list[Mapping[str, Any]], paragraphs: list[tuple[int, str, str, bool]], keys: dict[int, tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    ordered: list[tuple[str, str]] = []
    for i, step in enumerate(steps):
        support = step.get("paragraph_support_idx")
        if support is None:
            continue
        support = as_int(support, f"question_decomposition[{i}].paragraph_support_idx")
        if support not in keys:
            raise RecordShapeError(
                f"question_decomposition[{i}].paragraph_support_idx {support} matches no paragraph "
                f"(paragraph idx values: {sorted(keys)})"
            )
        ordered.append(keys[support])
    # Supporting paragraphs that no step points at still count, after the decomposition's own.
    ordered += [keys[idx] for idx, _, _, supporting in paragraphs if supporting]
    return tuple(dict.fromkeys(ordered))


def parse_musique(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One MuSiQue record: decomposition steps and, where present, paragraphs."""
    assert ctx.paragraphs is not None
    question = as_str(required_field(raw, "question"), "question")
    answer = as_str(required_field(raw, "answer"), "answer")
    aliases = as_str_list(raw.get("answer_aliases") or [], "answer_aliases")
    rid = record_id(raw, ctx, question, [answer, *aliases])
    steps = parse_decomposition(required_field(raw, "question_decomposition"))
    gold_keys: tuple[tuple[str, str], ...] = ()
    # Question-only releases leave the paragraphs out: the record keeps its answers, aliases,
    # decomposition entities and hops, and has no gold documents.
    if raw.get("paragraphs") is not None:
        paragraphs = _musique_paragraphs(raw["paragraphs"])
        keys = {idx: ctx.paragraphs.add(title, text) for idx, title, text, _ in paragraphs}
        gold_keys = _musique_gold_keys(steps, paragraphs, keys)
    record = make_record(
        id=rid,
        question=question.strip(),
        answers=unique_texts([answer, *aliases]),
        gold_entities=chain_entities(decomposition_answers(steps), answer),
        gold_titles=unique_texts(title for title, _ in gold_keys),
        hops=len(steps) or None,
        source=ctx.source_for(),
        metadata=extra_fields(raw, ("id", "question", "answer", "answer_aliases", "paragraphs")),
    )
    return DraftRecord(record, gold_keys, "musique")
