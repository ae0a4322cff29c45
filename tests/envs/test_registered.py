"""Every registered id builds from local files and passes Gymnasium's checker; real samples load."""

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import searchgym
from searchgym.errors import ConfigError, DataError, DataNotFoundError
from tests.conftest import TEN_DOCS
from tests.helpers import shared_file

HOTPOT = [
    {
        "_id": "h1",
        "question": "Which river flows through the capital of Italy?",
        "answer": "Tiber",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["Rome", 0], ["Tiber", 0]],
        "context": [["Rome", ["Rome is the capital city of Italy."]], ["Tiber", ["The Tiber flows through Rome."]], ["Seine", ["The Seine flows through Paris."]]],
    },
    {
        "_id": "h2",
        "question": "Is the Seine in France?",
        "answer": "yes",
        "type": "comparison",
        "level": "easy",
        "supporting_facts": [["Seine", 0]],
        "context": [["Seine", ["The Seine flows through Paris."]], ["Paris", ["Paris is the capital of France."]]],
    },
]
MUSIQUE = [
    {
        "id": "m1",
        "question": "Which river flows through the capital of Italy?",
        "answer": "Tiber",
        "answer_aliases": ["Tevere"],
        "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "Rome", "paragraph_text": "Rome is the capital city of Italy.", "is_supporting": True},
            {"idx": 1, "title": "Tiber", "paragraph_text": "The Tiber flows through Rome.", "is_supporting": True},
            {"idx": 2, "title": "Seine", "paragraph_text": "The Seine flows through Paris.", "is_supporting": False},
        ],
        "question_decomposition": [
            {"id": 1, "question": "capital of Italy", "answer": "Rome", "paragraph_support_idx": 0},
            {"id": 2, "question": "river through #1", "answer": "Tiber", "paragraph_support_idx": 1},
        ],
    }
]
TWOWIKI = [dict(HOTPOT[0], type="compositional", evidences=[["Italy", "capital", "Rome"], ["Tiber", "located in", "Rome"]])]
FLASHRAG = [
    {"id": "f1", "question": "Who discovered radioactivity?", "golden_answers": ["Henri Becquerel", "Becquerel"]},
    {"id": "f2", "question": "Which river flows through Berlin?", "golden_answers": ["Spree"]},
]
POPQA = [
    {
        "id": "p1",
        "question": "Who discovered Radioactivity?",
        "golden_answers": ["Henri Becquerel", "Becquerel"],
        "metadata": {"subj": "Radioactivity", "prop": "discoverer or inventor", "obj": "Henri Becquerel", "s_pop": 5001},
    }
]


@pytest.fixture
def local_files(tmp_path):
    def write(name, records, lines=False):
        path = tmp_path / name
        text = "".join(json.dumps(r) + "\n" for r in records) if lines else json.dumps(records)
        path.write_text(text)
        return str(path)

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "contents": d.contents}) + "\n" for d in TEN_DOCS))
    return {
        "hotpot": write("hotpot_dev.json", HOTPOT),
        "musique": write("musique_dev.json", MUSIQUE),
        "2wiki": write("2wiki_dev.json", TWOWIKI),
        "flashrag": write("questions.jsonl", FLASHRAG, lines=True),
        "popqa": write("questions_p.jsonl", POPQA, lines=True),
        "corpus": str(corpus),
    }


def make_kwargs(env_id, files):
    """Keyword arguments that build `env_id` from the local fixture files."""
    needs_corpus = {"data_path": files["flashrag"], "corpus_path": files["corpus"]}
    return {
        "SearchQA-HotpotQA-v0": {"data_path": files["hotpot"]},
        "SearchQA-Musique-v0": {"data_path": files["musique"]},
        "SearchQA-2Wiki-v0": {"data_path": files["2wiki"]},
        "SearchQA-NQ-v0": needs_corpus,
        "SearchQA-TriviaQA-v0": needs_corpus,
        "SearchQA-PopQA-v0": {"data_path": files["popqa"], "corpus_path": files["corpus"]},
        "SearchQA-Bamboogle-v0": needs_corpus,
        "SearchQA-Synthetic-v0": {"num_entities": 300, "num_questions": 50},
        "SearchQA-Custom-v0": needs_corpus,
    }[env_id]


def test_ids_are_registered():
    assert len(searchgym.ENV_IDS) == 9
    for env_id in searchgym.ENV_IDS:
        assert env_id in gym.registry


@pytest.mark.parametrize("env_id", searchgym.ENV_IDS)
def test_check_env_every_id(env_id, local_files, tmp_path):
    env = gym.make(env_id, cache_dir=tmp_path / "cache", **make_kwargs(env_id, local_files))
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=1)
    assert info["question_id"] and "Question:" in obs
    _, _, term, trunc, info = env.step("<search>river capital</search>")
    assert info["action"] == "search" and not term and not trunc


def test_misspelled_keyword_is_an_error(local_files):
    with pytest.raises(TypeError, match="top_kk"):
        gym.make("SearchQA-Synthetic-v0", num_entities=300, top_kk=3)
    with pytest.raises(TypeError, match="corpus_pth"):
        gym.make("SearchQA-NQ-v0", data_path=local_files["flashrag"], corpus_pth=local_files["corpus"])


@pytest.mark.parametrize("kwargs, msg", [
    ({"top_k": 2.5}, "top_k must be an integer >= 1"),
    ({"max_turns": "2"}, "max_turns must be an integer >= 1"),
    ({"limit": 1.5}, "limit must be an integer >= 1 or None"),
])
def test_numeric_arguments_of_gym_make_are_config_errors_naming_them(local_files, kwargs, msg):
    with pytest.raises(ConfigError, match=msg):
        gym.make("SearchQA-Custom-v0", data_path=local_files["flashrag"], corpus_path=local_files["corpus"], cache_dir=False,
                 **kwargs)


def test_missing_data_fails_at_once_with_the_ways_to_provide_it(local_files):
    with pytest.raises(DataNotFoundError) as e:
        gym.make("SearchQA-NQ-v0", download=False)
    assert "data_path=" in str(e.value) and "searchgym[hub]" in str(e.value)
    with pytest.raises(DataNotFoundError, match="corpus_path="):
        gym.make("SearchQA-NQ-v0", data_path=local_files["flashrag"])
    with pytest.raises(DataNotFoundError, match="data_path="):
        gym.make("SearchQA-Custom-v0")


@pytest.mark.parametrize("env_id, data", [("SearchQA-Bamboogle-v0", "flashrag"), ("SearchQA-HotpotQA-v0", "hotpot")])
def test_empty_corpus_file_is_an_error_naming_the_corpus(env_id, data, local_files, tmp_path):
    empty = tmp_path / "wiki18.jsonl"
    empty.write_text("")
    # Never ignored: not for HotpotQA (whose own paragraphs would otherwise stand in), not for Bamboogle.
    with pytest.raises(DataError, match="holds no documents") as e:
        gym.make(env_id, data_path=local_files[data], corpus_path=str(empty), cache_dir=False)
    assert e.value.path == str(empty) and local_files[data] not in str(e.value)


@pytest.mark.parametrize(
    "env_id, data, detected",
    [
        ("SearchQA-HotpotQA-v0", "flashrag", "question and answers only"),  # NQ-like file under HotpotQA
        ("SearchQA-NQ-v0", "hotpot", "2 HotpotQA records"),
        ("SearchQA-Musique-v0", "hotpot", "2 HotpotQA records"),
        ("SearchQA-PopQA-v0", "flashrag", "question and answers only"),  # Bamboogle-like file under PopQA
        ("SearchQA-2Wiki-v0", "musique", "1 MuSiQue records"),
        ("SearchQA-Bamboogle-v0", "popqa", "1 PopQA records"),
    ],
)
def test_another_benchmarks_file_is_refused_with_the_ways_to_load_it(env_id, data, detected, local_files):
    with pytest.raises(ConfigError) as e:
        gym.make(env_id, data_path=local_files[data], corpus_path=local_files["corpus"], cache_dir=False)
    message = str(e.value)
    assert env_id in message and detected in message and local_files[data] in message
    assert "SearchQA-Custom-v0" in message and "format=" in message
    fmt = message.split("detected format '")[1].split("'")[0]
    # Either way named in the message loads the file.
    env = gym.make(env_id, data_path=local_files[data], corpus_path=local_files["corpus"], format=fmt, cache_dir=False)
    assert env.unwrapped.records
    env = gym.make("SearchQA-Custom-v0", data_path=local_files[data], corpus_path=local_files["corpus"], cache_dir=False)
    assert env.unwrapped.records


def test_the_file_name_decides_for_records_that_name_no_dataset(local_files, tmp_path):
    rows = [{"id": "t1", "question": "Which river flows through Berlin?", "golden_answers": ["Spree"]}]
    trivia = tmp_path / "triviaqa_test.jsonl"
    trivia.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(ConfigError, match="named as TriviaQA data"):
        gym.make("SearchQA-NQ-v0", data_path=str(trivia), corpus_path=local_files["corpus"], cache_dir=False)
    assert gym.make("SearchQA-TriviaQA-v0", data_path=str(trivia), corpus_path=local_files["corpus"], cache_dir=False)
    # A HotpotQA file without HotpotQA's annotations loads under HotpotQA only when its name says HotpotQA.
    hotpot = tmp_path / "hotpotqa" / "dev.jsonl"
    hotpot.parent.mkdir()
    hotpot.write_text(json.dumps(rows[0]) + "\n")
    env = gym.make("SearchQA-HotpotQA-v0", data_path=str(hotpot), corpus_path=local_files["corpus"], cache_dir=False)
    assert env.unwrapped.records[0].gold_entities == ("Spree",)


def test_a_merged_search_r1_file_is_refused_under_one_benchmark(local_files, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {"data_source": source, "prompt": [{"role": "user", "content": f"Answer it. Question: {q}\n"}],
         "reward_model": {"ground_truth": {"target": [a]}, "style": "rule"}, "extra_info": {"index": i, "split": "train"}}
        for i, (source, q, a) in enumerate([("nq", "Which river flows through Berlin?", "Spree"), ("hotpotqa", "Is the Seine in France?", "yes")])
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(ConfigError, match="1 HotpotQA records"):
        gym.make("SearchQA-NQ-v0", data_path=str(path), corpus_path=local_files["corpus"], cache_dir=False)
    rows[1]["data_source"] = "web_questions"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(ConfigError, match="1 web_questions records"):
        gym.make("SearchQA-NQ-v0", data_path=str(path), corpus_path=local_files["corpus"], cache_dir=False)
    env = gym.make("SearchQA-Custom-v0", data_path=str(path), corpus_path=local_files["corpus"], cache_dir=False)
    assert [r.question for r in env.unwrapped.records] == ["Which river flows through Berlin?", "Is the Seine in France?"]


def test_hotpotqa_distractor_corpus_from_contexts(local_files, tmp_path):
    env = gym.make("SearchQA-HotpotQA-v0", data_path=local_files["hotpot"], cache_dir=False).unwrapped
    assert sorted(d.title for d in env.corpus) == ["Paris", "Rome", "Seine", "Tiber"]
    env.reset(options={"question_id": "h1"})
    assert env.record.gold_docs == ("Rome", "Tiber")
    _, r, term, _, _ = env.step("<answer>the Tiber</answer>")
    assert r == 1.0 and term


def write_real_layouts(folder):
    """One small file per real layout the benchmark ids are used with, in the folder names the FlashRAG
    hub and Search-R1 use (`nq/test.jsonl`, `nq_search/test.parquet`)."""
    from tests.data.test_layouts import HOTPOT_OFFICIAL, MUSIQUE, hotpot_hf, searchr1_row, write_parquet

    files = {}
    for name, rows, lines in (
        ("hotpotqa/train.jsonl", [hotpot_hf(r) for r in HOTPOT_OFFICIAL], True),
        ("hotpotqa/hotpot_dev_distractor_v1.json", HOTPOT_OFFICIAL, False),
        ("musique/musique_ans_v1.0_dev.jsonl", [MUSIQUE], True),
        ("nq/test.jsonl", FLASHRAG, True),
        ("triviaqa/test.jsonl", FLASHRAG, True),
        ("popqa/test.jsonl", POPQA, True),
    ):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows) if lines else json.dumps(rows, indent=4))
        files[name] = str(path)
    (folder / "nq_search").mkdir()
    rows = [searchr1_row(i, r["question"], r["golden_answers"]) for i, r in enumerate(FLASHRAG)]
    files["nq_search/test.parquet"] = str(write_parquet(folder / "nq_search" / "test.parquet", rows))
    return files


@pytest.mark.parametrize(
    "env_id, data, needs_corpus",
    [
        ("SearchQA-HotpotQA-v0", "hotpotqa/train.jsonl", False),
        ("SearchQA-HotpotQA-v0", "hotpotqa/hotpot_dev_distractor_v1.json", False),
        ("SearchQA-Musique-v0", "musique/musique_ans_v1.0_dev.jsonl", False),
        ("SearchQA-NQ-v0", "nq/test.jsonl", True),
        ("SearchQA-NQ-v0", "nq_search/test.parquet", True),
        ("SearchQA-TriviaQA-v0", "triviaqa/test.jsonl", True),
        ("SearchQA-PopQA-v0", "popqa/test.jsonl", True),
    ],
)
def test_real_layouts_make_working_envs(env_id, data, needs_corpus, local_files, tmp_path):
    files = write_real_layouts(tmp_path / "data")
    kwargs = {"data_path": files[data], "cache_dir": tmp_path / "cache"}
    if needs_corpus:
        kwargs["corpus_path"] = local_files["corpus"]
    env = gym.make(env_id, **kwargs)
    for index in range(len(env.unwrapped.records)):
        obs, info = env.reset(options={"index": index})
        question = env.unwrapped.record.question
        assert question in obs
        obs, _, _, _, info = env.step(f"<search>{question}</search>")
        # BM25 shows only documents sharing a term with the query: up to top_k (3) of them.
        assert info["action"] == "search" and 1 <= len(info["shown"]) <= 3 and obs.count("Doc ") == len(info["shown"])
        _, _, term, _, info = env.step(f"<answer>{env.unwrapped.record.answers[-1]}</answer>")
        assert term and info["reward"]["em"] == 1.0


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "env_id, data, corpus",
    [
        ("SearchQA-HotpotQA-v0", "hotpotqa/hotpot_train_sample_hf.jsonl", None),
        ("SearchQA-HotpotQA-v0", "hotpotqa/hotpot_train_sample_official.json", None),
        ("SearchQA-Musique-v0", "musique/musique_train_sample_official.json", None),
        ("SearchQA-NQ-v0", "nq/nq_test_sample_flashrag.jsonl", "wiki_corpus/wiki18_sample_1000.jsonl"),
        ("SearchQA-NQ-v0", "nq/nq_test_searchr1.parquet", "wiki_corpus/wiki18_sample_1000.jsonl"),
        ("SearchQA-TriviaQA-v0", "triviaqa/triviaqa_test_sample_flashrag.jsonl", "wiki_corpus/wiki18_sample_1000.jsonl"),
        ("SearchQA-PopQA-v0", "popqa/popqa_test_sample_flashrag.jsonl", "wiki_corpus/wiki18_sample_1000.jsonl"),
    ],
)
def test_real_samples_make_working_envs(env_id, data, corpus, tmp_path):
    kwargs = {"data_path": str(shared_file(data)), "cache_dir": tmp_path}
    if corpus:
        kwargs["corpus_path"] = str(shared_file(corpus))
    env = gym.make(env_id, **kwargs)
    obs, info = env.reset(seed=0)
    question = env.unwrapped.record.question
    assert question in obs
    obs, _, _, _, info = env.step(f"<search>{question}</search>")
    assert info["action"] == "search" and len(info["shown"]) == 3 and obs.count("Doc ") == 3
    _, _, term, _, info = env.step(f"<answer>{env.unwrapped.record.answers[0]}</answer>")
    assert term and info["reward"]["em"] == 1.0


def test_registering_again_is_harmless():
    """`register_envs()` a second time, or a reload of the module, finds its own specs and leaves them."""
    import importlib

    import searchgym.envs.registration as registration

    before = {env_id: gym.spec(env_id) for env_id in searchgym.ENV_IDS}
    searchgym.register_envs()
    importlib.reload(registration).register_envs()
    assert {env_id: gym.spec(env_id) for env_id in searchgym.ENV_IDS} == before
    assert gym.spec("SearchQA-HotpotQA-v0").entry_point == "searchgym.envs.variants:BenchmarkSearchQAEnv"


@pytest.mark.parametrize("changes", [{"entry_point": "othergym.envs:QAEnv"}, {"kwargs": {"dataset": "nq"}}])
def test_an_id_taken_by_another_env_is_an_error(changes):
    from dataclasses import replace

    from searchgym.errors import RegistrationError

    env_id = "SearchQA-HotpotQA-v0"
    ours = gym.registry[env_id]
    gym.registry[env_id] = replace(ours, **changes)
    try:
        with pytest.raises(RegistrationError) as raised:
            searchgym.register_envs()
    finally:
        gym.registry[env_id] = ours
    message = str(raised.value)
    assert env_id in message and "searchgym.envs.variants:BenchmarkSearchQAEnv" in message
    other = changes.get("entry_point", "searchgym.envs.variants:BenchmarkSearchQAEnv")
    assert f"entry point {other!r}" in message
    assert "{'dataset': 'nq'}" in message if "kwargs" in changes else "othergym.envs:QAEnv" in message
