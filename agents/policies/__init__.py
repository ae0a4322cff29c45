"""Policies: token ids in, sampled ids with logprobs out (`Policy`), and a chat client for evaluation.

- `HFPolicy`: transformers, in-process.
- `SGLangPolicy`: an SGLang server's native API, with weight sync; `SGLangServer` starts one.
- `RouterPolicy`: rollouts through SGLang's router, weight pushes to each of its workers;
  `SGLangRouter` starts a router.
- `FanOutPolicy`: one policy over several that serve the same weights (e.g. SGLang servers).
- `OpenAIPolicy`: an OpenAI-compatible chat API (evaluation only; not a `Policy`).

Heavy modules (torch, transformers, httpx) load when a class is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.policies.base import Completion, Policy, SamplingParams

if TYPE_CHECKING:
    from agents.policies.fanout import FanOutPolicy
    from agents.policies.hf import HFPolicy, HFPolicyConfig
    from agents.policies.openai_chat import OpenAIPolicy, OpenAIPolicyConfig
    from agents.policies.router import RouterPolicy, RouterPolicyConfig
    from agents.policies.router_server import SGLangRouter, SGLangRouterConfig
    from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
    from agents.policies.sglang_server import SGLangServer, SGLangServerConfig

_LAZY = {
    "FanOutPolicy": "agents.policies.fanout",
    "HFPolicy": "agents.policies.hf",
    "HFPolicyConfig": "agents.policies.hf",
    "SGLangPolicy": "agents.policies.sglang",
    "SGLangPolicyConfig": "agents.policies.sglang",
    "SGLangServer": "agents.policies.sglang_server",
    "SGLangServerConfig": "agents.policies.sglang_server",
    "RouterPolicy": "agents.policies.router",
    "RouterPolicyConfig": "agents.policies.router",
    "SGLangRouter": "agents.policies.router_server",
    "SGLangRouterConfig": "agents.policies.router_server",
    "OpenAIPolicy": "agents.policies.openai_chat",
    "OpenAIPolicyConfig": "agents.policies.openai_chat",
}

__all__ = [
    "Completion",
    "FanOutPolicy",
    "HFPolicy",
    "HFPolicyConfig",
    "OpenAIPolicy",
    "OpenAIPolicyConfig",
    "Policy",
    "RouterPolicy",
    "RouterPolicyConfig",
    "SGLangPolicy",
    "SGLangPolicyConfig",
    "SGLangRouter",
    "SGLangRouterConfig",
    "SGLangServer",
    "SGLangServerConfig",
    "SamplingParams",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agents.policies' has no attribute {name!r}")
