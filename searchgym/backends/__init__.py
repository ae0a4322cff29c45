"""Chat backends: how LLM-driven components (the LLM judge, the generative ranker) reach a model.

`ChatBackend` is deliberately small so that an OpenAI-compatible server (SGLang, vLLM), an in-process
transformers model, or a trainable policy from the `agents` package can all stand behind it.
"""

from searchgym.backends.base import ChatBackend, ChatMessage

__all__ = ["ChatBackend", "ChatMessage"]
