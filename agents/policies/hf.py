"""`HFPolicy`: a transformers causal LM sampled in-process (CPU or GPU).

The sampling loop is written here rather than delegated to `model.generate` so that the logprob of every
sampled token is computed exactly as `agents.policies.base` defines it, so that each prompt can carry its
own token budget, and so that finished rows leave the batch (the KV cache shrinks with them) instead of
being padded until the longest row ends. Prompts are left-padded with explicit position ids, and the
prefill of a prompt is shared by its `n` samples.

Precision (`HFPolicyConfig.dtype`, `agents.precision`): a float32 model decodes in float32, or, in bfloat16,
through a `LinearCopy` of it (bfloat16 linear weights, everything else shared) under autocast, refreshed
whenever the model's weights change, with keys and values kept in bfloat16 and the vocabulary projection
and every logprob in float32: the numbers a teacher-forced forward pass of the model under the same
autocast gives (`agents.rollout.batch.token_logprobs` with that dtype).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from agents.models import DTypeName, ensure_pad_token, load_model_and_tokenizer
from agents.policies.base import Completion, SamplingParams, check_budgets, find_stop, resolve_stop_ids
from agents.policies.kv import KeptRow, KeptRows, RowKV, growing_cache, plain_cache, weights_fingerprint
from agents.policies.sampling import sample_tokens
from agents.precision import PRECISIONS, LinearCopy, autocast, compute_dtype, dtype_name, output_logits
from searchgym.errors import BatchError, ConfigError, DataError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HFPolicyConfig:
    """How to load and batch an in-process policy."""

    model: str = "smollm2-135m"
    """`smollm2-135m`, a local model folder, or a Hugging Face id (online users)."""
    device: str = "cpu"
    dtype: DTypeName = "auto"
    """The precision the policy computes in (`agents.precision`). On CPU the weights stay float32, and
    `bfloat16` (or `auto` on a CPU with native bfloat16 instructions) decodes through a bfloat16 copy of the
    linear weights; `float32` (`auto` elsewhere) decodes the weights as they are. A policy loaded on a GPU
    by `from_config` is loaded in this dtype (`auto`: bfloat16 where the GPU supports it)."""
    cache_dir: str | None = None
    """Where `smollm2-135m` is converted once (default `~/.cache/searchgym/models`)."""
    max_batch_rows: int = 64
    """Rows (prompts x n) decoded together at most; larger calls are split into chunks."""
    reuse_kv: bool = True
    """Keep every row's keys and values after a call, so that a prompt extending a kept row (the next turn
    of a multi-turn episode) prefills only its new tokens, and grow the cache in place while decoding.
    False: transformers' own `DynamicCache`, every call prefilled from scratch (the older, slower path,
    kept for comparison; the sampled tokens agree within float noise)."""
    max_kept_gb: float = 2.0
    """Memory the kept rows of one call may take at most (GB); rows past it are not kept, and their next
    turn is prefilled in full. SmolLM2-135M keeps ~46 KB a token in float32, ~23 KB in bfloat16. The rollout
    engine runs no more episodes side by side than this holds at their longest (`episodes_at_once`)."""
    seed: int | None = None
    """Seeds the policy's sampler once at construction (a call's `SamplingParams.seed` overrides it)."""

    def __post_init__(self) -> None:
        if self.max_batch_rows < 1:
            raise ConfigError(f"max_batch_rows must be >= 1, got {self.max_batch_rows}")
        if not self.max_kept_gb >= 0:
            raise ConfigError(f"max_kept_gb must be >= 0, got {self.max_kept_gb}")


@dataclass
class DecodeStats:
    """Tokens an `HFPolicy` has processed, cumulative."""

    prefill_tokens: int = 0
    """Prompt tokens run through the model (new tokens only when kept rows were reused)."""
    reused_tokens: int = 0
    """Prompt tokens whose keys and values came from a kept row instead of a prefill."""
    sampled_tokens: int = 0

    def copy(self) -> DecodeStats:
        return DecodeStats(self.prefill_tokens, self.reused_tokens, self.sampled_tokens)


class HFPolicy:
    """In-process policy over a `transformers` causal LM.

    The model object is shared, not copied: a learner that trains `policy.model` in place changes what the
    next `generate` samples (call `mark_updated()` to count it in `weight_version`).
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, config: HFPolicyConfig | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or HFPolicyConfig()
        ensure_pad_token(tokenizer)
        self._version = 0
        self._kept = KeptRows()
        self.stats = DecodeStats()
        """Token counts since construction (read differences around a call to time one)."""
        self._device = next(model.parameters()).device
        self._generator = torch.Generator(device=self._device)
        self.compute_dtype = _compute_dtype(model, self.config.dtype, self._device)
        """The dtype of the decoder's matrix products (`agents.precision`)."""
        weights = next(model.parameters()).dtype
        self._copy = LinearCopy(model, self.compute_dtype) if self.compute_dtype != weights else None
        self._copy_fingerprint = weights_fingerprint(model)
        # transformers >= 5.2x names the KV-cache argument `cache`; earlier versions `past_key_values`.
        accepted = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in accepted else "past_key_values"
        decoder_accepts = inspect.signature(model.get_decoder().forward).parameters if hasattr(model, "get_decoder") else {}
        self._decoder_cache_kw = "cache" if "cache" in decoder_accepts else "past_key_values"
        # Only the last position's logits are needed after the prefill (saves a vocab-sized matmul per token).
        keep = "logits_to_keep" if "logits_to_keep" in accepted else "num_logits_to_keep" if "num_logits_to_keep" in accepted else None
        self._keep_last = {keep: 1} if keep else {}
        if self.config.seed is not None:
            self._generator.manual_seed(self.config.seed)
        else:
            self._generator.seed()

    @classmethod
    def from_config(cls, config: HFPolicyConfig) -> HFPolicy:
        # On CPU the weights load in float32 (a float16 policy excepted) and a bfloat16 policy decodes through its copy.
        load = config.dtype if str(config.device).startswith("cuda") or config.dtype == "float16" else "float32"
        model, tokenizer = load_model_and_tokenizer(config.model, cache_dir=config.cache_dir, device=config.device, dtype=load)
        return cls(model, tokenizer, config=config)

    @property
    def sampling_model(self) -> torch.nn.Module:
        """The module that decodes: the model, or its bfloat16 `LinearCopy` (shares its embeddings and norms)."""
        return self._copy.model if self._copy is not None else self.model

    def episodes_at_once(self, tokens: int) -> int | None:
        """How many rows of `tokens` tokens each the kept-row budget (`max_kept_gb`) holds (at least one); None
        when rows are not kept. The rollout engine runs no more episodes side by side, so that every episode's
        next turn reuses its rows."""
        per_token = self.kv_bytes_per_token()
        if not self.config.reuse_kv or per_token is None:
            return None
        return max(1, int(self.config.max_kept_gb * 1e9 // (per_token * max(tokens, 1))))

    def kv_bytes_per_token(self) -> int | None:
        """Bytes the keys and values of one token take in the cache (None when the model's config does not say)."""
        c = self.model.config
        layers, heads = getattr(c, "num_hidden_layers", None), getattr(c, "num_key_value_heads", None) or getattr(c, "num_attention_heads", None)
        head_dim = getattr(c, "head_dim", None) or (c.hidden_size // c.num_attention_heads if getattr(c, "hidden_size", None) else None)
        if not (layers and heads and head_dim):
            return None
        stored = self.compute_dtype if self._copy is not None else next(self.model.parameters()).dtype
        return 2 * layers * heads * head_dim * torch.empty((), dtype=stored).element_size()

    # -- generation -------------------------------------------------------------------------------------

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, max_new_tokens: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        budgets = check_budgets(prompts, params, max_new_tokens)
        generator = self._generator
        if params.seed is not None:
            generator = torch.Generator(device=self._device).manual_seed(params.seed)
        prompts = [list(p) for p in prompts]
        fingerprint = weights_fingerprint(self.model)
        self._kept.check(fingerprint)
        if self._copy is not None and fingerprint != self._copy_fingerprint:
            self._copy.refresh()  # the model changed (an optimizer step, loaded weights): recast its linear weights
            self._copy_fingerprint = fingerprint
        kept = [self._kept.match(p) for p in prompts] if self.config.reuse_kv else [None] * len(prompts)
        # From here each kept row lives only as long as `kept` names it: a chunk reads its rows into its cache
        # and drops them, so the last call's rows free as this call's are made (at most one budget in all).
        self._kept.clear()
        results: list[list[Completion]] = [[] for _ in prompts]
        left: list[KeptRow] = []
        room = [int(self.config.max_kept_gb * 1e9)]  # bytes the rows kept by this call may still take
        # Sorting by length before chunking keeps left padding small. The order does not depend on the kept
        # rows: each row's place in the batch decides which random numbers it samples with, so reusing rows
        # must not change it (with reuse on or off, a seed gives the same tokens).
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        per_chunk = max(1, self.config.max_batch_rows // params.n)
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), per_chunk):
                chunk = order[start : start + per_chunk]
                reused = [kept[i] for i in chunk]
                for i in chunk:
                    kept[i] = None
                outs, rows = self._decode([prompts[i] for i in chunk], [budgets[i] for i in chunk], reused, params, generator, room)
                del reused
                left += rows
                for k, i in enumerate(chunk):
                    results[i] = outs[k * params.n : (k + 1) * params.n]
        finally:
            self.model.train(was_training)
        # Only this call's rows are kept: an episode that was not continued has ended.
        self._kept.replace(left)
        self._kept.fingerprint = weights_fingerprint(self.model)
        return results

    @torch.inference_mode()
    def _decode(
        self, prompts: list[list[int]], budgets: list[int], kept: list[KeptRow | None], params: SamplingParams, generator: torch.Generator,
        room: list[int],
    ) -> tuple[list[Completion], list[KeptRow]]:
        n, device = params.n, self._device
        cache = growing_cache(self.model, self.compute_dtype if self._copy is not None else None) if self.config.reuse_kv else None
        reuse = cache is not None
        if not reuse:
            kept = [None] * len(prompts)
            cache = plain_cache(self.model)
        past = [len(k.ids) if k else 0 for k in kept]
        new = [p[c:] for p, c in zip(prompts, past)]
        width_past, width_new = max(past), max(len(x) for x in new)
        ids, attn, positions = (t.to(device) for t in _left_padded(new, past, int(self.tokenizer.pad_token_id)))
        if reuse:
            capacity = width_past + width_new + max(budgets)
            if width_past:
                for layer_index, layer in enumerate(cache.layers):
                    layer.fill_rows([k.kv[layer_index] if k is not None else None for k in kept], width_past, capacity)
            kept.clear()  # read into the cache: the caller's list was their last holder
        self.stats.prefill_tokens += sum(len(x) for x in new)
        self.stats.reused_tokens += sum(past)
        logits = self._last_logits(ids, attn, positions, cache)
        next_pos = torch.tensor([len(p) for p in prompts], dtype=torch.long, device=device)
        if n > 1:  # one prefill per prompt, shared by its n samples
            cache.batch_repeat_interleave(n)
            logits, attn, next_pos = (t.repeat_interleave(n, dim=0) for t in (logits, attn, next_pos))
        row_budget = [b for b in budgets for _ in range(n)]
        row_prompt = [p for p in prompts for _ in range(n)]
        stop_ids = set(resolve_stop_ids(self.tokenizer, params))
        tail_len = max((len(s.encode("utf-8")) for s in params.stop), default=0) + 1
        tokens: list[list[int]] = [[] for _ in row_budget]
        logps: list[list[float]] = [[] for _ in row_budget]
        ends: list[tuple[str, str | int | None]] = [("length", None)] * len(row_budget)
        left: list[KeptRow] = []
        live = list(range(len(row_budget)))  # original row of each batch row
        while True:
            tok, lp = sample_tokens(logits, params, generator)
            keep, done = [], []
            for j, (r, t, l) in enumerate(zip(live, tok.tolist(), lp.tolist())):
                tokens[r].append(t)
                logps[r].append(l)
                end = self._finished(tokens[r], row_budget[r], stop_ids, params.stop, tail_len)
                if end is None:
                    keep.append(j)
                else:
                    ends[r] = end
                    done.append(j)
            if reuse:
                # The cache holds every token fed so far: the prompt and all sampled tokens but the last.
                for j in done:
                    r = live[j]
                    columns = attn[j].nonzero()[:, 0]
                    size = sum(2 * layer.keys[j].numel() // layer.keys.shape[-2] * len(columns) * layer.keys.element_size() for layer in cache.layers)
                    if size > room[0]:
                        continue  # over the memory budget: this row's next turn is prefilled in full
                    room[0] -= size
                    left.append(KeptRow(row_prompt[r] + tokens[r][:-1], RowKV.of_row(cache.layers, j, columns)))
            if not keep:
                break
            if len(keep) < len(live):
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                attn, next_pos, tok = attn[index], next_pos[index], tok[index]
                live = [live[j] for j in keep]
            attn = torch.cat([attn, attn.new_ones((len(live), 1))], dim=1)
            logits = self._last_logits(tok[:, None], attn, next_pos[:, None], cache)
            next_pos = next_pos + 1
        self.stats.sampled_tokens += sum(len(t) for t in tokens)
        completions = [Completion(token_ids=tokens[r], logprobs=logps[r], text=self.tokenizer.decode(tokens[r], skip_special_tokens=True),
                                  finish_reason=ends[r][0], matched_stop=ends[r][1])  # type: ignore[arg-type]
                       for r in range(len(row_budget))]
        return completions, left

    def _last_logits(self, ids: torch.Tensor, attn: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
        """(R, V) float32 logits at each row's last position, `cache` extended by `ids`."""
        if self._copy is None:
            out = self.model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, **self._keep_last,
                             **{self._cache_kw: cache})
            return out.logits[:, -1, :].float()
        with autocast(self.compute_dtype, self._device):
            out = self._copy.model.get_decoder()(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True,
                                                 **{self._decoder_cache_kw: cache})
        return output_logits(self.model, out.last_hidden_state[:, -1])

    def _finished(self, tokens: list[int], budget: int, stop_ids: set[int], stops: tuple[str, ...], tail_len: int):
        if tokens[-1] in stop_ids:
            return ("stop", tokens[-1])
        if stops:
            # A stop string completed by the newest token lies within the last `tail_len` tokens (each token
            # is at least one byte), and any earlier completion would have stopped an earlier step.
            hit = find_stop(self.tokenizer.decode(tokens[-tail_len:], skip_special_tokens=False), stops)
            if hit is not None:
                return ("stop", hit)
        if len(tokens) >= budget:
            return ("length", None)
        return None

    # -- weights ----------------------------------------------------------------------------------------

    def load_weights(self, path: str | Path) -> None:
        from safetensors.torch import load_file

        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise DataError("no *.safetensors files; save the model with save_pretrained(safe_serialization=True)", path=path)
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        self.update_weights(state.items())

    @torch.no_grad()
    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        # Tied weights (lm_head = embeddings) appear under both names in a state_dict.
        params = dict(self.model.named_parameters(remove_duplicate=False))
        params.update(dict(self.model.named_buffers(remove_duplicate=False)))
        seen: set[str] = set()
        for name, tensor in named_tensors:
            if name not in params:
                raise BatchError(f"weight {name!r} is not in the model; names must match its state_dict")
            if tuple(params[name].shape) != tuple(tensor.shape):
                raise BatchError(f"weight {name!r} has shape {tuple(tensor.shape)}, the model expects {tuple(params[name].shape)}")
            params[name].copy_(tensor.to(device=params[name].device, dtype=params[name].dtype))
            seen.add(name)
        if not seen:
            raise ConfigError("update_weights got no tensors")
        self._kept.clear()
        self._version += 1
        logger.debug("updated %d tensors; weight version %d", len(seen), self._version)

    def release_memory(self) -> None:
        """Drop the kept KV rows and free the bfloat16 copy of the weights until the next `generate`: what an
        update should not hold beside its activations, since both are stale after its optimizer step."""
        self._kept.clear()
        if self._copy is not None:
            self._copy.release()
            self._copy_fingerprint = None

    def mark_updated(self) -> None:
        """Count an in-place update of the shared model (e.g. an optimizer step) as a new weight version: the kept
        rows are dropped and the bfloat16 copy is recast at the next `generate`. Needed after a fused optimizer's
        step (`AdamW(fused=True)`), which writes the weights without counting it in their `_version`, so
        `weights_fingerprint` cannot see it."""
        self._kept.clear()
        self._copy_fingerprint = None
        self._version += 1

    @property
    def weight_version(self) -> int:
        return self._version

    def describe(self) -> dict[str, Any]:
        return {
            "policy": "hf",
            "model": getattr(self.model.config, "_name_or_path", "") or self.config.model,
            "dtype": dtype_name(self.compute_dtype),
            "device": str(self._device),
            "weight_version": self._version,
        }


def _compute_dtype(model: torch.nn.Module, setting: str, device: torch.device) -> torch.dtype:
    """The precision `setting` asks for on `device`, for a model whose weights are float32; a model loaded in
    another dtype computes in that dtype."""
    weights = next(model.parameters()).dtype
    if weights != torch.float32:
        return weights
    if setting not in PRECISIONS:
        raise ConfigError(f"dtype {setting!r} needs a model loaded in it (HFPolicy.from_config does that); this model's weights are "
                          f"float32: give dtype one of {', '.join(PRECISIONS)}")
    return compute_dtype(setting, device)


def _left_padded(new: list[list[int]], past: list[int], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ids, attention mask and positions of a batch whose row i feeds the tokens `new[i]` after `past[i]`
    kept ones. Row i: [pad | its kept keys/values | pad | its new tokens]; keys at padding are masked out."""
    width_past, width_new = max(past), max(len(x) for x in new)
    ids = torch.full((len(new), width_new), pad, dtype=torch.long)
    attn = torch.zeros((len(new), width_past + width_new), dtype=torch.long)
    positions = torch.zeros((len(new), width_new), dtype=torch.long)
    for i, (x, c) in enumerate(zip(new, past)):
        ids[i, width_new - len(x) :] = torch.tensor(x, dtype=torch.long)
        attn[i, width_past - c : width_past] = 1
        attn[i, width_past + width_new - len(x) :] = 1
        positions[i, width_new - len(x) :] = torch.arange(c, c + len(x))
    return ids, attn, positions
