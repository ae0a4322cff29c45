"""The evaluation summary reports subem beside cover-EM, from what the env's episodes say."""

from types import SimpleNamespace

import pytest

from agents.experiments.eval import summarize
from searchgym.envs import SearchQAEnv


def episode_of(env, question_id, answer):
    env.reset(options={"question_id": question_id})
    *_, info = env.step(f"<answer>{answer}</answer>")
    return SimpleNamespace(step_infos=[info], finish_reason="answered", num_turns=1, num_sampled_tokens=5)


def test_summary_has_subem_beside_cover_em(small_records, ten_doc_corpus):
    env = SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False)
    # q1's golds: "Henri Becquerel", "Becquerel". Exact; whole-token cover; substring only.
    trajectories = [episode_of(env, "q1", a) for a in ("Becquerel", "it was Henri Becquerel", "the Becquerels")]
    out = summarize(trajectories, k=1)
    assert out["avg@1/em"] == pytest.approx(1 / 3)
    assert out["avg@1/cover_em"] == pytest.approx(2 / 3)
    assert out["avg@1/subem"] == pytest.approx(1.0)
