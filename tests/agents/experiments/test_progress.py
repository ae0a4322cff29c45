"""`agents.experiments.progress`: bars that beat while a long call runs, and what ticks them."""

from __future__ import annotations

import io
import re
import threading

import pytest
import torch

from agents.experiments.progress import counting_calls, counting_passes, generation_budget, phase


class _Log(io.StringIO):
    """A log file (not a terminal) that tells a waiting test when a line arrived."""

    def __init__(self):
        super().__init__()
        self.wrote = threading.Event()

    def write(self, text):
        self.wrote.set()
        return super().write(text)


def test_line_mode_beats_while_a_call_blocks_and_ends_with_a_final_line():
    log = _Log()
    with phase("[eval] greedy", total=4, unit="pass", every=0.01, file=log) as bar:
        bar.update(1)
        # Nothing ticks now, as inside one long call: the beat thread still writes.
        assert log.wrote.wait(timeout=30), "no progress line while the phase was busy"
    lines = log.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("[eval] greedy") for line in lines)
    assert "1/4" in lines[0] and "<" in lines[0]  # elapsed<remaining: the ETA
    assert "1/1" in lines[-1]  # the upper bound was not needed: shown complete


def test_terminal_mode_redraws_in_place():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    with phase("[cold start]", total=2, unit="pass", every=60, file=out) as bar:
        bar.update(2)
    assert "\r" in out.getvalue() and "2/2" in out.getvalue()


def test_phase_rejects_a_non_positive_interval():
    with pytest.raises(ValueError, match="every"):
        with phase("x", every=0, file=io.StringIO()):
            pass


def test_counting_calls_ticks_after_each_call_and_restores_the_method():
    class Trainer:
        def train_step(self):
            return {"rollout/reward": 0.5}

    trainer, log = Trainer(), io.StringIO()
    with phase("[grpo] RL steps", total=3, every=60, file=log) as bar:
        with counting_calls(trainer, "train_step", bar, postfix=lambda m: {"reward": m["rollout/reward"]}):
            assert trainer.train_step() == {"rollout/reward": 0.5}
            trainer.train_step()
        assert bar.n == 2 and "train_step" not in vars(trainer)
        trainer.train_step()
        assert bar.n == 2
    assert "reward=0.5" in log.getvalue()


def test_counting_passes_counts_forward_calls_until_the_block_ends():
    layer = torch.nn.Linear(2, 2)
    with phase("passes", every=60, file=io.StringIO()) as bar:
        with counting_passes(layer, bar):
            for _ in range(3):
                assert torch.equal(layer(torch.zeros(1, 2)), layer.bias.detach().unsqueeze(0))  # the output is untouched
        layer(torch.zeros(1, 2))
        assert bar.n == 3
        with counting_passes(None, bar):  # a served policy: nothing to count
            pass


def test_generation_budget_is_turns_times_chunks_times_tokens():
    assert generation_budget(20, 4, 64, 8) == 4 * 3 * 64  # 20 questions in chunks of 8: 3 chunks
    assert generation_budget(20, 4, 64, None) == 4 * 64


def test_counting_passes_counts_a_transformers_model_at_its_decoder():
    class Model(torch.nn.Module):
        """Generation calls the model; the training code calls `get_decoder()` directly."""

        def __init__(self):
            super().__init__()
            self.decoder = torch.nn.Linear(2, 2)

        def get_decoder(self):
            return self.decoder

        def forward(self, x):
            return self.decoder(x)

    model = Model()
    with phase("passes", every=60, file=io.StringIO()) as bar, counting_passes(model, bar):
        model(torch.zeros(1, 2))
        model.get_decoder()(torch.zeros(1, 2))
        assert bar.n == 2


def test_without_a_total_the_line_shows_the_elapsed_time_only():
    log = io.StringIO()
    with phase("[grpo] loading the model", every=60, file=log):
        pass
    assert re.fullmatch(r"\[grpo\] loading the model: \d\d:\d\d elapsed", log.getvalue().strip())
