"""Command-line refusals are one line on stderr and a non-zero exit, no traceback unless asked for
(`searchgym.cli.run`), in the `searchgym` and `agents` command lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.cli.run import run_main, take_debug_flag
from searchgym.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _refuse(args):
    raise ConfigError(f"--top-k must be >= 1 (got {args})")


def test_a_refusal_is_its_message_and_status_1(capsys, monkeypatch):
    monkeypatch.delenv("SEARCHGYM_DEBUG", raising=False)
    assert run_main(_refuse, ["--top-k", "0"]) == 1
    err = capsys.readouterr().err
    assert err == "error: --top-k must be >= 1 (got ['--top-k', '0'])\n"


def test_debug_shows_the_traceback_and_is_not_passed_on(capsys, monkeypatch):
    monkeypatch.delenv("SEARCHGYM_DEBUG", raising=False)
    assert run_main(_refuse, ["--top-k", "--debug", "0"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "_refuse" in err
    assert err.endswith("error: --top-k must be >= 1 (got ['--top-k', '0'])\n")
    monkeypatch.setenv("SEARCHGYM_DEBUG", "1")
    assert run_main(_refuse, []) == 1 and "Traceback" in capsys.readouterr().err


def test_debug_after_a_double_dash_belongs_to_what_follows():
    args = ["--debug", "run", "--", "--debug", "x"]
    assert take_debug_flag(args) and args == ["run", "--", "--debug", "x"]
    args = ["run", "--", "--debug"]
    assert not take_debug_flag(args) and args == ["run", "--", "--debug"]


def test_statuses_pass_through_and_bugs_keep_their_traceback(monkeypatch):
    assert run_main(lambda args: None, []) == 0
    assert run_main(lambda args: 3, []) == 3
    with pytest.raises(KeyError):
        run_main(lambda args: {}["bug"], [])
    # A main without parameters reads sys.argv, with --debug taken out.
    seen = []
    monkeypatch.setattr(sys, "argv", ["prog", "--debug", "a"])
    assert run_main(lambda: seen.append(list(sys.argv[1:]))) == 0 and seen == [["a"]]


@pytest.mark.parametrize("command, message", [
    (["searchgym", "serve", "--corpus", "/nowhere/corpus.jsonl"], "error: --corpus /nowhere/corpus.jsonl: no such file or folder"),
    (["agents", "train", "--model", "tiny", "--rollout.group-size", "1", "--out-dir", "/nowhere/run"],
     "error: TrainConfig.rollout.group_size must be >= 2"),
])
def test_the_command_lines_refuse_without_a_traceback(command, message):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    plain = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, env=env, timeout=300)
    assert plain.returncode == 1 and message in plain.stderr and "Traceback" not in plain.stderr, plain.stderr[-2000:]
    debug = subprocess.run([sys.executable, "-m", *command, "--debug"], capture_output=True, text=True, env=env, timeout=300)
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr and message in debug.stderr
