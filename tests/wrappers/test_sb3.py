"""stable-baselines3's `check_env` accepts the wrapped envs."""

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.envs import SearchQAEnv
from searchgym.wrappers import wrap_for_sb3

env_checker = pytest.importorskip(
    "stable_baselines3.common.env_checker", reason="stable-baselines3 is not installed (pip install 'searchgym[sb3]')"
)


def test_check_env_on_the_ten_document_env(ten_doc_corpus, small_records):
    env = wrap_for_sb3(SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False))
    env_checker.check_env(env, warn=True)
    assert isinstance(env.observation_space, gym.spaces.Box) and isinstance(env.action_space, gym.spaces.Discrete)


@pytest.mark.parametrize("turn_limit_terminal", [True, False])
def test_check_env_on_the_synthetic_env(turn_limit_terminal):
    base = gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=(1, 2), num_questions=40, cache_dir=False)
    env = wrap_for_sb3(base, turn_limit_terminal=turn_limit_terminal)
    env_checker.check_env(env, warn=True)
    obs, _ = env.reset(seed=3)
    obs2, _ = env.reset(seed=3)
    assert (obs == obs2).all()


def test_ppo_example_pieces_run_end_to_end(tmp_path):
    """`benchmarks.sb3_ppo` on a tiny budget, in-process: a PPO run, the references, the table and the plot."""
    torch = pytest.importorskip("torch", reason="PPO needs torch")
    from benchmarks import sb3_ppo

    args = sb3_ppo.Args(hops=(1,), seeds=(0,), timesteps=(256,), num_entities=300, train_questions=30,
                        test_questions=10, eval_every=128, curve_episodes=5, n_envs=2,
                        ppo={"n_steps": 64, "batch_size": 64, "n_epochs": 1})
    threads = torch.get_num_threads()
    try:
        run = sb3_ppo.train_job((args, 1, 0))  # sets one torch thread, as in its worker process
    finally:
        torch.set_num_threads(threads)
    assert run["timesteps"] == 256 and [s for s, _ in run["curve"]][:2] == [0, 128]
    assert 0.0 <= run["test_em"] <= 1.0
    results = {"1": sb3_ppo.baselines(args, 1)}
    assert results["1"]["oracle"] == [1.0]  # the oracle is expressible in the discrete action space
    results["1"]["PPO"] = [run["test_em"]]
    table = sb3_ppo.table(args, results)
    assert "| oracle | 1.000 |" in table and "| PPO − random |" in table
    pytest.importorskip("matplotlib", reason="the learning-curve plot needs matplotlib")
    sb3_ppo.plot(args, [run], results, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 1000


def test_benchmark_args_are_validated():
    from benchmarks import sb3_ppo
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="timesteps"):
        sb3_ppo.Args(hops=(1, 2, 3), timesteps=(10, 20))
    with pytest.raises(ConfigError, match="seeds"):
        sb3_ppo.Args(seeds=())


def test_make_vec_env_with_the_id_and_sb3s_render_mode_trains():
    """SB3's `make_vec_env` creates each env with `render_mode="rgb_array"`; the text env accepts it (the
    transcript drawn as an image) and, wrapped by `wrap_for_sb3`, PPO runs on the vector env."""
    pytest.importorskip("torch", reason="PPO needs torch")
    pytest.importorskip("PIL", reason="render_mode='rgb_array' draws text with Pillow")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    kwargs = dict(num_entities=300, hops=(1,), num_questions=30, cache_dir=False)
    venv = make_vec_env("SearchQA-Synthetic-v0", n_envs=2, env_kwargs=kwargs, wrapper_class=wrap_for_sb3, seed=0)
    try:
        assert venv.render_mode == "rgb_array" and venv.num_envs == 2
        venv.reset()
        frames = venv.get_images()
        assert len(frames) == 2 and all(f.ndim == 3 and f.shape[2] == 3 and f.dtype.name == "uint8" for f in frames)
        assert all((f < 128).any() for f in frames)  # text was drawn: dark pixels on white
        PPO("MlpPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu").learn(32)
    finally:
        venv.close()


@pytest.mark.parametrize("render_mode", [None, "ansi", "rgb_array"])
def test_render_modes(render_mode):
    if render_mode == "rgb_array":
        pytest.importorskip("PIL")
    env = gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=10, cache_dir=False, render_mode=render_mode)
    env.reset(seed=0)
    env.step("<search>capital</search>")
    frame = env.render()
    if render_mode is None:
        assert frame is None
    elif render_mode == "ansi":
        assert "[env]" in frame and "capital" in frame
    else:
        assert frame.shape == (4 * 2 + 40 * 12, 4 * 2 + 100 * 6, 3) and (frame < 128).any()


def test_an_unknown_render_mode_is_refused(ten_doc_corpus, small_records):
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="rgb_array"):
        SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, render_mode="human")


@pytest.mark.parametrize("stack", ["discrete", "features", "turns", "sb3"])
def test_gymnasiums_check_env_passes_on_every_wrapper(stack):
    """Gymnasium's checker re-creates the env from `env.spec`, wrappers included: each wrapper records its
    constructor arguments."""
    from gymnasium.utils.env_checker import check_env

    from searchgym.wrappers import DiscreteCandidateActions, HashedFeatureObservation, TurnLimitAsTerminal

    base = gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=(1, 2), num_questions=40, cache_dir=False)
    env = {
        "discrete": lambda: DiscreteCandidateActions(base),
        "features": lambda: HashedFeatureObservation(DiscreteCandidateActions(base)),
        "turns": lambda: TurnLimitAsTerminal(base),
        "sb3": lambda: wrap_for_sb3(base),
    }[stack]()
    check_env(env, skip_render_check=True)
    assert [w.name for w in env.spec.additional_wrappers][-1] == type(env).__name__
