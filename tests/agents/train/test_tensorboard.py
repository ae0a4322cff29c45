"""`--tensorboard`: checked before training starts; an optional logger that never costs a step."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.train.config import TrainConfig
from agents.train.tb import log_tensorboard
from searchgym.errors import ConfigError
from tests.agents.train.test_trainer import tiny_config


def test_a_missing_tensorboard_package_stops_the_config_not_step_one(tmp_path, monkeypatch):
    from agents.train import config

    real = config.importlib.util.find_spec
    monkeypatch.setattr(config.importlib.util, "find_spec", lambda name: None if name == "tensorboard" else real(name))
    with pytest.raises(ConfigError, match="tensorboard package"):
        tiny_config(tmp_path, tensorboard=True)
    assert isinstance(tiny_config(tmp_path), TrainConfig)  # without the flag, nothing is needed


def test_a_failing_tensorboard_is_switched_off_with_an_error_not_raised(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    trainer = SimpleNamespace(_tb=None, out=tmp_path, step=1)
    with caplog.at_level(logging.ERROR, logger="agents.train.tb"):
        log_tensorboard(trainer, {"step": 1, "loss/policy": 0.5})
        log_tensorboard(trainer, {"step": 2, "loss/policy": 0.4})
    assert trainer._tb_failed and caplog.text.count("TensorBoard logging failed") == 1


def test_training_with_tensorboard_writes_events_metrics_and_checkpoints(tmp_path):
    pytest.importorskip("tensorboard")
    from agents.train.trainer import Trainer

    trainer = Trainer(tiny_config(tmp_path, learner="grpo", steps=1, tensorboard=True))
    try:
        trainer.run()
    finally:
        trainer.close()
    run = Path(tmp_path / "run")
    events = list((run / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any(line.get("step") == 1 for line in lines)
    assert (run / "checkpoints" / "step-000001" / "state.json").is_file()


def test_a_failed_metrics_write_is_one_error_naming_the_file(tmp_path):
    from agents.train.metrics import MetricsError, MetricsLog

    log = MetricsLog(tmp_path)
    log.write({"step": 1, "loss/policy": 0.5}, 1)
    log.write({"step": 2, "loss/policy": 0.4}, 2)
    log.drop_after(1)  # the line of step 2 goes: one line per step after a resume
    assert (tmp_path / "metrics.jsonl").read_text().splitlines() == ['{"step": 1, "loss/policy": 0.5}']
    (tmp_path / "metrics.jsonl").unlink()
    (tmp_path / "metrics.jsonl").mkdir()  # what the file system then refuses, as a full disk would
    with pytest.raises(MetricsError, match=r"cannot write .*metrics.jsonl: Is a directory .*run the same command to resume"):
        log.write({"step": 3}, 3)
    with pytest.raises(MetricsError, match=r"cannot read .*metrics.jsonl: Is a directory"):
        log.drop_after(1)
