"""Question files as users re-save them: pandas CSV/TSV exports of Search-R1 / verl parquet (printed Python
lists, NumPy arrays, JSON cells), yes/no answers as booleans, and ground truths joined into one string.

Each file is written here in the shape the tool that makes it writes (`DataFrame.to_csv` prints a NumPy
array of strings as `['a' 'b']`, a dict holding one as `{'target': array(['a', 'b'], dtype=object)}`);
where pandas is installed, the same rows also go through pandas itself.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.data import load_dataset_file
from searchgym.data.cells import read_cell
from searchgym.data.fields import RecordShapeError
from searchgym.errors import DataError
from searchgym.protocol import SEARCH_R1_TEMPLATE
from searchgym.rewards import exact_match

COLUMNS = ["id", "question", "golden_answers", "data_source", "prompt", "ability", "reward_model", "extra_info"]


def numpy_print(items: list[str]) -> str:
    """How NumPy prints an object array of strings (what `DataFrame.to_csv` writes for such a cell)."""
    return "[" + " ".join(repr(s) for s in items) + "]"


def numpy_repr(items: list[str]) -> str:
    """How NumPy writes the same array inside a printed dict."""
    return "array([" + ", ".join(repr(s) for s in items) + "], dtype=object)"


def exported_row(i: int, question: str, answers: list[str]) -> list[str]:
    """One row of `DataFrame.to_csv(index=False)` of a Search-R1 parquet row, cell by cell."""
    prompt = [{"content": SEARCH_R1_TEMPLATE.format(question=question), "role": "user"}]
    return [
        f"test_{i}",
        question,
        numpy_print(answers),
        "nq",
        "[" + repr(prompt[0]) + "]",
        "fact-reasoning",
        "{'ground_truth': {'target': " + numpy_repr(answers) + "}, 'style': 'rule'}",
        repr({"index": i, "split": "test"}),
    ]


ROWS = [
    (0, "who got the first nobel prize in physics?", ["Wilhelm Conrad Röntgen"]),
    (1, "when is the next deadpool movie being released?", ["May 18, 2018"]),
    (2, "which mode is used for short wave broadcast service?", ["Olivia", "MFSK"]),
    (3, "who is the owner of reading football club?", ["Xiu Li Dai", "Dai Yongge", "Renhe Sun", "Dai Xiu Li"]),
]


def write_export(path: Path, rows: list[list[str]], delimiter: str = ",", index: bool = False) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter=delimiter, lineterminator="\n")
        writer.writerow(([""] if index else []) + COLUMNS)
        for n, row in enumerate(rows):
            writer.writerow(([str(n)] if index else []) + row)
    return path


@pytest.mark.parametrize(("name", "delimiter", "index"), [("test.csv", ",", False), ("test.tsv", "\t", False),
                                                          ("with_index.csv", ",", True)])
def test_search_r1_csv_export_keeps_every_answer(tmp_path, name, delimiter, index):
    path = write_export(tmp_path / name, [exported_row(*r) for r in ROWS], delimiter, index)
    ds = load_dataset_file(path)
    assert (ds.format, dict(ds.datasets)) == ("searchr1", {"nq": 4})
    assert [(r.id, r.question, r.answers) for r in ds.records] == [(f"test_{i}", q, tuple(a)) for i, q, a in ROWS]
    # Read as one string, the printed list was the only answer, and a correct answer scored 0.
    record = ds.records[3]
    assert exact_match("Dai Yongge", record.answers) == 1.0 and exact_match("Renhe", record.answers) == 0.0
    assert record.metadata["extra_info"] == {"index": 3, "split": "test"}


def test_pandas_export_reads_back_as_the_parquet_does(tmp_path):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    prompt = lambda q: [{"content": SEARCH_R1_TEMPLATE.format(question=q), "role": "user"}]  # noqa: E731
    rows = [{"id": f"test_{i}", "question": q, "golden_answers": a, "data_source": "nq", "prompt": prompt(q),
             "ability": "fact-reasoning", "reward_model": {"ground_truth": {"target": a}, "style": "rule"},
             "extra_info": {"index": i, "split": "test"}} for i, q, a in ROWS]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    frame = pd.read_parquet(tmp_path / "test.parquet")
    frame.to_csv(tmp_path / "test.csv", index=False)
    frame.to_csv(tmp_path / "indexed.tsv", sep="\t")
    expected = [(r.id, r.question, r.answers) for r in load_dataset_file(tmp_path / "test.parquet").records]
    for name in ("test.csv", "indexed.tsv"):
        assert [(r.id, r.question, r.answers) for r in load_dataset_file(tmp_path / name).records] == expected


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("['a', 'b']", ["a", "b"]),
        ('["a", "b"]', ["a", "b"]),
        ("['a' 'b'\n 'c']", ["a", "b", "c"]),  # NumPy wraps long arrays over lines, still without commas
        ("[\"it's\" 'x']", ["it's", "x"]),
        ("{'index': -3, 'ok': True, 'none': None, 'w': 0.5}", {"index": -3, "ok": True, "none": None, "w": 0.5}),
        ("{'t': array(['a', 'b'],\n      dtype=object)}", {"t": ["a", "b"]}),
        ("{'t': array(['a'], dtype='<U1')}", {"t": ["a"]}),
        ("[]", []),
        ("False", False),
        ("plain text, with a comma", "plain text, with a comma"),
    ],
)
def test_printed_cells_read_back(cell, value):
    assert read_cell(cell, "c") == value


@pytest.mark.parametrize(
    ("cell", "reason"),
    [
        ("['a', 'b'", "does not end with ']'"),
        ("['a' ... 'z']", "NumPy shortened the array"),
        ("[__import__('os')]", "is not a literal"),
        ("{'a' 'b'}", "expected ':'"),
    ],
)
def test_unreadable_printed_cells_are_refused(cell, reason):
    with pytest.raises(RecordShapeError, match=reason) as e:
        read_cell(cell, "golden_answers")
    assert "golden_answers" in str(e.value) and "to_json" in str(e.value)


def test_an_unreadable_list_cell_names_file_line_field_and_the_way_round(tmp_path):
    rows = [exported_row(*ROWS[0]), exported_row(*ROWS[2])]
    rows[1][2] = "['Olivia' ... 'MFSK']"
    path = write_export(tmp_path / "export.csv", rows)
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    message = str(e.value)
    assert "export.csv" in message and "line 3" in message and "golden_answers" in message
    assert "to_json" in message and "on_error='skip'" in message


# ---------------------------------------------------------------------------------------- yes/no


def test_boolean_answers_are_yes_and_no(tmp_path):
    # StrategyQA's layout: the answer is a JSON boolean.
    rows = [
        {"qid": "b8c0", "term": "Hydrogen", "question": "Is hydrogen's atomic number squared exceeding the number of Spice Girls?",
         "answer": False, "facts": ["Hydrogen is the first element."], "decomposition": ["What is hydrogen's atomic number?"]},
        {"qid": "3b6f", "term": "Aretha", "question": "Could Aretha Franklin vote for a president when her second child was born?",
         "answer": True, "facts": [], "decomposition": []},
    ]
    path = tmp_path / "strategyqa_train.json"
    path.write_text(json.dumps(rows))
    ds = load_dataset_file(path)
    assert ds.format == "nq_open"
    assert [(r.answers, r.gold_entities) for r in ds.records] == [(("no", "false"), ()), (("yes", "true"), ())]
    no = ds.records[0].answers
    assert (exact_match("No", no), exact_match("false", no), exact_match("yes", no)) == (1.0, 1.0, 0.0)
    # A pandas export prints the booleans as True / False.
    exported = tmp_path / "strategyqa.csv"
    exported.write_text("qid,question,answer\nb8c0,Is it?,False\n3b6f,Could she?,True\n")
    assert [r.answers for r in load_dataset_file(exported).records] == [("no", "false"), ("yes", "true")]
    flashrag = tmp_path / "f.jsonl"
    flashrag.write_text(json.dumps({"id": "1", "question": "Is it?", "golden_answers": [True]}) + "\n")
    assert load_dataset_file(flashrag).records[0].answers == ("yes", "true")


def test_a_refused_answer_names_the_accepted_types(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "How many?", "answer": 3.5}) + "\n")
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert "a list of answers (strings or booleans), a string, or a boolean (read as yes/no), got a number" in str(e.value)


# --------------------------------------------------------------------------------- joined answers


def verl_row(truth, **extra) -> dict:
    return {"data_source": "hotpotqa", "prompt": [{"role": "user", "content": "Question: who?"}],
            "reward_model": {"ground_truth": truth, "style": "rule"}, "extra_info": {"index": 0}, **extra}


@pytest.mark.parametrize(
    ("row", "answers"),
    [
        # The joined string and the list: the list wins.
        (verl_row("Xiu Li Dai, Dai Yongge", golden_answers=["Xiu Li Dai", "Dai Yongge"]), ("Xiu Li Dai", "Dai Yongge")),
        (verl_row({"target": "a; b"}, extra_info={"index": 0, "answers": ["a", "b"]}), ("a", "b")),
        # A string that is one of the list's answers adds nothing.
        (verl_row("Paris", golden_answers=["Paris", "City of Light"]), ("Paris", "City of Light")),
        # A string that is neither is another answer, kept after the list.
        (verl_row("Lutetia", golden_answers=["Paris"]), ("Paris", "Lutetia")),
        # Without a list, a string with commas is one answer ("May 18, 2018").
        (verl_row("May 18, 2018"), ("May 18, 2018",)),
        (verl_row(["a", "b"], golden_answers=["c"]), ("a", "b")),
    ],
)
def test_a_list_of_answers_wins_over_a_joined_string(tmp_path, row, answers):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (record,) = load_dataset_file(path, format="searchr1").records
    assert record.answers == answers


@pytest.mark.shared_data
def test_pandas_export_of_the_real_search_r1_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    from tests.helpers import shared_file

    parquet = shared_file("nq/nq_test_searchr1.parquet")
    frame = pd.read_parquet(parquet)
    frame.to_csv(tmp_path / "test.csv", index=False)
    frame.to_csv(tmp_path / "test.tsv", sep="\t")
    expected = load_dataset_file(parquet).records
    assert (len(expected), sum(len(r.answers) for r in expected)) == (3610, 6490)
    for name in ("test.csv", "test.tsv"):
        records = load_dataset_file(tmp_path / name).records
        assert [(r.id, r.question, r.answers, r.source) for r in records] == [
            (r.id, r.question, r.answers, r.source) for r in expected
        ]


@pytest.mark.parametrize("cell", ["[" * 5000 + "]" * 5000, "{'a': " * 3000 + "1" + "}" * 3000, "{[1]: 2}", "[1 2,, 3]"])
def test_pathological_cells_are_refused_not_crashes(cell):
    with pytest.raises(RecordShapeError, match="field 'c'"):
        read_cell(cell, "c")


@given(st.text(max_size=60).map(lambda t: "[" + t))
@settings(max_examples=300, deadline=None)
def test_any_list_looking_cell_is_read_or_refused(cell):
    try:
        read_cell(cell, "c")
    except RecordShapeError:
        pass
