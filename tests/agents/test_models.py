"""Tiny random models for tests, model folders, dtype resolution."""

from __future__ import annotations

import pytest
import torch

from agents.models import (
    TinyModelConfig,
    build_tiny_model,
    build_tiny_tokenizer,
    load_model_and_tokenizer,
    resolve_dtype,
    save_model,
)
from searchgym.errors import ConfigError


def test_tiny_models_are_reproducible_and_seeded():
    a, tok = build_tiny_model(TinyModelConfig(seed=0))
    b, _ = build_tiny_model(TinyModelConfig(seed=0))
    c, _ = build_tiny_model(TinyModelConfig(seed=1))
    ids = torch.tensor([tok.encode("The Seine flows through Paris.", add_special_tokens=False)])
    with torch.no_grad():
        la, lb, lc = (m(ids).logits for m in (a, b, c))
    assert torch.equal(la, lb) and not torch.allclose(la, lc)
    assert a.config.num_hidden_layers == 2 and a.config.vocab_size == len(tok)
    assert not a.training


def test_building_a_model_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(TinyModelConfig(seed=9))
    assert torch.equal(torch.rand(3), expected)


def test_tiny_tokenizer_round_trips_and_has_chatml():
    tok = build_tiny_tokenizer()
    text = "Doc 1(Title: Café) <information>ünïcode ✓</information>\n\n"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.encode("<|im_end|>", add_special_tokens=False) == [tok.eos_token_id]


def test_saved_folders_load_back(tmp_path):
    model, tok = build_tiny_model(TinyModelConfig(seed=4))
    save_model(model, tok, tmp_path / "m")
    loaded, tok2 = load_model_and_tokenizer(tmp_path / "m", dtype="float32")
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, loaded(ids).logits)
    assert tok2.chat_template == tok.chat_template and not loaded.training


def test_config_and_dtype_errors(tmp_path):
    for bad in ({"vocab_size": 100}, {"num_layers": 0}, {"hidden_size": 63}, {"num_heads": 4, "num_kv_heads": 3}):
        with pytest.raises(ConfigError):
            TinyModelConfig(**bad)
    with pytest.raises(ConfigError):
        resolve_dtype("float8", "cpu")  # type: ignore[arg-type]
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    with pytest.raises(ConfigError, match="cannot load model"):
        load_model_and_tokenizer(tmp_path / "empty-folder")
