"""`searchgym.vector`: batched steps equal N plain envs' steps; Gymnasium's own vector envs over text spaces;
autoreset; one retriever call per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import searchgym
from searchgym.errors import BatchError, ConfigError, EpisodeStateError, RetrievalError
from searchgym.vector import SearchQAVectorEnv, merge_infos, step_batch
from searchgym.wrappers import TurnLimitAsTerminal
from tests.integrations.scripted import scripted_action

ID = "SearchQA-Synthetic-v0"
KW = dict(num_entities=300, cache_dir=False)
N = 6


def assert_same(a, b, where="") -> None:
    """Equal trees of dicts, lists, tuples and arrays (arrays by value and dtype)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a!r} != {b!r}"
        for x, y in zip(a.tolist() if a.dtype != object else list(a), b.tolist() if b.dtype != object else list(b)):
            assert_same(x, y, f"{where}[]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


def plain_envs(n=N, **kw):
    return [gym.make(ID, **{**KW, **kw}) for _ in range(n)]


def actions_for(envs, turn):
    """Each env's scripted action at `turn` (its episode index is its position), '' for finished envs."""
    return [scripted_action(e.unwrapped.record, turn, i) if not e.unwrapped.done else "" for i, e in enumerate(envs)]


@pytest.mark.parametrize("info_format", ["list", "dict"])
def test_vector_env_equals_plain_envs_for_the_same_seeds_and_actions(info_format):
    venv = gym.make_vec(ID, num_envs=N, info_format=info_format, **KW)
    assert isinstance(venv, SearchQAVectorEnv)  # make_vec's default is the batched env
    plain = plain_envs()
    obs, infos = venv.reset(seed=[10 + i for i in range(N)])
    resets = [e.reset(seed=10 + i) for i, e in enumerate(plain)]
    assert obs == tuple(o for o, _ in resets)
    assert_same(infos, [i for _, i in resets] if info_format == "list" else merge_infos([i for _, i in resets], N))
    turns, kinds = [0] * N, set()
    for _ in range(7):  # every episode ends within 4 steps (max_turns), so most envs also start a second one
        live = [not e.unwrapped.done for e in plain]
        actions = [scripted_action(e.unwrapped.record, turns[i], i) if live[i] else "<search>ignored</search>"
                   for i, e in enumerate(plain)]
        got = venv.step(actions)
        expected = []
        for i, e in enumerate(plain):
            if live[i]:
                expected.append(e.step(actions[i]))
                turns[i] += 1
                kinds.add(expected[-1][4]["action"])
            else:  # NEXT_STEP autoreset: the ended env resets, its own generator going on, and its action is ignored
                reset_obs, reset_info = e.reset()
                expected.append((reset_obs, 0.0, False, False, reset_info))
                turns[i] = 0
        assert got[0] == tuple(x[0] for x in expected)
        assert got[1].tolist() == [x[1] for x in expected]
        assert got[2].tolist() == [x[2] for x in expected] and got[3].tolist() == [x[3] for x in expected]
        step_infos = [x[4] for x in expected]
        assert_same(got[4], step_infos if info_format == "list" else merge_infos(step_infos, N))
    assert kinds == {"search", "answer", "invalid"}  # the steps mixed every kind of action


def test_next_step_autoreset_resets_an_ended_env_instead_of_stepping_it():
    venv = gym.make_vec(ID, num_envs=2, info_format="list", **KW)
    twin = gym.make(ID, **KW)
    venv.reset(seed=3)
    twin.reset(seed=3)
    record = twin.unwrapped.record
    answer = f"<answer>{record.answers[0]}</answer>"
    _, rewards, terminated, truncated, infos = venv.step([answer, "<search>x</search>"])
    assert (rewards[0], terminated[0], truncated[0]) == (1.0, True, False)
    assert infos[0]["episode"]["outcome"] == "answered"  # the summary arrives on the ending step
    # Next step: env 0 resets (its action is ignored: a search would have been a step), env 1 steps.
    obs, rewards, terminated, truncated, infos = venv.step(["<search>ignored</search>", "<answer>x</answer>"])
    twin.step(answer)
    expected_obs, expected_info = twin.reset()  # no seed: the env's own generator goes on, as in the vector env
    assert obs[0] == expected_obs and infos[0] == expected_info
    assert (rewards[0], terminated[0], truncated[0]) == (0.0, False, False)
    assert terminated[1] and infos[1]["action"] == "answer"
    assert venv.envs[0].turn == 0 and not venv.envs[0].done


def test_same_step_autoreset_returns_the_ended_episode_in_final_obs_and_final_info():
    venv = gym.make_vec(ID, num_envs=2, autoreset_mode="SameStep", **KW)
    twin = gym.make(ID, **KW)
    venv.reset(seed=[5, 6])
    twin.reset(seed=5)
    obs, rewards, terminated, truncated, infos = venv.step(["<answer>nobody</answer>", "<search>x</search>"])
    expected = twin.step("<answer>nobody</answer>")
    next_obs, next_info = twin.reset()
    assert terminated.tolist() == [True, False] and rewards[0] == expected[1] == 0.0
    assert obs[0] == next_obs and infos["question_id"][0] == next_info["question_id"]
    assert infos["_final_obs"].tolist() == [True, False] and infos["final_obs"][0] == expected[0]
    assert infos["final_info"]["episode"]["outcome"][0] == "answered" and infos["final_info"]["_episode"].tolist() == [True, False]


def test_disabled_autoreset_refuses_a_finished_env_and_resets_by_mask():
    venv = gym.make_vec(ID, num_envs=2, autoreset_mode=AutoresetMode.DISABLED, info_format="list", **KW)
    venv.reset(seed=0)
    venv.step(["<answer>a</answer>", "<search>x</search>"])
    turn_before = venv.envs[1].turn
    with pytest.raises(EpisodeStateError):
        venv.step(["<answer>a</answer>", "<search>y</search>"])
    assert venv.envs[1].turn == turn_before  # nothing stepped
    obs, infos = venv.reset(seed=[7, None], options={"reset_mask": np.array([True, False])})
    assert infos[0]["question_id"] == venv.envs[0].record.id and infos[1] == {}
    assert venv.envs[0].turn == 0 and venv.envs[1].turn == turn_before
    venv.step(["<search>a</search>", "<search>b</search>"])


class CountingRetriever:
    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, queries, k):
        self.calls.append(list(queries))
        return self.inner.search(queries, k)

    def describe(self):
        return self.inner.describe()


def test_step_batch_searches_once_per_step_and_once_per_distinct_query():
    first = gym.make(ID, **KW)
    retriever = CountingRetriever(first.unwrapped.retriever)
    envs = [gym.make(ID, retriever=retriever, **KW) for _ in range(4)]
    plain = plain_envs(4)
    for i, (e, p) in enumerate(zip(envs, plain)):
        e.reset(seed=i)
        p.reset(seed=i)
    actions = ["<search>capital</search>", "<search>capital</search>", "<answer>x</answer>", "<search>river city</search>"]
    results = step_batch(envs, actions)
    assert retriever.calls == [["capital", "river city"]]
    for got, env, action in zip(results, plain, actions):
        assert_same(got, env.step(action))


class FailingRetriever(CountingRetriever):
    fail = True

    def search(self, queries, k):
        if self.fail:
            raise RetrievalError("down")
        return super().search(queries, k)


def test_a_failed_retrieval_changes_no_env_and_the_step_can_be_retried():
    inner = gym.make(ID, **KW).unwrapped.retriever
    retriever = FailingRetriever(inner)
    venv = SearchQAVectorEnv([gym.make(ID, retriever=retriever, **KW) for _ in range(2)])
    venv.reset(seed=0)
    with pytest.raises(RetrievalError):
        venv.step(["<answer>x</answer>", "<search>capital</search>"])
    assert [e.turn for e in venv.envs] == [0, 0] and not venv.envs[0].done
    retriever.fail = False
    _, _, terminated, _, _ = venv.step(["<answer>x</answer>", "<search>capital</search>"])
    assert terminated.tolist() == [True, False] and [e.turn for e in venv.envs] == [1, 1]


def test_bad_input_through_the_vector_env_is_an_ordinary_invalid_step():
    venv = gym.make_vec(ID, num_envs=3, info_format="list", **KW)
    venv.reset(seed=1)
    _, rewards, terminated, _, infos = venv.step([12345, "x" * 1_000_000, "<frobnicate>q</frobnicate>"])
    assert [i["invalid_reason"] for i in infos] == ["not_text", "no_action", "no_action"]
    assert rewards.tolist() == [0.0, 0.0, 0.0] and not terminated.any()
    with pytest.raises(BatchError):
        venv.step(["<search>a</search>"])


def test_gymnasium_sync_and_async_vector_envs_match_plain_envs_where_the_infos_agree():
    plain = plain_envs(3)
    sync = gym.make_vec(ID, num_envs=3, vectorization_mode="sync", **KW)
    # Gymnasium's shared memory encodes text with the space's charset, which has no spaces: pass the
    # observations through pipes instead (the docstring of searchgym.vector says so).
    asyn = gym.make_vec(ID, num_envs=3, vectorization_mode="async", vector_kwargs={"shared_memory": False}, **KW)
    try:
        resets = [e.reset(seed=20 + i) for i, e in enumerate(plain)]
        for venv in (sync, asyn):
            obs, infos = venv.reset(seed=20)
            assert obs == tuple(o for o, _ in resets)
            assert_same(infos, merge_infos([i for _, i in resets], 3))
        actions = actions_for(plain, 0)  # every env searches: infos of one kind
        expected = [e.step(a) for e, a in zip(plain, actions)]
        for venv in (sync, asyn):
            obs, rewards, terminated, truncated, infos = venv.step(actions)
            assert obs == tuple(x[0] for x in expected) and rewards.tolist() == [x[1] for x in expected]
            assert_same(infos, merge_infos([x[4] for x in expected], 3))
    finally:
        sync.close()
        asyn.close()


def test_why_the_batched_env_merges_infos_itself():
    """Documents the reason in searchgym.vector's docstring: Gymnasium's merge fails when one env answers
    beside one searching. If this starts passing, Gymnasium fixed it: update the docs."""
    sync = gym.make_vec(ID, num_envs=2, vectorization_mode="sync", **KW)
    sync.reset(seed=0)
    with pytest.raises((TypeError, AttributeError)):
        sync.step(["<search>capital</search>", "<answer>Paris</answer>"])


def test_merge_infos_by_hand():
    infos = [{"a": 1, "d": {"x": 0.5}, "s": "p"}, None, {"a": 2, "d": None, "n": None}]
    m = merge_infos(infos, 3)
    assert m["a"].dtype == np.int64 and m["a"].tolist() == [1, 0, 2] and m["_a"].tolist() == [True, False, True]
    # a dict in one env and None in another: merged over the dict, masked False where None
    assert m["_d"].tolist() == [True, False, False] and m["d"]["x"].tolist() == [0.5, 0.0, 0.0]
    assert m["d"]["_x"].tolist() == [True, False, False]
    assert m["s"].dtype == object and m["s"].tolist() == ["p", None, None]
    assert m["n"].tolist() == [None, None, None] and m["_n"].tolist() == [False, False, True]
    mixed = merge_infos([{"u": 1}, {"u": None}], 2)  # an int beside None: an object array, not a crash
    assert mixed["u"].dtype == object and mixed["u"].tolist() == [1, None]


def test_merge_infos_equals_gymnasiums_merge_where_that_works():
    venv = SearchQAVectorEnv([gym.make(ID, **KW) for _ in range(2)])
    infos = [{"k": 1, "f": 0.5, "b": True, "o": "x", "d": {"y": [1, 2]}}, {"k": 3, "f": 1.5, "b": False, "o": "z", "d": {"y": [3]}}]
    gymnasium_style: dict = {}
    for i, info in enumerate(infos):
        gymnasium_style = venv._add_info(gymnasium_style, info, i)
    assert_same(merge_infos(infos, 2), gymnasium_style)


def test_wrapped_envs_and_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="TurnLimitAsTerminal"):
        step_batch([TurnLimitAsTerminal(gym.make(ID, **KW))], ["<search>a</search>"])
    with pytest.raises(ConfigError):
        gym.make_vec(ID, num_envs=2, info_format="table", **KW)
    with pytest.raises(ConfigError):
        gym.make_vec(ID, num_envs=2, autoreset_mode="Sometimes", **KW)
    with pytest.raises(ConfigError):
        SearchQAVectorEnv.from_id(ID, 0, **KW)


def test_make_vec_shares_one_retriever_between_its_envs():
    venv = gym.make_vec(ID, num_envs=3, **KW)
    assert len({id(e.retriever) for e in venv.envs}) == 1
    assert venv.spec.kwargs["vectorization_mode"] == "vector_entry_point"


def test_every_id_family_vectorizes_and_specs_stay_serializable(tmp_path):
    import json

    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "a", "question": "Where is Paris?", "golden_answers": ["France"]}) + "\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "d1", "contents": "Paris\nParis is the capital of France."}) + "\n")
    files = dict(data_path=str(tmp_path / "q.jsonl"), corpus_path=str(tmp_path / "c.jsonl"), cache_dir=False)
    custom = gym.make_vec("SearchQA-Custom-v0", num_envs=2, **files)
    hotpot = gym.make_vec("SearchQA-HotpotQA-v0", num_envs=2, format="flashrag", **files)
    assert isinstance(custom, SearchQAVectorEnv) and isinstance(hotpot, SearchQAVectorEnv)
    assert hotpot.envs[0].dataset == "hotpotqa" and custom.reset(seed=0)[1]["question_id"].tolist() == ["a", "a"]
    for env_id in searchgym.ENV_IDS:  # the vector entry points are strings: a spec still serializes
        assert json.loads(gym.spec(env_id).to_json())["vector_entry_point"].startswith("searchgym.vector:")
