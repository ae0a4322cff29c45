"""The precision a policy computes in: float32, or bfloat16 matrix products over float32 weights.

One setting, `dtype` (`TrainConfig.dtype`, `HFPolicyConfig.dtype`, every command's `--dtype`), decides it:

- `float32`: everything in float32, as before this setting existed.
- `bfloat16`: the matrix products of the decoder (every linear layer and the attention) run in bfloat16;
  the weights the optimizer updates and its states stay float32, and so do the residual stream, the norms,
  the embeddings, the vocabulary projection and everything after it (logits -> logprobs, the loss,
  advantages, KL). The update runs the decoder under `torch.autocast`, which casts each linear layer's
  float32 weight to bfloat16 as it is used; the sampler reads a bfloat16 copy of those weights
  (`LinearCopy`), cast the same way (round to nearest even) and refreshed after every weight change, so
  that decoding does not re-cast 100M+ weights at every token. Both give identical numbers for the same
  forward pass (tested); a logit of magnitude 16-32 rounded to bfloat16 would move by steps of 0.125,
  which is why the vocabulary projection stays float32.
- `auto`: bfloat16 on a CPU that multiplies bfloat16 natively (x86 `avx512_bf16` or `amx_bf16`, Arm
  `bf16`, read from /proc/cpuinfo by `searchgym.retrieval.encoders.cpu_has_native_bf16`), where its
  matmuls run at about twice the float32 rate; float32 on other CPUs, which emulate bfloat16 slower than
  float32, and on GPUs (where bfloat16 is a choice to name: `bfloat16`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Literal, get_args

from searchgym.errors import ConfigError

if TYPE_CHECKING:
    import torch

Precision = Literal["auto", "float32", "bfloat16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


def compute_dtype(precision: str, device: str | torch.device = "cpu", *, cpuinfo: str = "/proc/cpuinfo") -> torch.dtype:
    """The dtype of the matrix products for the setting `precision` on `device` (see the module docstring).

    >>> compute_dtype("float32")
    torch.float32
    """
    import torch

    if precision not in PRECISIONS:
        raise ConfigError(f"dtype must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "float32":
        return torch.float32
    if precision == "bfloat16":
        return torch.bfloat16
    from searchgym.retrieval.encoders import cpu_has_native_bf16

    if torch.device(device).type == "cpu" and cpu_has_native_bf16(cpuinfo):
        return torch.bfloat16
    return torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> `bfloat16`: how results and fingerprints record a precision."""
    return str(dtype).removeprefix("torch.")


def autocast(dtype: torch.dtype, device: str | torch.device = "cpu") -> AbstractContextManager:
    """`torch.autocast` to `dtype` on `device`'s kind, or nothing for float32."""
    import torch

    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def output_logits(model: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """(..., V) float32 logits of the float32 hidden states `hidden` through `model`'s output projection,
    whatever autocast is active around the call."""
    import torch

    head = model.get_output_embeddings()
    with torch.autocast(device_type=hidden.device.type, enabled=False):
        bias = None if head.bias is None else head.bias.float()
        return torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)


def _linear_weights(model: torch.nn.Module) -> Iterator[torch.nn.Parameter]:
    """The weights autocast would cast: every `nn.Linear`'s but the output projection's (which may be tied to
    the input embeddings, and whose logits must stay float32)."""
    import torch

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head_weight = getattr(head, "weight", None)
    seen: set[int] = set()
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module.weight is not head_weight and id(module.weight) not in seen:
            seen.add(id(module.weight))
            yield module.weight


class LinearCopy:
    """A copy of a float32 model whose linear weights are `dtype` casts of the model's, for forward passes
    under `autocast(dtype)`: the same numbers as the model itself under autocast, without casting every
    weight at every call, in a quarter of the memory a float32 copy of those weights would take.

    `share=True` (the sampler's copy) shares every other parameter and buffer with the model, so only the
    linear weights need `refresh()` after the model changes; `share=False` (a frozen reference for a KL)
    copies them too, so the copy keeps the model's weights of the moment it was made.
    """

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype | None = None, *, share: bool = True):
        import torch

        dtype = dtype or torch.bfloat16
        self.source, self.dtype, self.share = model, dtype, share
        self._build()

    def _build(self) -> None:
        import torch

        model = self.source
        memo: dict[int, object] = {}
        self._pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            for weight in _linear_weights(model):
                # A frozen reference keeps the model's trainable flags: checkpoints save what is trainable, and a
                # cold-started reference must be saved whole. Nothing steps it, and its forward runs without grad.
                trainable = weight.requires_grad and not self.share
                cast = torch.nn.Parameter(weight.detach().to(self.dtype), requires_grad=trainable)
                memo[id(weight)] = cast
                self._pairs.append((weight, cast))
            if self.share:
                for tensor in [*model.parameters(), *model.buffers()]:
                    memo.setdefault(id(tensor), tensor)
            # deepcopy takes what `memo` maps (the casts; with `share`, the model's own tensors) and copies the
            # module objects around them, so the copy runs the model's own forward code.
            self.model = copy.deepcopy(model, memo)
        self.model.eval()
        self._layout = self._structure()

    def _structure(self) -> tuple[int, ...]:
        return tuple(id(p) for p in self.source.parameters())

    def refresh(self) -> None:
        """Cast the model's current linear weights into the copy (rebuilding it when the model's parameters
        were replaced rather than written in place)."""
        import torch

        if self._structure() != self._layout:
            self._build()
            return
        with torch.no_grad():
            for weight, cast in self._pairs:
                if cast.shape != weight.shape:  # released
                    cast.data = weight.detach().to(self.dtype)
                else:
                    cast.copy_(weight)

    def release(self) -> None:
        """Free the casts' memory until the next `refresh` (while the model trains, say: the copy is stale
        after the optimizer step anyway)."""
        for _, cast in self._pairs:
            cast.data = cast.data.new_empty(0)

    @property
    def nbytes(self) -> int:
        """Bytes the casts take (what the copy adds to the model, with `share`)."""
        return sum(cast.numel() * cast.element_size() for _, cast in self._pairs)


def frozen_copy(model: torch.nn.Module, dtype: torch.dtype | None = None) -> torch.nn.Module:
    """A frozen copy of `model`'s weights of now (a KL's reference), for forward passes in `dtype`: a float32
    copy, or for bfloat16 a `LinearCopy` (`share=False`), which gives the same numbers under autocast in
    ~60% of the memory (SmolLM2-135M: 0.33 GB against 0.54). None: float32."""
    import torch

    if dtype is None or dtype == torch.float32:
        return copy.deepcopy(model).eval()
    return LinearCopy(model, dtype, share=False).model
