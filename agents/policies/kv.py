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

    def fill_rows(self, rows: list[tuple[torch.Tensor, torch.Tensor] | None], width: int, capacity: int) -> None:
        """Start from each row's kept (H, L_i, D) keys and values (None: the row kept none), right-aligned in the
        first `width` positions with zeros before them (masked out by the attention mask), with room for
        `capacity` positions: written straight into the buffer, with no batch-sized copy in between."""
        k0, v0 = next(r for r in rows if r is not None)
        self.device = k0.device
        self._k = k0.new_empty((len(rows), k0.shape[0], max(capacity, width), k0.shape[-1]))
        self._v = v0.new_empty((len(rows), v0.shape[0], max(capacity, width), v0.shape[-1]))
        self._k[:, :, :width].zero_()  # never garbage: a NaN at a masked position would still reach the output
        self._v[:, :, :width].zero_()
        for i, row in enumerate(rows):
            if row is not None:
                k, v = row
                self._k[i, :, width - k.shape[1] : width] = k
                self._v[i, :, width - v.shape[1] : width] = v
        self.length = width
        self.is_initialized = True
        self._views()

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows `indices` (increasing), moved to the front of the buffer in place: a copy of the whole
        cache per finished row would allocate (and page-fault in) a cache's worth of memory each time. The
        buffer keeps its size until the chunk ends, so a chunk's finished rows free their cache memory then,
        not as they finish (with `fill_rows`, measured: greedy evaluation 1.85 -> 1.56 s a question, its peak
        0.4 GB higher at 100 questions; docs/experiment-log.md, "Evaluation against its size")."""
        if not self.is_initialized:
            return
        kept = indices.tolist()
        if kept != sorted(kept) or len(set(kept)) != len(kept):  # not the decoder's case: a plain gather
            self._k, self._v = self._k[indices], self._v[indices]
        else:
            for j, i in enumerate(kept):  # j <= i: a row is read before anything is written over it
                if j != i:
                    self._k[j, :, : self.length] = self._k[i, :, : self.length]
                    self._v[j, :, : self.length] = self._v[i, :, : self.length]
            self._k, self._v = self._k[: len(kept)], self._v[: len(kept)]
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


class RowKV:
    """One row's keys and values in every layer, as two tensors: (layers, H, L, D) keys and (layers, H, L, D')
    values; `kv[layer]` is that layer's (H, L, D) keys and values.

    Two allocations per row, not two per layer: a layer's share of a short row is a few hundred kilobytes,
    under the allocator's mmap threshold (`agents.memory.MMAP_THRESHOLD`), so per-layer copies came from the
    C heap, where rows of every length freed and made turn after turn fragment it: a 200-question greedy
    evaluation grew its heap to 1.27 GB with 0.6-0.9 GB of it free, and its peak RSS by 0.4 GB over 80
    questions (docs/experiment-log.md, "Evaluation against its size"). A whole row is megabytes: mapped on its own
    and returned to the OS when freed."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys, self.values = keys, values

    @classmethod
    def of_row(cls, layers, index: int, columns: torch.Tensor) -> RowKV | list[tuple[torch.Tensor, torch.Tensor]]:
        """Row `index`'s keys and values at `columns` in each of `layers` (`GrowingLayer`s); a per-layer list
        where the layers' shapes differ (and cannot be stacked)."""
        k0, v0 = layers[0].keys, layers[0].values
        if any(layer.keys.shape[1:] != k0.shape[1:] or layer.values.shape[1:] != v0.shape[1:] for layer in layers):
            return [layer.row(index, columns) for layer in layers]
        keys = k0.new_empty((len(layers), k0.shape[1], len(columns), k0.shape[-1]))
        values = v0.new_empty((len(layers), v0.shape[1], len(columns), v0.shape[-1]))
        for i, layer in enumerate(layers):
            torch.index_select(layer.keys[index], 1, columns, out=keys[i])
            torch.index_select(layer.values[index], 1, columns, out=values[i])
        return cls(keys, values)

    def __getitem__(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.keys[layer], self.values[layer]

    def __len__(self) -> int:
        return self.keys.shape[0]

    @property
    def nbytes(self) -> int:
        return self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size()


@dataclass
class KeptRow:
    """What one finished row leaves for the next call: its token ids (those whose keys and values were
    computed: the prompt and every sampled token but the last) and its keys and values: `kv[layer]` is
    that layer's (H, L, D) keys and values (a `RowKV`, or a per-layer list)."""

    ids: list[int]
    kv: RowKV | list[tuple[torch.Tensor, torch.Tensor]]


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
