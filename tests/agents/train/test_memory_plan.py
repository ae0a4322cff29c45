"""The memory plan: its arithmetic against models built from the same configs, and a CPU measurement."""

from __future__ import annotations

import json
import math

import pytest

from agents.train.memory_plan import PAPER_SHAPES, SHAPES, MeasureConfig, ModelShape, estimate, main, measure, plan
from searchgym.errors import ConfigError

torch = pytest.importorskip("torch", reason="the measured part needs torch")
pytest.importorskip("transformers", reason="the measured part needs transformers")


@pytest.mark.parametrize("name", [*PAPER_SHAPES, "tiny"])
def test_parameter_count_equals_the_model_built_from_the_config(name):
    from transformers import AutoModelForCausalLM

    shape = SHAPES[name]
    with torch.device("meta"):  # no memory: shapes only
        model = AutoModelForCausalLM.from_config(shape.hf_config())
    assert shape.params() == sum(p.numel() for p in model.parameters())


def test_published_sizes():
    # Qwen2.5-0.5B is 0.49B parameters on its model card; Qwen3-8B 8.2B; Qwen3-1.7B 1.7B.
    assert round(SHAPES["qwen2.5-0.5b"].params() / 1e9, 2) == 0.49
    assert round(SHAPES["qwen3-8b"].params() / 1e9, 1) == 8.2
    assert round(SHAPES["qwen3-1.7b"].params() / 1e9, 1) == 1.7


def test_sharding_divides_the_states_and_checkpointing_cuts_activations():
    shape = SHAPES["qwen3-8b"]
    ddp = estimate(shape, gpus=8, strategy="ddp", tokens=8192, gpu_gb=80)
    fsdp = estimate(shape, gpus=8, strategy="fsdp2", tokens=8192, gpu_gb=80)
    assert ddp["weights_gb"] == pytest.approx(4 * shape.params() / 1e9)
    assert ddp["optimizer_gb"] == pytest.approx(2 * ddp["weights_gb"])
    for key in ("weights_gb", "grads_gb", "optimizer_gb"):
        assert fsdp[key] == pytest.approx(ddp[key] / 8)
    assert ddp["gather_gb"] == 0 and fsdp["gather_gb"] > 0
    assert fsdp["activations_gb"] == ddp["activations_gb"] > fsdp["activations_ckpt_gb"]
    parts = fsdp["weights_gb"] + fsdp["grads_gb"] + fsdp["optimizer_gb"] + fsdp["gather_gb"]
    assert fsdp["total_ckpt_gb"] == pytest.approx(parts + fsdp["activations_ckpt_gb"])
    # The point: an 8B update does not fit one 80 GB GPU under DDP, and does sharded over 8.
    assert not ddp["fits_ckpt"] and fsdp["fits_ckpt"]
    assert estimate(shape, gpus=8, strategy="fsdp2", tokens=16384, gpu_gb=80)["activations_gb"] == pytest.approx(
        2 * fsdp["activations_gb"]
    )
    assert len(plan([shape], gpu_counts=(1, 2, 8), tokens=8192, gpu_gb=80)) == 6
    with pytest.raises(ConfigError):
        estimate(shape, gpus=0, strategy="ddp", tokens=1, gpu_gb=80)


def test_bad_shapes_and_measure_configs_are_refused():
    with pytest.raises(ConfigError, match="kv_heads"):
        ModelShape(
            "x", "qwen3", hidden=8, layers=1, heads=3, kv_heads=2, head_dim=4, intermediate=8, vocab=8, tied=True
        )
    with pytest.raises(ConfigError, match="multiple of seq_len"):
        MeasureConfig(tokens=100, seq_len=64)


def test_cpu_measurement_of_a_tiny_and_a_reduced_layer_model():
    config = MeasureConfig(
        device="cpu", dtype="fp32", tokens=64, seq_len=32, steps=1, decode_batch=2, decode_prompt=8, decode_new=4
    )
    row = measure(SHAPES["tiny"], config)
    assert row["label"] == "measured" and row["params_b"] * 1e9 == pytest.approx(SHAPES["tiny"].params())
    assert row["update_tokens_per_s"] > 0 and row["decode_tokens_per_s"] > 0 and row["peak_gb"] >= 0
    # Random tokens under a random model: the loss is near log(vocab).
    assert abs(row["loss_first"] - math.log(SHAPES["tiny"].vocab)) < 1.0 and math.isfinite(row["loss_last"])
    reduced = measure(
        SHAPES["tiny"],
        MeasureConfig(
            device="cpu", dtype="fp32", tokens=16, seq_len=16, steps=1, layers=1, decode_new=0, checkpointing=True
        ),
    )
    one_layer = SHAPES["tiny"].layer_params() + SHAPES["tiny"].embedding_params()
    assert reduced["shape"] == "tiny[1 layers]" and reduced["params_b"] * 1e9 == pytest.approx(one_layer)
    assert reduced["decode_tokens_per_s"] is None and reduced["checkpointing"] is True


def test_the_command_prints_one_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert (
        main(
            [
                "--shapes",
                "tiny",
                "--device",
                "cpu",
                "--tokens",
                "32",
                "--seq-len",
                "16",
                "--steps",
                "1",
                "--checkpointing",
                "on",
                "--decode-batch",
                "1",
                "--decode-prompt",
                "4",
                "--decode-new",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "estimated" in printed and "measured" in printed
    data = json.loads(out.read_text())
    assert len(data["estimated"]) == 6 and {r["label"] for r in data["estimated"]} == {"estimated"}
    assert [r["label"] for r in data["measured"]] == ["measured"] and data["measured"][0]["checkpointing"] is True
