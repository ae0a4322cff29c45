"""KV caches for `HFPolicy`: a cache that grows in place, and the rows kept between calls for reuse.

Two costs dominate multi-turn decoding on a CPU besides the matmuls themselves:

- transformers' `DynamicLayer` appends each step's keys and values with `torch.cat`, copying the whole
  cache once per generated token; `GrowingLayer` writes into a buffer with spare room (doubling when full),
  so a step copies only its own new entries;
- a multi-turn episode comes back every turn with its whole context (prompt, earlier turns, the new
  observation). `KeptRows` holds, after each `generate` call, every row's keys and values for the tokens
  it has seen, so the next call prefills only what was appended since (the observation and whatever
  follows), as SGLang's prefix cache does on a server.

Kept rows are valid for the weights that computed them only: `weights_fingerprint` changes whenever any
parameter is modified in place (an optimizer step, `update_weights`, `load_state_dict`), and `KeptRows`
drops everything when it does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def plain_cache(model):
    """transformers' own `DynamicCache` for `model` (concatenating per token)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers < 4.56 builds the cache without a config
        return DynamicCache()


def growing_cache(model, dtype: torch.dtype | None = None) -> object | None:
    """A transformers `DynamicCache` for `model` whose layers grow in place, or None when the model's cache
    is not made only of full-attention `DynamicLayer`s (sliding-window or linear-attention layers: those
    keep transformers' own cache, and no rows are kept between calls).

    `dtype`: store keys and values in it (None: as computed). Under bfloat16 autocast the attention casts
    its keys and values to bfloat16 before using them, so storing them in bfloat16 gives the same numbers
    in half the memory of the float32 keys that rotary embeddings return."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # pragma: no cover - transformers without the layered cache (< 4.56)
        return None
    cache = plain_cache(model)
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    cache.layers = [GrowingLayer(dtype) for _ in layers]
    return cache


def _layer_base():
    from transformers.cache_utils import DynamicLayer

    return DynamicLayer


class GrowingLayer(_layer_base()):
    """A full-attention cache layer over a (B, H, capacity, D) buffer. `keys` / `values` are views of its
    first `length` positions, so everything transformers reads from a `DynamicLayer` stays valid. `dtype`:
    the keys' and values' storage dtype (None: the dtype they are computed in)."""

    def __init__(self, dtype: torch.dtype | None = None):
        super().__init__()
        self.store_dtype = dtype

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        b, h, _, d = key_states.shape
        self._k = key_states.new_empty((b, h, 0, d), dtype=self.store_dtype or key_states.dtype)
        self._v = value_states.new_empty((b, h, 0, d), dtype=self.store_dtype or value_states.dtype)
        self.length = 0
        self.keys, self.values = self._k, self._v
        self.is_initialized = True

    def reserve(self, capacity: int) -> None:
        """Make room for `capacity` positions without reallocating later."""
        if capacity <= self._k.shape[-2]:
            return
        b, h, _, d = self._k.shape
        k = self._k.new_empty((b, h, capacity, d))
        v = self._v.new_empty((b, h, capacity, d))
        k[:, :, : self.length] = self._k[:, :, : self.length]
        v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v = k, v
        self._views()

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        if self.length + new > self._k.shape[-2]:
            self.reserve(max(2 * self._k.shape[-2], self.length + new + 64))
        self._k[:, :, self.length : self.length + new] = key_states
        self._v[:, :, self.length : self.length + new] = value_states
        self.length += new
        self._views()
        return self.keys, self.values

    def fill(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        """Start from (B, H, L, D) `keys` and `values` (the kept rows, left-padded), with room for `capacity`."""
        self.lazy_initialization(keys, values)
        self.reserve(max(capacity, keys.shape[-2]))
        self._k[:, :, : keys.shape[-2]] = keys
        self._v[:, :, : values.shape[-2]] = values
        self.length = keys.shape[-2]
        self._views()

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._k, self._v = self._k[indices], self._v[indices]
            self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._k = self._k.repeat_interleave(repeats, dim=0)
            self._v = self._v.repeat_interleave(repeats, dim=0)
            self._views()

    def crop(self, tokens_to_remove: int) -> None:  # pragma: no cover - not used by HFPolicy
        raise NotImplementedError("GrowingLayer does not crop")

    def row(self, index: int, columns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of row `index`'s keys and values at `columns` (the row's real, unpadded positions): (H, L, D)."""
        return self._k[index][:, columns].clone(), self._v[index][:, columns].clone()

    def _views(self) -> None:
        self.keys = self._k[:, :, : self.length]
        self.values = self._v[:, :, : self.length]


@dataclass
class KeptRow:
    """What one finished row leaves for the next call: its token ids (those whose keys and values were
    computed: the prompt and every sampled token but the last) and, per layer, (H, L, D) keys and values."""

    ids: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]


def weights_fingerprint(model: torch.nn.Module) -> tuple[int, int]:
    """Changes whenever a parameter or buffer of `model` is replaced or modified in place by an operator that
    torch counts in the tensor's `_version`. A fused optimizer step (`AdamW(fused=True)`) is not counted: whoever
    steps one tells the policy (`HFPolicy.mark_updated`)."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(id(t) for t in tensors), sum(t._version for t in tensors)


class KeptRows:
    """The rows one `generate` call leaves for the next: `match` finds, for a prompt, the kept row whose
    ids are its longest prefix; `replace` installs a call's rows. Everything is dropped when the weights'
    fingerprint changes."""

    def __init__(self) -> None:
        self.rows: list[KeptRow] = []
        self.fingerprint: tuple[int, int] | None = None

    def check(self, fingerprint: tuple[int, int]) -> None:
        if fingerprint != self.fingerprint:
            self.rows = []
            self.fingerprint = fingerprint

    def match(self, prompt: list[int]) -> KeptRow | None:
        best = None
        for row in self.rows:
            n = len(row.ids)
            # At least one token must be left to prefill: it gives the logits of the first new token.
            if n < len(prompt) and (best is None or n > len(best.ids)) and prompt[:n] == row.ids:
                best = row
        return best

    def replace(self, rows: list[KeptRow]) -> None:
        self.rows = rows

    def clear(self) -> None:
        self.rows = []

    @property
    def tokens(self) -> int:
        return sum(len(r.ids) for r in self.rows)
