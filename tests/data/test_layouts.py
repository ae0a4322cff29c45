"""Every question-file layout the loaders accept, each written by the test into tmp_path in the shape its
users have on disk (official releases, Hugging Face exports, FlashRAG, Search-R1 / verl), and checked
record by record: count, questions, answers with aliases, gold entities and hops.

These run in a fresh clone; `test_loaders.py` also reads the real samples when they are present.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path

import pytest

from searchgym.data import load_dataset_file
from searchgym.errors import DataError
from searchgym.protocol import SEARCH_R1_TEMPLATE


def derived(question: str, *answers: str) -> str:
    return "sha1:" + hashlib.sha1("\x1f".join([question, *answers]).encode()).hexdigest()[:12]


def summary(ds) -> list[tuple]:
    return [(r.id, r.question, r.answers, r.gold_entities, r.hops) for r in ds.records]


# ------------------------------------------------------------------------------------------ HotpotQA

HOTPOT_OFFICIAL = [
    {
        "supporting_facts": [["Gallu", 0], ["Lilu (mythology)", 0]],
        "level": "easy",
        "question": "If Gallu is a demon, Lilu is what?",
        "context": [
            ["Gallu", ["Gallu is a demon of the underworld.", " It drags victims below."]],
            ["Lilu (mythology)", ["A lilu is a spirit in Mesopotamian belief."]],
            ["Demon Dice", ["Demon Dice is a dice game.", " Players build demons."]],
        ],
        "answer": "a spirit",
        "_id": "5a77ec115542992a6e59dff7",
        "type": "bridge",
    },
    {
        "supporting_facts": [["Ed Wood", 0], ["Scott Derrickson", 0]],
        "level": "hard",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "context": [
            ["Scott Derrickson", ["Scott Derrickson is an American director."]],
            ["Ed Wood", ["Ed Wood was an American filmmaker."]],
        ],
        "answer": "yes",
        "_id": "5a8b57f25542995d1e6f1371",
        "type": "comparison",
    },
]


def test_hotpotqa_official_layout(tmp_path):
    # The official release is a JSON list pretty-printed with four spaces, keys in no fixed order.
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(HOTPOT_OFFICIAL, indent=4), encoding="utf-8")
    ds = load_dataset_file(path)
    assert (ds.format, len(ds.records), len(ds.corpus), dict(ds.datasets)) == ("hotpotqa", 2, 5, {"hotpotqa": 2})
    assert summary(ds) == [
        ("5a77ec115542992a6e59dff7", "If Gallu is a demon, Lilu is what?", ("a spirit",), ("Gallu", "Lilu (mythology)", "a spirit"), 2),
        ("5a8b57f25542995d1e6f1371", "Were Scott Derrickson and Ed Wood of the same nationality?", ("yes",), ("Ed Wood", "Scott Derrickson"), 2),
    ]
    assert ds.records[0].gold_docs == ("Gallu", "Lilu (mythology)")
    assert ds.corpus.get("Gallu").text == "Gallu is a demon of the underworld. It drags victims below."


def test_hotpotqa_official_layout_without_ids(tmp_path, caplog):
    rows = [{k: v for k, v in row.items() if k != "_id"} for row in HOTPOT_OFFICIAL]
    path = tmp_path / "hotpot_train.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(path)
    assert [r.id for r in ds.records] == [derived(r["question"], r["answer"]) for r in rows]
    assert [r.gold_docs for r in ds.records] == [("Gallu", "Lilu (mythology)"), ("Ed Wood", "Scott Derrickson")]
    assert [m.getMessage() for m in caplog.records if m.levelname == "WARNING"] == [
        f"{path}: 2 records have no id; each gets 'sha1:' + a hash of its question and answers (stable when records "
        "are added or reordered)"
    ]


def hotpot_hf(row: dict) -> dict:
    """A row as Hugging Face's `hotpot_qa` export writes it: `id`, and column-wise facts and context."""
    return {
        "id": row["_id"],
        "question": row["question"],
        "answer": row["answer"],
        "type": row["type"],
        "level": row["level"],
        "supporting_facts": {"title": [t for t, _ in row["supporting_facts"]], "sent_id": [i for _, i in row["supporting_facts"]]},
        "context": {"title": [t for t, _ in row["context"]], "sentences": [s for _, s in row["context"]]},
    }


@pytest.mark.parametrize("container", ["jsonl", "parquet"])
def test_hotpotqa_hugging_face_export(tmp_path, container):
    rows = [hotpot_hf(r) for r in HOTPOT_OFFICIAL]
    path = tmp_path / f"train.{container}"
    if container == "parquet":
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = load_dataset_file(path)
    official = tmp_path / "official.json"
    official.write_text(json.dumps(HOTPOT_OFFICIAL))
    assert ds.format == "hotpotqa_hf"
    assert summary(ds) == summary(load_dataset_file(official))
    assert [d.text for d in ds.corpus] == [d.text for d in load_dataset_file(official).corpus]


# ------------------------------------------------------------------------------------------- MuSiQue

MUSIQUE = {
    "id": "3hop1__9285_5188_23307",
    "paragraphs": [
        {"idx": 0, "title": "Green", "paragraph_text": "Green is the debut album of Steve Hillage.", "is_supporting": True},
        {"idx": 1, "title": "Steve Hillage", "paragraph_text": "Steve Hillage was born in London.", "is_supporting": True},
        {"idx": 2, "title": "London", "paragraph_text": "London lies on the River Thames.", "is_supporting": True},
        {"idx": 3, "title": "Paris", "paragraph_text": "Paris lies on the Seine.", "is_supporting": False},
    ],
    "question": "Which river flows through the birthplace of the performer of Green?",
    "question_decomposition": [
        {"id": 9285, "question": "Green >> performer", "answer": "Steve Hillage", "paragraph_support_idx": 0},
        {"id": 5188, "question": "#1 >> place of birth", "answer": "London", "paragraph_support_idx": 1},
        {"id": 23307, "question": "Which river flows through #2?", "answer": "River Thames", "paragraph_support_idx": 2},
    ],
    "answer": "River Thames",
    "answer_aliases": ["Thames", "the Thames"],
    "answerable": True,
}
MUSIQUE_2HOP = {
    "id": "2hop__1_2",
    "question": "Who founded the maker of X?",
    "question_decomposition": [
        {"id": 1, "question": "X >> manufacturer", "answer": "Acme", "paragraph_support_idx": None},
        {"id": 2, "question": "Who founded #1?", "answer": "Jane Doe", "paragraph_support_idx": None},
    ],
    "answer": "Jane Doe",
    "answer_aliases": [],
    "answerable": True,
}


def test_musique_official_layout(tmp_path):
    path = tmp_path / "musique_ans_v1.0_dev.jsonl"
    path.write_text(json.dumps(MUSIQUE) + "\n", encoding="utf-8")
    ds = load_dataset_file(path)
    assert (ds.format, len(ds.corpus)) == ("musique", 4)
    assert summary(ds) == [
        (
            "3hop1__9285_5188_23307",
            MUSIQUE["question"],
            ("River Thames", "Thames", "the Thames"),
            ("Steve Hillage", "London", "River Thames"),
            3,
        )
    ]
    assert ds.records[0].gold_docs == ("Green", "Steve Hillage", "London")


def test_musique_context_ids_are_deterministic_and_numbered(tmp_path):
    # Two records with different paragraphs under one title, as real MuSiQue files have.
    second = json.loads(json.dumps(MUSIQUE))
    second["id"] = "3hop1__x"
    second["paragraphs"][1]["paragraph_text"] = "Steve Hillage played guitar in Gong."
    path = tmp_path / "musique.json"
    path.write_text(json.dumps([MUSIQUE, second]), encoding="utf-8")
    a, b = load_dataset_file(path), load_dataset_file(path)
    assert [d.id for d in a.corpus] == ["Green", "Steve Hillage", "London", "Paris", "Steve Hillage (2)"]
    assert [d.id for d in a.corpus] == [d.id for d in b.corpus] and a.corpus.content_hash == b.corpus.content_hash
    assert a.records[1].gold_docs == ("Green", "Steve Hillage (2)", "London")
    assert a.corpus.get("Steve Hillage (2)").title == "Steve Hillage"


def test_musique_question_only_release_keeps_aliases_entities_and_hops(tmp_path):
    # Without `paragraphs`, the file used to be read as a plain question/answer file: aliases, the
    # decomposition's intermediate answers and hops were lost without a word.
    rows = [{k: v for k, v in MUSIQUE.items() if k != "paragraphs"}, MUSIQUE_2HOP]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    ds = load_dataset_file(path)
    assert (ds.format, ds.corpus, dict(ds.datasets)) == ("musique", None, {"musique": 2})
    assert summary(ds) == [
        (
            "3hop1__9285_5188_23307",
            MUSIQUE["question"],
            ("River Thames", "Thames", "the Thames"),
            ("Steve Hillage", "London", "River Thames"),
            3,
        ),
        ("2hop__1_2", "Who founded the maker of X?", ("Jane Doe",), ("Acme", "Jane Doe"), 2),
    ]
    assert all(r.gold_docs == () and r.source == "musique" for r in ds.records)


# ----------------------------------------------------------------------- FlashRAG (NQ, TriviaQA, PopQA)


def test_flashrag_nq_triviaqa_and_popqa(tmp_path):
    folder = tmp_path / "FlashRAG_datasets"
    for name in ("nq", "triviaqa", "popqa"):
        (folder / name).mkdir(parents=True)
    (folder / "nq" / "test.jsonl").write_text(
        json.dumps({"id": "test_0", "question": "who got the first nobel prize in physics", "golden_answers": ["Wilhelm Conrad Röntgen"]}, ensure_ascii=False)
        + "\n"
        + json.dumps({"id": "test_2", "question": "which mode is used for short wave broadcast service", "golden_answers": ["Olivia", "MFSK"]})
        + "\n",
        encoding="utf-8",
    )
    (folder / "triviaqa" / "test.jsonl").write_text(
        json.dumps({"id": "test_6654", "question": "Cleeve Hill is the highest point in which range of hills?", "golden_answers": ["Cotswold Hills", "Cotswolds", "The Cotswolds"]})
        + "\n",
        encoding="utf-8",
    )
    popqa_meta = {
        "subj": "Shore Leave", "prop": "screenwriter", "obj": "Theodore Sturgeon", "subj_id": 1140735, "prop_id": 533,
        "obj_id": 816096, "s_aliases": '["SL"]', "o_aliases": '["Ted Sturgeon"]', "s_pop": 442, "o_pop": 7851,
    }
    (folder / "popqa" / "test.jsonl").write_text(
        json.dumps({"id": "test_8203", "question": "Who was the screenwriter for Shore Leave?", "metadata": popqa_meta,
                    "golden_answers": ["Theodore Sturgeon", "Ted Sturgeon"]}) + "\n",
        encoding="utf-8",
    )
    nq = load_dataset_file(folder / "nq" / "test.jsonl")
    assert (nq.format, dict(nq.datasets)) == ("flashrag", {"": 2})
    assert [(r.id, r.answers, r.gold_entities, r.source) for r in nq.records] == [
        ("test_0", ("Wilhelm Conrad Röntgen",), ("Wilhelm Conrad Röntgen",), "nq"),
        ("test_2", ("Olivia", "MFSK"), ("Olivia",), "nq"),
    ]
    (trivia,) = load_dataset_file(folder / "triviaqa" / "test.jsonl").records
    assert (trivia.answers, trivia.gold_entities, trivia.source) == (("Cotswold Hills", "Cotswolds", "The Cotswolds"), ("Cotswold Hills",), "triviaqa")
    popqa = load_dataset_file(folder / "popqa" / "test.jsonl")
    assert dict(popqa.datasets) == {"popqa": 1}
    (record,) = popqa.records
    assert (record.answers, record.gold_entities, record.hops) == (("Theodore Sturgeon", "Ted Sturgeon"), ("Shore Leave", "Theodore Sturgeon"), None)
    assert record.metadata["prop"] == "screenwriter" and record.source == "popqa"


def test_flashrag_metadata_of_an_unknown_shape_is_a_counted_warning(tmp_path, caplog):
    rows = [
        {"id": str(i), "question": f"q{i}?", "golden_answers": ["a"], "metadata": {"supporting_facts": "not a list"}}
        for i in range(3)
    ]
    path = tmp_path / "hotpotqa_dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(path)
    assert [r.gold_entities for r in ds.records] == [("a",)] * 3
    (warning,) = [m.getMessage() for m in caplog.records if m.levelname == "WARNING"]
    assert "3 records carry multi-hop metadata" in warning and "supporting_facts" in warning


# -------------------------------------------------------------------------------- Search-R1 and verl


def searchr1_row(i: int, question: str, answers: list[str], source: str = "nq") -> dict:
    """A row of Search-R1's own data files (data/nq_search/test.parquet)."""
    return {
        "id": f"test_{i}",
        "question": question,
        "golden_answers": answers,
        "data_source": source,
        "prompt": [{"content": SEARCH_R1_TEMPLATE.format(question=question), "role": "user"}],
        "ability": "fact-reasoning",
        "reward_model": {"ground_truth": {"target": answers}, "style": "rule"},
        "extra_info": {"index": i, "split": "test"},
    }


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_search_r1_parquet(tmp_path):
    rows = [
        searchr1_row(0, "who got the first nobel prize in physics?", ["Wilhelm Conrad Röntgen"]),
        searchr1_row(1, "who is the owner of reading football club?", ["Xiu Li Dai", "Dai Yongge"]),
    ]
    ds = load_dataset_file(write_parquet(tmp_path / "test.parquet", rows))
    assert (ds.format, dict(ds.datasets)) == ("searchr1", {"nq": 2})
    assert summary(ds) == [
        ("test_0", "who got the first nobel prize in physics?", ("Wilhelm Conrad Röntgen",), ("Wilhelm Conrad Röntgen",), None),
        ("test_1", "who is the owner of reading football club?", ("Xiu Li Dai", "Dai Yongge"), ("Xiu Li Dai",), None),
    ]
    assert all(r.source == "nq" and "prompt" not in r.metadata for r in ds.records)


def test_verl_parquet_with_the_question_only_in_the_prompt_or_extra_info(tmp_path):
    # verl-based agentic-RAG repositories keep the question in the chat prompt and/or extra_info.
    in_prompt = searchr1_row(0, "who wrote hamlet?", ["Shakespeare"], "hotpotqa")
    del in_prompt["id"], in_prompt["question"], in_prompt["golden_answers"]
    in_extra = searchr1_row(1, "ignored", ["Paris", "City of Light"], "hotpotqa")
    del in_extra["id"], in_extra["question"], in_extra["golden_answers"]
    in_extra["prompt"] = [{"role": "system", "content": "You search."}, {"role": "user", "content": "Find it: where is the Louvre?"}]
    in_extra["extra_info"] = {"index": 7, "split": "train", "question": "where is the Louvre?"}
    ds = load_dataset_file(write_parquet(tmp_path / "train.parquet", [in_prompt, in_extra]))
    assert ds.format == "searchr1"
    assert summary(ds) == [
        ("0", "who wrote hamlet?", ("Shakespeare",), ("Shakespeare",), None),
        ("7", "where is the Louvre?", ("Paris", "City of Light"), ("Paris",), None),
    ]
    assert [r.source for r in ds.records] == ["hotpotqa", "hotpotqa"]
    lost = dict(in_prompt, prompt=[{"role": "user", "content": "Say who wrote hamlet"}])
    with pytest.raises(DataError, match="no question") as e:
        load_dataset_file(write_parquet(tmp_path / "bad.parquet", [lost]))
    assert "row 0" in str(e.value)


# ---------------------------------------------------------------------------- PopQA's own release

POPQA_COLUMNS = ["id", "subj", "prop", "obj", "subj_id", "prop_id", "obj_id", "s_aliases", "o_aliases", "s_uri",
                 "o_uri", "s_wiki_title", "o_wiki_title", "s_pop", "o_pop", "question", "possible_answers"]
POPQA_ROWS = [
    ["4222362", "George Rankin", "occupation", "politician", 1850162, 22, 2834605, "[]", '["political leader"]',
     "http://www.wikidata.org/entity/Q5543720", "http://www.wikidata.org/entity/Q82955", "George Rankin", "Politician",
     142, 25692, "What is George Rankin's occupation?", '["politician", "political leader", "political figure"]'],
    ["2954407", "Easy Living", "composer", "Ralph Rainger", 95385, 639, 1180968, '["Long living"]', '["Ralph Reichenthal"]',
     "http://www.wikidata.org/entity/Q1163555", "http://www.wikidata.org/entity/Q364163", "Easy Living (1937 film)",
     "Ralph Rainger", 1381, 922, "Who was the composer of Easy Living?", '["Ralph Rainger", "Ralph Reichenthal"]'],
]
POPQA_EXPECTED = [
    ("4222362", "What is George Rankin's occupation?", ("politician", "political leader", "political figure"), ("George Rankin", "politician"), None),
    ("2954407", "Who was the composer of Easy Living?", ("Ralph Rainger", "Ralph Reichenthal"), ("Easy Living", "Ralph Rainger"), None),
]


@pytest.mark.parametrize("layout", ["popQA.tsv", "popqa.csv", "popqa.json", "popqa.jsonl", "popqa.tsv.gz"])
def test_popqa_release_in_every_container(tmp_path, layout):
    path = tmp_path / layout
    dicts = [dict(zip(POPQA_COLUMNS, row, strict=True)) for row in POPQA_ROWS]
    if ".tsv" in layout or ".csv" in layout:
        opener = gzip.open if layout.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh, delimiter="\t" if ".tsv" in layout else ",")
            writer.writerow(POPQA_COLUMNS)
            writer.writerows(POPQA_ROWS)
    elif layout.endswith(".json"):
        path.write_text(json.dumps(dicts), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(d) + "\n" for d in dicts), encoding="utf-8")
    ds = load_dataset_file(path)
    assert (ds.format, dict(ds.datasets)) == ("popqa", {"popqa": 2})
    assert summary(ds) == POPQA_EXPECTED
    record = ds.records[1]
    assert record.source == "popqa" and record.metadata["prop"] == "composer"
    assert str(record.metadata["s_pop"]) == "1381"


def test_popqa_bad_possible_answers_names_the_record(tmp_path):
    path = tmp_path / "popqa.tsv"
    row = list(POPQA_ROWS[0])
    row[-1] = '["politician", '
    path.write_text("\t".join(POPQA_COLUMNS) + "\n" + "\t".join(map(str, row)) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="possible_answers") as e:
        load_dataset_file(path)
    assert "line 2" in str(e.value)


# ------------------------------------------------------------- TriviaQA (HF), Bamboogle (CSV), NQ-open


def test_triviaqa_hugging_face_export(tmp_path):
    row = {
        "question": "Which country invaded the Falkland Islands in April 1982?",
        "question_id": "tc_1553",
        "question_source": "http://www.quizballs.com/",
        "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
        "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [], "search_context": []},
        "answer": {"aliases": ["Argentina", "Argentine republic", "República Argentina"], "normalized_aliases": ["argentina"],
                   "matched_wiki_entity_name": "", "normalized_matched_wiki_entity_name": "", "normalized_value": "argentina",
                   "type": "WikipediaEntity", "value": "Argentina"},
    }
    path = tmp_path / "validation.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    ds = load_dataset_file(path)
    assert (ds.format, dict(ds.datasets)) == ("nq_open", {"triviaqa": 1})
    assert summary(ds) == [
        ("tc_1553", row["question"], ("Argentina", "Argentine republic", "República Argentina"), ("Argentina",), None)
    ]
    assert ds.records[0].source == "triviaqa"


def test_bamboogle_csv(tmp_path):
    path = tmp_path / "Bamboogle Prerelease - Sheet1.csv"
    path.write_text(
        'Question,Answer\n"Who was president of the United States in the year that Citibank was founded?",james madison\n'
        '"What rocket was the first spacecraft that ever approached Uranus launched on?","Titan IIIE"\n',
        encoding="utf-8",
    )
    ds = load_dataset_file(path)
    assert ds.format == "nq_open"
    q0 = "Who was president of the United States in the year that Citibank was founded?"
    q1 = "What rocket was the first spacecraft that ever approached Uranus launched on?"
    assert summary(ds) == [
        (derived(q0, "james madison"), q0, ("james madison",), ("james madison",), None),
        (derived(q1, "Titan IIIE"), q1, ("Titan IIIE",), ("Titan IIIE",), None),
    ]
    assert [r.source for r in ds.records] == ["bamboogle", "bamboogle"]


def test_bamboogle_hugging_face_export_with_capitalised_columns(tmp_path):
    path = tmp_path / "bamboogle" / "test.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"Question": "Who founded the company that makes the iPod?", "Answer": "Steve Jobs"}) + "\n")
    ds = load_dataset_file(path)
    q = "Who founded the company that makes the iPod?"
    assert (ds.format, summary(ds)) == ("nq_open", [(derived(q, "Steve Jobs"), q, ("Steve Jobs",), ("Steve Jobs",), None)])
    assert ds.records[0].source == "bamboogle"


def test_2wiki_hugging_face_export_with_column_wise_context(tmp_path):
    row = {
        "id": "a1",
        "type": "compositional",
        "question": "Who is the mother of the director of film Polish-Russian War?",
        "answer": "Małgorzata Braunek",
        "supporting_facts": {"title": ["Polish-Russian War (film)", "Xawery Żuławski"], "sent_id": [1, 2]},
        "context": {
            "title": ["Xawery Żuławski", "Polish-Russian War (film)"],
            "content": [["Xawery Żuławski is a Polish film director.", "In 1995 he graduated.", "His mother was Małgorzata Braunek."],
                        ["Polish-Russian War is a 2009 Polish film.", "It was directed by Xawery Żuławski."]],
        },
        "evidences": [["Polish-Russian War", "director", "Xawery Żuławski"], ["Xawery Żuławski", "mother", "Małgorzata Braunek"]],
    }
    path = tmp_path / "2wikimultihopqa_dev.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    ds = load_dataset_file(path)
    assert (ds.format, dict(ds.datasets)) == ("2wiki", {"2wiki": 1})
    assert summary(ds) == [
        ("a1", row["question"], ("Małgorzata Braunek",),
         ("Polish-Russian War (film)", "Xawery Żuławski", "Polish-Russian War", "Małgorzata Braunek"), 2)
    ]
    assert ds.records[0].gold_docs == ("Polish-Russian War (film)", "Xawery Żuławski")
    assert ds.corpus.get("Xawery Żuławski").text == "Xawery Żuławski is a Polish film director. In 1995 he graduated. His mother was Małgorzata Braunek."


def test_csv_rows_with_missing_fields_name_the_line(tmp_path):
    path = tmp_path / "bamboogle.csv"
    path.write_text("Question,Answer\nWho?,x\nWhat?\n", encoding="utf-8")
    with pytest.raises(DataError, match="expected 2 comma-separated fields") as e:
        load_dataset_file(path)
    assert "line 3" in str(e.value)


# ------------------------------------------------------------------------ detection and skipping


def test_a_record_fitting_two_formats_is_an_error_listing_both(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"id": "1", "question": "q?", "answer": "a", "golden_answers": ["a", "b"]}) + "\n")
    with pytest.raises(DataError, match="ambiguous dataset format") as e:
        load_dataset_file(path)
    assert "flashrag" in str(e.value) and "nq_open" in str(e.value) and "format=" in str(e.value)
    assert load_dataset_file(path, format="flashrag").records[0].answers == ("a", "b")


def test_on_error_skip_counts_what_it_leaves_out(tmp_path, caplog):
    rows = [
        {"id": "1", "question": "q1?", "golden_answers": ["a"]},
        {"id": "2", "question": "", "golden_answers": ["a"]},
        {"id": "3", "question": "q3?", "golden_answers": 5},
        {"id": "1", "question": "q4?", "golden_answers": ["b"]},
        {"id": "5", "question": "q5?", "golden_answers": ["c"]},
    ]
    path = tmp_path / "nq.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "6", "question": "q6?", golden_answers\n')
    with pytest.raises(DataError, match="empty question") as e:
        load_dataset_file(path)
    assert "line 2" in str(e.value)
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(path, on_error="skip")
    assert [r.id for r in ds.records] == ["1", "5"] and ds.skipped == 4
    (warning,) = [m.getMessage() for m in caplog.records if m.levelname == "WARNING"]
    assert "skipped 4 of 6 records" in warning and "line 2" in warning
    # Unreadable lines before the first good one are skipped too; detection uses the first good record.
    csv_path = tmp_path / "bamboogle.csv"
    csv_path.write_text("Question,Answer\nWho?\nWhat?,x\nWhy?,y,z\n")
    ds = load_dataset_file(csv_path, on_error="skip")
    assert (ds.format, [r.answers for r in ds.records], ds.skipped) == ("nq_open", [("x",)], 2)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(DataError, match="none of the file's 1 records can be read"):
        load_dataset_file(bad, on_error="skip")


def test_tsv_that_is_not_utf8_names_the_line_and_column(tmp_path):
    path = tmp_path / "popqa.tsv"
    path.write_bytes("id\tquestion\tanswer\n1\tWho?\tx\n2\tQui est-ce ?\tcaf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match="UTF-8") as e:
        load_dataset_file(path)
    # "2<TAB>Qui est-ce ?<TAB>caf" is 18 bytes: the bad byte is the 19th of line 3.
    assert "line 3" in str(e.value) and "column 19" in str(e.value)
