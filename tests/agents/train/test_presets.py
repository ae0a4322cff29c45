"""`python -m agents train --preset NAME`: the papers' model sizes as named layouts, sized by the memory plan."""

import dataclasses

import pytest

from agents.cli import build_parser
from agents.cli.train import config_from_args
from agents.train.presets import PRESETS, PROMPT_TOKENS, get_preset
from agents.train.memory_plan import main as memory_plan_main
from agents.train.memory_plan import preset_estimate
from searchgym.errors import ConfigError


def _config(*flags):
    return config_from_args(build_parser().parse_args(["train", *flags]))


def _value(config, dotted):
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_preset_sets_its_fields_and_a_given_flag_wins(name):
    preset = get_preset(name)
    config = _config("--preset", name, "--learner", "cw-grpo", "--optim.lr", "3e-6", "--steps", "7")
    for dotted, value in preset.values.items():
        if dotted not in ("optim.lr", "steps"):
            assert _value(config, dotted) == value, dotted
    assert (config.optim.lr, config.steps, config.learner_name) == (3e-6, 7, "cw-grpo")
    # A field the preset leaves alone keeps the dataclass default.
    assert config.env.id == "SearchQA-Synthetic-v0"
    assert dataclasses.asdict(_config("--preset", name)) != dataclasses.asdict(_config())


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_fits_an_80_gb_gpu_beside_its_sglang_server(name):
    preset = get_preset(name)
    row = preset_estimate(name)
    assert row["tokens"] == preset.values["optim.micro_batch"] * (PROMPT_TOKENS + preset.values["rollout.max_response_tokens"])
    assert row["gpus"] == preset.processes and row["strategy"] == preset.strategy
    assert row["fits_with_server"], row
    assert row["update_gb"] + row["server_gb"] <= 80.0
    # The same layout without activation checkpointing would not leave the server its room: the preset's
    # choices are the ones the plan needs, not decoration.
    assert row["total_gb"] + row["server_gb"] > 80.0


def test_the_8b_preset_needs_its_eight_processes():
    preset = get_preset("gpu-8b")
    with pytest.raises(ConfigError, match="8 GPUs and this run has 2"):
        preset.check_processes(2)
    preset.check_processes(8)
    get_preset("gpu-1.7b").check_processes(1)  # one process per GPU: any count works
    assert "--nproc_per_node 8" in preset.launch and "--preset gpu-8b" in preset.launch


def test_an_unknown_preset_is_refused_with_the_names():
    with pytest.raises(ConfigError, match="gpu-1.7b, gpu-8b"):
        get_preset("gpu-70b")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--preset", "gpu-70b"])


def test_the_memory_plan_prints_the_presets(capsys, tmp_path):
    out = tmp_path / "presets.json"
    assert memory_plan_main(["--preset", "gpu-1.7b", "gpu-8b", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| gpu-1.7b | qwen3-1.7b | 1 | ddp | 9216 | yes |" in text
    assert "| gpu-8b | qwen3-8b | 8 | fsdp2 | 9216 | yes |" in text
    assert out.read_text().count('"preset"') == 2
