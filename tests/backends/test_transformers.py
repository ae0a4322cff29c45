"""TransformersChatBackend with a tiny randomly initialised model built here, and SmolLM2 end to end (slow)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from searchgym.backends import ChatBackend
from searchgym.backends.transformers import TransformersChatBackend, TransformersConfig
from searchgym.errors import BackendError, ConfigError

WORDS = "user assistant system what is the capital of italy rome river tiber paris a b c d e f g h yes no json".split()
TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def tiny(chat_template: str | None = TEMPLATE):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<pad>", "<|im_start|>", "<|im_end|>", *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>",
                                  bos_token="<|im_start|>")
    tok.chat_template = chat_template
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, max_position_embeddings=128, pad_token_id=1, eos_token_id=3, bos_token_id=2)
    return LlamaForCausalLM(config), tok


def conv(text):
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def backend():
    model, tok = tiny()
    return TransformersChatBackend(TransformersConfig(batch_size=2), model=model, tokenizer=tok)


def test_batched_greedy_equals_one_by_one(backend):
    assert isinstance(backend, ChatBackend)
    prompts = [conv("what is the capital of italy"), conv("rome"), conv("a b c d e f g h river tiber paris")]
    batched = backend.chat(prompts, max_tokens=6)  # batch_size 2: one batch of two (left padded) and one of one
    single = [backend.chat([p], max_tokens=6)[0] for p in prompts]
    assert batched == single
    assert all(isinstance(r, str) for r in batched) and len(batched) == 3
    assert backend.chat([], max_tokens=3) == []


def test_replies_exclude_the_prompt(backend):
    # A reply is decoded from the new tokens only: at most max_tokens words, never the rendered template.
    (reply,) = backend.chat([conv("what is the capital of italy")], max_tokens=3)
    assert len(reply.split()) <= 3 and "<|im_start|>" not in reply


def test_sampling_runs(backend):
    torch.manual_seed(1)
    (reply,) = backend.chat([conv("rome")], max_tokens=4, temperature=1.0)
    assert isinstance(reply, str)


def test_too_long_prompt_is_a_backend_error():
    model, tok = tiny()
    b = TransformersChatBackend(TransformersConfig(max_input_tokens=10), model=model, tokenizer=tok)
    with pytest.raises(BackendError, match="exceeds"):
        b.chat([conv("a b c d e f g h a b c d e f g h")], max_tokens=4)


def test_generation_errors_are_backend_errors(monkeypatch):
    model, tok = tiny()
    b = TransformersChatBackend(model=model, tokenizer=tok)

    def out_of_memory(**kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(b.model, "generate", out_of_memory)
    with pytest.raises(BackendError, match="out of memory"):
        b.chat([conv("rome")], max_tokens=2)
    with pytest.raises(BackendError, match="max_tokens"):
        b.chat([conv("rome")], max_tokens=0)


def test_bad_construction():
    model, tok = tiny(chat_template=None)
    with pytest.raises(ConfigError, match="chat template"):
        TransformersChatBackend(model=model, tokenizer=tok)
    with pytest.raises(ConfigError, match="both"):
        TransformersChatBackend(model=model)
    with pytest.raises(ConfigError):
        TransformersConfig(dtype="int8")  # type: ignore[arg-type]


@pytest.mark.slow
def test_smollm2_llm_judge_end_to_end():
    """SmolLM2-135M judges a few synthetic rounds. Its labels are poor (135M parameters); what is tested is
    that every round comes back labelled or flagged as failed, never an exception."""
    from searchgym.backends.models import smollm2_gguf_path
    from searchgym.errors import ConfigError as MissingModel
    from searchgym.judges import LLMJudge, LLMJudgeConfig
    from searchgym.judges.calibration import calibrate, load_labelled_rounds
    from searchgym.judges.synthetic_labels import DEFAULT_PATH

    try:
        smollm2_gguf_path()
    except MissingModel as e:
        pytest.skip(str(e))
    b = TransformersChatBackend(TransformersConfig(model="smollm2-135m", batch_size=2))
    judge = LLMJudge(b, LLMJudgeConfig(max_tokens=32, attempts=1, max_doc_chars=200, timeout_s=240))
    rounds = load_labelled_rounds(DEFAULT_PATH)[:2]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared, busy CPU, spinning intra-op threads slow generation many times over
    try:
        report = calibrate(judge, rounds)
    finally:
        torch.set_num_threads(threads)
    assert report.n == 2 and judge.stats.requests == 2 and judge.stats.backend_calls == 1
    assert judge.stats.failures == report.failures == judge.stats.malformed + judge.stats.timeout
    for s in report.signals.values():
        assert 0.0 <= s.agreement <= 1.0
