"""Weight sync: the trained weights reach the rollout servers after every update."""

from __future__ import annotations

import time
from pathlib import Path

from agents.models import save_model
from searchgym.errors import BackendError


class WeightSync:
    """Pushes the trained model to every SGLang server behind `rollout_policy` and checks each reports the
    new weight version. With the in-process backend (the rollout policy is the trained policy) it does
    nothing. Distributed, rank 0 pushes for everyone between barriers.

    Sharded (`sharded`, an `agents.train.fsdp.ShardedModel`), every rank takes part in gathering the whole
    weights bucket by bucket: into the in-process rollout replica `model` (backend `hf`), or into the model
    folder the servers load (disk sync; rank 0 writes it and makes the requests)."""

    def __init__(self, config, model, tokenizer, rollout_policy, out: Path, accelerator=None, is_main: bool = True, sharded=None):
        self.config, self.model, self.tokenizer, self.rollout_policy = config, model, tokenizer, rollout_policy
        self.out, self.accelerator, self.is_main, self.sharded = out, accelerator, is_main, sharded

    def __call__(self) -> float:
        """Push; returns the seconds it took (0 with the in-process backend)."""
        c = self.config
        start = time.perf_counter()
        if self.sharded is not None:
            return self._sharded_push(start)
        if c.rollout.backend == "hf":
            return 0.0
        if self.accelerator is not None:
            # Rank 0 pushes for everyone: after every rank has finished its update, before any samples again.
            self.accelerator.wait_for_everyone()
            if not self.is_main:
                self.accelerator.wait_for_everyone()
                return time.perf_counter() - start
        if c.rollout.weight_sync == "disk":
            # Absolute: the servers resolve the path from their own working directory.
            folder = save_model(self.model, self.tokenizer, (self.out / "rollout-weights").resolve())
            self.rollout_policy.load_weights(folder)
        else:
            self.rollout_policy.update_weights(self.model.state_dict().items())
        self._check_versions()
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()
        return time.perf_counter() - start

    def _sharded_push(self, start: float) -> float:
        if self.config.rollout.backend == "hf":
            self.sharded.copy_into(self.model)
            return time.perf_counter() - start
        folder = self.sharded.save_pretrained_streamed((self.out / "rollout-weights").resolve(), self.tokenizer, write=self.is_main)
        if self.is_main:
            self.rollout_policy.load_weights(folder)
            self._check_versions()
        self.accelerator.wait_for_everyone()
        return time.perf_counter() - start

    def _check_versions(self) -> None:
        for member in self.rollout_policy.members:
            reported = member.model_info().get("weight_version")
            if reported != str(member.weight_version):
                raise BackendError(f"the SGLang server at {member.config.url} reports weight version {reported!r} after the "
                                   f"update, expected {str(member.weight_version)!r}: did another process update or restart it?")
