"""KILT's task files (NQ, TriviaQA, HotpotQA, FEVER, ... as `*-kilt.jsonl`): answers and gold provenance.

A KILT record is `{id, input, output: [{answer, provenance: [{wikipedia_id, title, start_paragraph_id,
end_paragraph_id, ...}]}], meta}`. Its provenance points into the KILT knowledge source (Wikipedia of
2019-08-01), where a page is keyed by `wikipedia_id` and its text is a list of paragraphs. So a record
gets:

- `answers`: the non-empty `answer` of each output, in order (outputs that carry only provenance have
  none);
- `gold_docs`: `"{wikipedia_id}_{paragraph}"` for every paragraph of every provenance range, the ids
  `searchgym.corpus` gives the paragraphs of a KILT knowledge source file (`searchgym.corpus.kilt`);
- `gold_titles`: the provenance titles, which is what matches a corpus of other passages with titles
  (wiki-18, DPR's `psgs_w100.tsv`): the judge falls back to titles where the corpus holds none of the
  gold paragraph ids;
- `gold_entities`: the titles, then the first answer (yes/no names no entity); `hops` 2 for HotpotQA.

KILT's TriviaQA files carry question ids without the questions, and its test files carry no outputs:
both are refused with a message that says how to get the missing part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from searchgym.corpus.kilt import kilt_doc_id
from searchgym.data.fields import (
    RecordShapeError,
    answer_entities,
    as_id,
    as_int,
    as_list,
    as_mapping,
    as_str,
    extra_fields,
    make_record,
    unique_texts,
)
from searchgym.data.parsers import DraftRecord, ParseContext, record_id

MAX_RANGE = 1000
"""The most paragraphs one provenance range may span; a longer range is a broken annotation."""


def _question(raw: Mapping[str, Any]) -> str:
    if raw.get("input") is None or (isinstance(raw["input"], str) and not raw["input"].strip()):
        raise RecordShapeError(
            "no question: the record has no 'input'. KILT's TriviaQA files carry question ids only: fill 'input' "
            "with TriviaQA's question of the same question_id (the Hugging Face kilt_tasks card shows how)"
        )
    return as_str(raw["input"], "input")


def _outputs(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if raw.get("output") is None:
        raise RecordShapeError(
            "no 'output': KILT's test files (…test_without_answers-kilt.jsonl) carry no answers or provenance; "
            "use the dev split"
        )
    return [as_mapping(o, f"output[{i}]") for i, o in enumerate(as_list(raw["output"], "output"))]


def _provenance(outputs: list[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(gold document ids, gold titles) of every output's provenance, in order, without repeats."""
    docs: dict[str, None] = {}
    titles: list[str] = []
    for i, output in enumerate(outputs):
        for j, item in enumerate(as_list(output.get("provenance") or [], f"output[{i}].provenance")):
            where = f"output[{i}].provenance[{j}]"
            prov = as_mapping(item, where)
            if prov.get("wikipedia_id") is None:
                raise RecordShapeError(f"missing required field 'wikipedia_id' in {where} (found keys: {sorted(prov)})")
            page = as_id(prov["wikipedia_id"], f"{where}.wikipedia_id")
            if isinstance(prov.get("title"), str):
                titles.append(prov["title"])
            for paragraph in _paragraphs(prov, where):
                docs.setdefault(kilt_doc_id(page, paragraph), None)
    return list(docs), titles


def _paragraphs(prov: Mapping[str, Any], where: str) -> range:
    """The provenance's paragraph range; empty where it gives none (some tasks cite whole pages)."""
    if prov.get("start_paragraph_id") is None:
        return range(0)
    start = as_int(prov["start_paragraph_id"], f"{where}.start_paragraph_id")
    end = as_int(prov.get("end_paragraph_id", start), f"{where}.end_paragraph_id")
    if start < 0 or end < start or end - start >= MAX_RANGE:
        raise RecordShapeError(f"{where}: paragraph range {start}..{end} is not a range of paragraphs")
    return range(start, end + 1)


def parse_kilt(raw: Mapping[str, Any], ctx: ParseContext) -> DraftRecord:
    """One KILT record (see the module docstring for what it yields)."""
    question = _question(raw)
    outputs = _outputs(raw)
    answers = unique_texts(
        as_str(o["answer"], f"output[{i}].answer") for i, o in enumerate(outputs) if o.get("answer") is not None
    )
    if not answers:
        raise RecordShapeError("no gold answer: no output has a non-empty 'answer'")
    gold_docs, titles = _provenance(outputs)
    gold_titles = unique_texts(titles)
    source = ctx.source_for()
    record = make_record(
        id=record_id(raw, ctx, question, answers),
        question=question.strip(),
        answers=answers,
        gold_entities=unique_texts([*gold_titles, *answer_entities(answers[0])]),
        gold_docs=tuple(gold_docs),
        gold_titles=gold_titles,
        hops=2 if ctx.named_dataset == "hotpotqa" else None,
        source=source,
        metadata=extra_fields(raw, ("id", "input", "output")),
    )
    return DraftRecord(record, dataset=ctx.named_dataset)
