"""Drawing one token per row from logits, as `agents.policies.base` defines the sampled logprob."""

from __future__ import annotations

import torch

from agents.policies.base import SamplingParams


def sample_tokens(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of `logits` (R, V) and return (tokens (R,), their logprobs (R,)).

    The logprob is `log_softmax(logits / T)` before top-k / top-p filtering (T = 1 when greedy).
    """
    if params.temperature == 0:
        logp = torch.log_softmax(logits, dim=-1)
        tok = logp.argmax(dim=-1)
        return tok, logp.gather(1, tok[:, None])[:, 0]
    scaled = logits / params.temperature
    logp = torch.log_softmax(scaled, dim=-1)
    filtered = scaled
    if params.top_k > 0 and params.top_k < filtered.shape[-1]:
        kth = torch.topk(filtered, params.top_k, dim=-1).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(filtered, dim=-1, descending=True)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # Drop a token when the mass before it already reaches top_p; the most likely token always stays.
        drop_sorted = (cum - torch.softmax(sorted_logits, dim=-1)) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(1, sorted_idx, drop_sorted)
        filtered = filtered.masked_fill(drop, float("-inf"))
    probs = torch.softmax(filtered, dim=-1)
    tok = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return tok, logp.gather(1, tok[:, None])[:, 0]
