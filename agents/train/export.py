"""Turn a training checkpoint into a plain model folder that `from_pretrained` and SGLang load.

    python -m agents export runs/train/checkpoints/step-000008 runs/train/model-step8

Runs in one process without a process group or a GPU. A sharded (FSDP2) checkpoint: the model is built on
the CPU from the config saved in the checkpoint, and the shards are read straight into its tensors (the
weights are held once, the optimizer states are not read). A whole-weights checkpoint (`policy.safetensors`,
what a run without sharding writes): the model the run started from (its `model` setting in `state.json`) is
loaded and every one of its weights replaced by the checkpoint's. Either is written with `save_pretrained`
beside the tokenizer, e.g. to start another run from a trained policy (`--start-model`).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from agents.train.checkpoint import CheckpointError
from agents.train.sharded_checkpoint import MODEL_STATE, is_sharded

logger = logging.getLogger(__name__)


def load_sharded_model(checkpoint: str | Path):
    """(model in float32 on the CPU with the checkpoint's weights, its tokenizer)."""
    import torch.distributed.checkpoint as dcp
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    checkpoint = Path(checkpoint)
    if not is_sharded(checkpoint) or not (checkpoint / "model" / "config.json").is_file():
        raise CheckpointError(f"{checkpoint} is not a sharded checkpoint (it needs {MODEL_STATE}/ and model/config.json, as a "
                              "run with --sharding fsdp2 writes them); a whole-weights checkpoint's policy.safetensors loads directly")
    config = AutoConfig.from_pretrained(checkpoint / "model")
    model = AutoModelForCausalLM.from_config(config)
    # The sharded root wraps the LM as `lm`; tied weights are one tensor here and in the checkpoint.
    params = {f"lm.{name}": p.data for name, p in model.named_parameters()}
    persistent = set(model.state_dict())
    params.update({f"lm.{name}": b for name, b in model.named_buffers() if name in persistent})
    try:
        with warnings.catch_warnings():
            # DCP warns that it loads in a single process, which is this tool's point.
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load({"model": params}, checkpoint_id=str(checkpoint / MODEL_STATE), no_dist=True)
    except Exception as e:
        raise CheckpointError(f"cannot read the model shards of {checkpoint}: {type(e).__name__}: {e}") from e
    tokenizer = AutoTokenizer.from_pretrained(checkpoint / "model")
    model.eval()
    return model, tokenizer


def load_whole_model(checkpoint: str | Path):
    """(model in float32 on the CPU with a whole-weights checkpoint's policy weights, its tokenizer)."""
    import json

    from agents.train.checkpoint import load_policy_weights
    from agents.train.setup import load_model

    checkpoint = Path(checkpoint)
    try:
        config = json.loads((checkpoint / "state.json").read_text())["config"]
        name, seed = config["model"], config.get("seed", 0)
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{checkpoint} is not a checkpoint: it has neither {MODEL_STATE}/ (sharded) nor a state.json naming "
                              f"the model the run trained ({type(e).__name__}: {e})") from e
    model, tokenizer = load_model(name, seed)
    load_policy_weights(checkpoint, model, name)
    model.eval()
    return model, tokenizer


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> Path:
    """Write `checkpoint`'s weights, config and tokenizer to the folder `out`; returns it."""
    model, tokenizer = load_sharded_model(checkpoint) if is_sharded(Path(checkpoint)) else load_whole_model(checkpoint)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    logger.info("exported %s to %s", checkpoint, out)
    return out
