"""Rollout traces: JSONL records a person can read, the full-trajectory round trip, `agents rollouts show`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.cli import main
from agents.rollout import RolloutConfig, RolloutEngine, TraceWriter, Trajectory, read_trace
from searchgym.errors import DataError

SEARCH = "<think>Rome first.</think><search>river Rome</search>"
ANSWER = "<think>The Tiber.</think><answer>Tiber</answer>"


@pytest.fixture
def trajectories(make_env, scripted):
    policy = scripted(lambda ctx, k: ANSWER if "<information>Doc" in ctx else SEARCH)
    return RolloutEngine(policy, make_env(), RolloutConfig(group_size=2)).rollout([{"options": {"index": 0}}, {"options": {"index": 1}}])


def test_trace_records_hold_the_readable_episode(trajectories, tmp_path):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as writer:
        assert writer.write(trajectories, step=3) == 4
    records = list(read_trace(path))
    assert len(records) == 4
    r = records[0]
    assert r["question_id"] == "q0" and r["question"].startswith("Which river") and r["gold_answers"] == ["Tiber"]
    assert r["step"] == 3 and r["finish_reason"] == "answered" and r["reward"] == 1.0 and r["em"] == 1.0
    assert [t["action"] for t in r["turns"]] == ["search", "answer"]
    assert r["turns"][0]["agent"] == SEARCH and r["turns"][0]["query"] == "river Rome"
    assert r["turns"][0]["observation"].strip().startswith('<information>Doc 1(Title: "Tiber")')
    assert r["turns"][0]["shown"][0] == "Tiber"
    assert r["turns"][1]["answer"] == "Tiber" and r["turns"][1]["observation"] is None
    assert r["tokens"]["sampled"] == trajectories[0].num_sampled_tokens
    assert "trajectory" not in r


def test_full_trajectories_round_trip(trajectories, tmp_path):
    path = tmp_path / "full.jsonl"
    with TraceWriter(path, include_tokens=True) as writer:
        writer.write(trajectories)
    again = [Trajectory.from_dict(r["trajectory"]) for r in read_trace(path)]
    assert again == trajectories


def test_read_trace_errors(tmp_path):
    with pytest.raises(DataError, match="no such trace"):
        list(read_trace(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ok": 1}\nnot json\n')
    with pytest.raises(DataError, match="record 2"):
        list(read_trace(bad))


def test_cli_shows_a_trace(trajectories, tmp_path, capsys):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as writer:
        writer.write(trajectories)
    assert main(["rollouts", "show", str(path), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "=== q0 (group 0, sample 0): answered, reward 1.0 ===" in out
    assert "[turn 0] agent -> search 'river Rome'" in out and "[turn 1] agent -> answer 'Tiber'" in out
    assert "q1 (group 1" not in out  # --limit 1
    assert out.strip().endswith("4 episodes, mean reward 0.500, mean turns 2.00, ends {'answered': 4}")
    assert main(["rollouts", "show", str(path), "--question-id", "q1", "--summary"]) == 0
    assert capsys.readouterr().out.strip() == "2 episodes, mean reward 0.000, mean turns 2.00, ends {'answered': 2}"
    assert main(["rollouts", "show", str(tmp_path / "nope.jsonl")]) == 1
    assert "no such trace file" in capsys.readouterr().err


def test_cli_runs_as_a_module(trajectories, tmp_path):
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as writer:
        writer.write(trajectories[:1])
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "agents", "rollouts", "show", str(path), "--max-chars", "10"],
        check=False, capture_output=True, text=True, timeout=60, cwd=root, env={"PYTHONPATH": str(root), "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert "...[" in done.stdout  # turns cut to 10 characters
    assert json.loads(path.read_text().splitlines()[0])["question_id"] == "q0"
