"""The new question layouts through `gym.make`: a gold answer scores 1 and a wrong one 0; a BEIR folder and
a KILT file turn the default judge's labels on, with per-turn retrieval utility; `on_error` and `split`
reach the loader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.errors import ConfigError, DataError
from tests.conftest import TEN_DOCS
from tests.data.test_beir import write_beir
from tests.data.test_kilt import NQ, provenance
from tests.data.test_partial_files import two_wiki


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in TEN_DOCS))
    return path


def play(env, question_id: str, *actions: str) -> list[dict]:
    env.reset(options={"question_id": question_id})
    return [env.step(action)[4] for action in actions]


# --------------------------------------------------------------------------------------------- BEIR


def test_beir_folder_has_labels_and_a_document_reward(tmp_path):
    folder = write_beir(tmp_path / "scifact")
    with pytest.raises(ConfigError, match="answer_reward='doc_recall' or 'doc_ndcg'"):
        gym.make("SearchQA-Custom-v0", data_path=folder, cache_dir=False)
    env = gym.make("SearchQA-Custom-v0", data_path=folder, cache_dir=False, top_k=1, answer_reward="doc_recall")
    assert len(env.unwrapped.corpus) == 3  # the folder's own corpus.jsonl
    # Query 3 judges 7912 (score 2) and 4983 (score 1) relevant.
    first, again, second, answer = play(
        env, "3",
        "<search>ID elements short interspersed elements rodent genomes</search>",
        "<search>SINEs in rodent genomes ID elements</search>",
        "<search>cerebral white matter newborn brain</search>",
        "<answer>done</answer>",
    )
    assert [i["shown"][0]["id"] for i in (first, again, second)] == ["7912", "7912", "4983"]
    assert first["labels_reason"] is None
    assert [i["labels"]["retrieval_utility"] for i in (first, again, second)] == [1, 0, 1]
    assert answer["reward"]["answer"] == 1.0 and answer["reward"]["em"] == 0.0  # 2 of 2 relevant documents shown
    (only_first,) = play(env, "3", "<search>ID elements short interspersed elements rodent genomes</search>")[:1]
    assert only_first["labels"]["retrieval_utility"] == 1
    assert env.step("<answer>x</answer>")[1] == 0.5  # 1 of 2
    ndcg = gym.make("SearchQA-Custom-v0", data_path=folder, cache_dir=False, top_k=1, answer_reward="doc_ndcg")
    *_, end = play(ndcg, "3", "<search>cerebral white matter newborn brain</search>",
                   "<search>ID elements short interspersed elements rodent genomes</search>", "<answer>x</answer>")
    # Shown 4983 (grade 1) then 7912 (grade 2): (1 + 2/log2 3) / (2 + 1/log2 3).
    assert end["reward"]["answer"] == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))


def test_beir_split_reaches_the_loader_through_gym_make(tmp_path):
    folder = write_beir(tmp_path / "nq", qrels={"test": "query-id\tcorpus-id\tscore\n5\t5836\t1\n",
                                                "dev": "query-id\tcorpus-id\tscore\n3\t7912\t1\n"})
    env = gym.make("SearchQA-NQ-v0", data_path=folder, cache_dir=False, answer_reward="doc_recall", split="dev")
    assert [r.id for r in env.unwrapped.records] == ["3"]
    assert [r.id for r in gym.make("SearchQA-NQ-v0", data_path=folder, cache_dir=False,
                                   answer_reward="doc_recall").unwrapped.records] == ["5"]


def test_a_document_reward_needs_gold_documents(corpus, tmp_path):
    path = tmp_path / "nq.jsonl"
    path.write_text(json.dumps({"id": "1", "question": "Who discovered radioactivity?", "golden_answers": ["Becquerel"]}) + "\n")
    with pytest.raises(ConfigError, match="none of the questions has any"):
        gym.make("SearchQA-Custom-v0", data_path=path, corpus_path=corpus, cache_dir=False, answer_reward="doc_ndcg")


# --------------------------------------------------------------------------------------------- KILT

KILT_SOURCE = [
    {"wikipedia_id": "45267196", "wikipedia_title": "Super Bowl 50 halftime show",
     "text": ["Super Bowl 50 halftime show\n",
              "The Super Bowl 50 Halftime Show took place on February 7, 2016, headlined by Coldplay with Beyoncé.\n",
              "Section::::Background.\n", "The halftime show of 2016 was announced in 2015 by the league.\n"]},
    {"wikipedia_id": "999", "wikipedia_title": "Super Bowl XLIX halftime show",
     "text": ["Super Bowl XLIX halftime show\n", "The Super Bowl XLIX halftime show in 2015 was headlined by Katy Perry.\n"]},
]


@pytest.fixture
def kilt_file(tmp_path) -> Path:
    path = tmp_path / "nq-dev-kilt.jsonl"
    path.write_text(json.dumps(NQ) + "\n")
    return path


def test_kilt_file_with_the_kilt_knowledge_source_labels_by_paragraph(kilt_file, tmp_path):
    source = tmp_path / "kilt_knowledgesource.json"
    source.write_text("".join(json.dumps(p) + "\n" for p in KILT_SOURCE))
    env = gym.make("SearchQA-NQ-v0", data_path=kilt_file, corpus_path=source, cache_dir=False, top_k=1)
    gold, other, answer = play(env, NQ["id"], "<search>halftime show headlined by Coldplay</search>",
                               "<search>Katy Perry halftime show 2015</search>", "<answer>Coldplay</answer>")
    assert [i["shown"][0]["id"] for i in (gold, other)] == ["45267196_1", "999_1"]
    assert gold["labels_reason"] is None
    assert [i["labels"]["retrieval_utility"] for i in (gold, other)] == [1, 0]
    assert "doc_ids" in gold["labels"]["analysis"]
    assert answer["reward"]["total"] == 1.0
    *_, wrong = play(env, NQ["id"], "<answer>Katy Perry</answer>")
    assert wrong["reward"]["total"] == 0.0


def test_kilt_file_with_passages_of_another_corpus_labels_by_title(kilt_file, tmp_path):
    # wiki-18 / DPR passages: other ids, the same titles.
    passages = tmp_path / "psgs_w100.tsv"
    passages.write_text(
        "id\ttext\ttitle\n"
        "1\tThe Super Bowl 50 Halftime Show was headlined by Coldplay.\tSuper Bowl 50 halftime show\n"
        "2\tThe Super Bowl XLIX halftime show was headlined by Katy Perry.\tSuper Bowl XLIX halftime show\n"
    )
    env = gym.make("SearchQA-NQ-v0", data_path=kilt_file, corpus_path=passages, cache_dir=False, top_k=1)
    other, gold = play(env, NQ["id"], "<search>Katy Perry halftime show</search>", "<search>halftime show Coldplay</search>")
    assert [i["shown"][0]["id"] for i in (other, gold)] == ["2", "1"]
    assert [i["labels"]["retrieval_utility"] for i in (other, gold)] == [0, 1]
    assert "titles" in gold["labels"]["analysis"]


# ------------------------------------------------------------------------------------ on_error, answers


def test_on_error_reaches_the_loader_through_gym_make(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([two_wiki("A"), two_wiki("B", with_context=False)], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match="on_error='skip'"):
        gym.make("SearchQA-2Wiki-v0", data_path=path, cache_dir=False)
    env = gym.make("SearchQA-2Wiki-v0", data_path=path, cache_dir=False, on_error="skip")
    assert [r.id for r in env.unwrapped.records] == ["A"]
    with pytest.raises(ConfigError, match="on_error"):
        gym.make("SearchQA-Custom-v0", data_path=path, cache_dir=False, on_error="ignore")


LAYOUTS = {
    "strategyqa.json": (json.dumps([{"qid": "q1", "question": "Is Paris in France?", "answer": True}]),
                        None, "Yes", "No"),
    "verl_joined.jsonl": (json.dumps({"id": "v1", "data_source": "nq", "prompt": "Question: who owns it?",
                                      "reward_model": {"ground_truth": "Xiu Li Dai, Dai Yongge"},
                                      "golden_answers": ["Xiu Li Dai", "Dai Yongge"]}) + "\n",
                          "v1", "Dai Yongge", "Xiu Li Dai, Dai Yongge"),
    "export.csv": ("id,question,golden_answers\nc1,Which modes?,['Olivia' 'MFSK']\n", "c1", "MFSK", "['Olivia' 'MFSK']"),
    "nq-dev-kilt.jsonl": (json.dumps(NQ) + "\n", NQ["id"], "Beyoncé", "Bruno Mars"),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_a_gold_answer_scores_one_and_a_wrong_one_zero(name, corpus, tmp_path):
    text, qid, gold, wrong = LAYOUTS[name]
    (tmp_path / name).write_text(text, encoding="utf-8")
    env = gym.make("SearchQA-Custom-v0", data_path=tmp_path / name, corpus_path=corpus, cache_dir=False)
    options = {"index": 0} if qid is None else {"question_id": qid}  # StrategyQA's `qid` is not read as the id
    env.reset(options=options)
    assert env.step(f"<answer>{gold}</answer>")[1] == 1.0
    env.reset(options=options)
    assert env.step(f"<answer>{wrong}</answer>")[1] == 0.0


def test_kilt_provenance_titles_of_a_two_page_question(tmp_path, corpus):
    # A HotpotQA question in KILT's layout: both pages are gold titles, so the default judge labels it.
    row = {"id": "h1", "input": "Which river flows through the capital of Italy?",
           "output": [{"answer": "Tiber", "provenance": [provenance("1", "Rome", 1, 1), provenance("7", "Tiber", 1, 1)]}]}
    path = tmp_path / "hotpotqa-dev-kilt.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = gym.make("SearchQA-HotpotQA-v0", data_path=path, corpus_path=corpus, cache_dir=False, top_k=1)
    (rome,) = play(env, "h1", "<search>capital city of Italy</search>")
    assert rome["shown"][0]["title"] == "Rome" and rome["labels"]["retrieval_utility"] == 1


# ------------------------------------------------------------------------------------- real samples


def hotpot_sample() -> list[dict]:
    from tests.helpers import shared_file

    return json.loads(shared_file("hotpotqa/hotpot_train_sample_official.json").read_text(encoding="utf-8"))


@pytest.mark.shared_data
def test_real_hotpotqa_questions_as_a_beir_folder(tmp_path):
    # BEIR's own HotpotQA is this: paragraphs as the corpus, supporting paragraphs as the qrels.
    rows = hotpot_sample()
    folder = tmp_path / "hotpotqa"
    (folder / "qrels").mkdir(parents=True)
    docs = {title: "".join(sentences).strip() for row in rows for title, sentences in row["context"]}
    ids = {title: f"doc{i}" for i, title in enumerate(docs)}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": ids[t], "title": t, "text": x}) + "\n" for t, x in docs.items()))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": r["_id"], "text": r["question"], "metadata": {"answer": r["answer"]}}) + "\n" for r in rows))
    qrels = {(r["_id"], ids[t]) for r in rows for t, _ in r["supporting_facts"]}
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in sorted(qrels)))
    env = gym.make("SearchQA-HotpotQA-v0", data_path=folder, cache_dir=tmp_path / "cache", answer_reward="doc_recall")
    records = env.unwrapped.records
    assert len(records) == 100 and all(r.answers == (row["answer"],) for r, row in zip(records, rows))
    utilities = []
    for record in records[:20]:
        search, answer = play(env, record.id, f"<search>{record.question}</search>", "<answer>x</answer>")
        found = {s["id"] for s in search["shown"]} & set(record.gold_docs)
        assert search["labels_reason"] is None
        assert search["labels"]["retrieval_utility"] == int(bool(found))
        assert answer["reward"]["answer"] == len(found) / len(record.gold_docs)
        utilities.append(search["labels"]["retrieval_utility"])
    assert 0 < sum(utilities) < 20


@pytest.mark.shared_data
def test_real_hotpotqa_questions_in_kilt_layout_against_passages_with_titles(tmp_path):
    rows = hotpot_sample()
    docs = {title: "".join(sentences).strip() for row in rows for title, sentences in row["context"]}
    page = {title: str(10_000 + i) for i, title in enumerate(docs)}  # KILT's page ids, which the passages lack
    kilt = tmp_path / "hotpotqa-train-kilt.jsonl"
    kilt.write_text("".join(json.dumps({
        "id": r["_id"], "input": r["question"],
        "output": [{"answer": r["answer"]}, {"provenance": [provenance(page[t], t, 1, 1) for t, _ in r["supporting_facts"]]}],
    }) + "\n" for r in rows))
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(docs.items())))
    env = gym.make("SearchQA-HotpotQA-v0", data_path=kilt, corpus_path=passages, cache_dir=tmp_path / "cache")
    records = env.unwrapped.records
    assert [r.answers for r in records] == [(row["answer"],) for row in rows]
    assert [r.gold_titles for r in records] == [tuple(dict.fromkeys(t for t, _ in row["supporting_facts"])) for row in rows]
    record = records[0]
    first, answer = play(env, record.id, f"<search>{record.gold_titles[0]}</search>", f"<answer>{record.answers[0]}</answer>")
    assert first["labels_reason"] is None and "titles" in first["labels"]["analysis"]
    titles = {s["title"] for s in first["shown"]}
    assert first["labels"]["retrieval_utility"] == int(bool(titles & set(record.gold_titles)))
    assert answer["reward"]["total"] == 1.0


def test_on_error_skip_applies_to_the_corpus_file_too(tmp_path):
    questions = tmp_path / "nq.jsonl"
    questions.write_text(json.dumps({"id": "1", "question": "Which river flows through Rome?", "golden_answers": ["Tiber"]}) + "\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d7", "title": "Tiber", "text": "The Tiber flows through Rome."}) + "\n{not json\n")
    with pytest.raises(DataError, match="corpus.jsonl, record line 2"):
        gym.make("SearchQA-NQ-v0", data_path=questions, corpus_path=corpus, cache_dir=False)
    env = gym.make("SearchQA-NQ-v0", data_path=questions, corpus_path=corpus, cache_dir=False, on_error="skip")
    assert [d.id for d in env.unwrapped.corpus] == ["d7"]
