"""Decoder shapes for the memory plan (`agents.train.memory_plan`): `ModelShape` (parameters, activation
bytes per token, the Hugging Face config of a random-weight model) and `SHAPES`, the papers' models as their
public config.json states them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from searchgym.errors import ConfigError

GB = 1e9
"""Bytes in a GB: the unit of every figure of the plan."""


@dataclass(frozen=True)
class ModelShape:
    """A decoder's shape, as its config.json states it."""

    name: str
    family: Literal["qwen2", "qwen3"]
    """qwen2: q/k/v projections with biases; qwen3: no biases, RMSNorm on each head's q and k."""
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    """Whether the output projection is the input embedding (one matrix, counted once)."""

    def __post_init__(self) -> None:
        if min(self.hidden, self.layers, self.heads, self.kv_heads, self.head_dim, self.intermediate, self.vocab) < 1:
            raise ConfigError(f"shape {self.name}: every size must be >= 1")
        if self.heads % self.kv_heads:
            raise ConfigError(
                f"shape {self.name}: heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.family not in ("qwen2", "qwen3"):
            raise ConfigError(f"shape {self.name}: family must be qwen2 or qwen3, got {self.family!r}")

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        attention = h * q + 2 * h * kv + q * h
        if self.family == "qwen2":
            attention += q + 2 * kv
        else:
            attention += 2 * self.head_dim
        return attention + 3 * h * self.intermediate + 2 * h

    def embedding_params(self) -> int:
        """Input embedding, plus the output projection when it is not tied, plus the final norm."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params()

    def activation_bytes_per_token_layer(self) -> int:
        """Bytes one decoder layer keeps for backward per token in bf16 with a fused (flash / SDPA)
        attention, which keeps no (T, T) scores. Each RMSNorm keeps its bf16 input and two fp32 copies
        (transformers upcasts); projections keep their outputs; RoPE keeps rotated q and k; attention its
        output; the SwiGLU MLP gate, up, activated gate and product."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        norms = 2 * (2 * h + 4 * h + 4 * h)
        attention = 2 * (q + 2 * kv) + 2 * (q + kv) + 2 * q
        if self.family == "qwen3":
            attention += (4 + 4 + 2) * (q + kv)  # per-head q/k norms, same pattern as the layer norms
        return norms + attention + 2 * 4 * i

    def hf_config(self, layers: int | None = None) -> Any:
        from transformers import Qwen2Config, Qwen3Config

        common = {
            "hidden_size": self.hidden,
            "num_hidden_layers": layers or self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "intermediate_size": self.intermediate,
            "vocab_size": self.vocab,
            "tie_word_embeddings": self.tied,
            "max_position_embeddings": 32768,
        }
        if self.family == "qwen2":
            return Qwen2Config(**common)
        return Qwen3Config(head_dim=self.head_dim, **common)


# From each model's public config.json on the Hugging Face hub.
SHAPES = {
    s.name: s
    for s in (
        ModelShape(
            "qwen2.5-0.5b",
            "qwen2",
            hidden=896,
            layers=24,
            heads=14,
            kv_heads=2,
            head_dim=64,
            intermediate=4864,
            vocab=151936,
            tied=True,
        ),
        ModelShape(
            "qwen3-1.7b",
            "qwen3",
            hidden=2048,
            layers=28,
            heads=16,
            kv_heads=8,
            head_dim=128,
            intermediate=6144,
            vocab=151936,
            tied=True,
        ),
        ModelShape(
            "qwen3-8b",
            "qwen3",
            hidden=4096,
            layers=36,
            heads=32,
            kv_heads=8,
            head_dim=128,
            intermediate=12288,
            vocab=151936,
            tied=False,
        ),
        # Not a real model: small enough for the tests and a CPU smoke run.
        ModelShape(
            "tiny",
            "qwen3",
            hidden=64,
            layers=2,
            heads=4,
            kv_heads=2,
            head_dim=16,
            intermediate=128,
            vocab=512,
            tied=True,
        ),
    )
}
PAPER_SHAPES = ("qwen2.5-0.5b", "qwen3-1.7b", "qwen3-8b")
