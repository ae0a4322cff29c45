"""Fixtures for the agents tests: a tiny random model, envs over the 10-document corpus, a scripted policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("torch", reason="the agents tests need torch (pip install searchgym[agents])")
pytest.importorskip("transformers", reason="the agents tests need transformers (pip install searchgym[agents])")

from agents.models import TinyModelConfig, build_tiny_model
from agents.policies.base import Completion, SamplingParams, check_budgets, find_stop
from agents.policies.hf import HFPolicy, HFPolicyConfig
from searchgym.envs import SearchQAEnv


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared CPU OpenMP spin-waiting makes them
    ten times slower; restored after each test so other packages' tests are unaffected."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def trainer_keeps_one_thread(monkeypatch):
    """A Trainer applies `TrainConfig.threads` (default: every physical core) to the whole process; the
    tests keep the one thread chosen above. The setting itself is tested in tests/test_threads.py."""
    import agents.train.trainer

    monkeypatch.setattr(agents.train.trainer, "set_threads", lambda threads: 1)


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer): a 2-layer random Llama with a byte-level BPE tokenizer."""
    return build_tiny_model(TinyModelConfig(seed=0))


@pytest.fixture
def tiny_policy(tiny) -> HFPolicy:
    """The float32 path, whatever the CPU (tests of bfloat16 name it)."""
    model, tokenizer = tiny
    return HFPolicy(model, tokenizer, config=HFPolicyConfig(seed=0, dtype="float32"))


@pytest.fixture
def make_env(ten_doc_corpus, small_records) -> Callable[..., Callable[[], SearchQAEnv]]:
    """`make_env(**kwargs)` returns a factory of SearchQAEnvs over the fixtures' corpus and questions."""

    def factory(**kwargs: Any) -> Callable[[], SearchQAEnv]:
        kwargs.setdefault("retriever", "rank_bm25")  # no JIT warm-up (bm25s compiles with numba on first use)
        return lambda: SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, **kwargs)

    return factory


class ScriptedPolicy:
    """A `Policy` whose turn texts come from `script(context_text, sample_index) -> str`, encoded with the
    tokenizer; every token gets logprob -1. It honours budgets (cutting the ids, finish `length`) and
    stop strings (cutting after the first one, finish `stop`)."""

    def __init__(self, tokenizer, script: Callable[[str, int], str]):
        self.tokenizer = tokenizer
        self.script = script
        self.calls: list[tuple[int, int]] = []
        """(prompts, n) of every generate call."""
        self._version = 0

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, max_new_tokens=None) -> list[list[Completion]]:
        budgets = check_budgets(prompts, params, max_new_tokens)
        self.calls.append((len(prompts), params.n))
        out = []
        for prompt, budget in zip(prompts, budgets):
            context = self.tokenizer.decode(list(prompt))
            group = []
            for k in range(params.n):
                text = self.script(context, k)
                stop = find_stop(text, params.stop)
                if stop is not None:
                    text = text[: text.find(stop) + len(stop)]
                ids = self.tokenizer.encode(text, add_special_tokens=False)
                finish = "stop" if stop is not None else "length"
                if len(ids) > budget:
                    ids, finish, stop = ids[:budget], "length", None
                group.append(Completion(ids, [-1.0] * len(ids), self.tokenizer.decode(ids, skip_special_tokens=True), finish, stop))
            out.append(group)
        return out

    def load_weights(self, path) -> None:
        self._version += 1

    def update_weights(self, named_tensors) -> None:
        self._version += 1

    @property
    def weight_version(self) -> int:
        return self._version

    def describe(self) -> dict[str, Any]:
        return {"policy": "scripted"}


@pytest.fixture
def scripted(tiny):
    """`scripted(script)` builds a ScriptedPolicy over the tiny tokenizer."""
    return lambda script: ScriptedPolicy(tiny[1], script)
