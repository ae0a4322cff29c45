"""Start-up of an SGLang router that answers /health before it lists its workers (as the real one does on a
busy machine): `SGLangRouter.start` waits for the workers, and so does the trainer's check of a router the
user started. Uses the stand-in in tests/agents/fake_router, so it runs without sglang-router installed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from agents.models import TinyModelConfig, build_tiny_model
from agents.policies.router import RouterPolicy
from agents.policies.router_server import SGLangRouter, SGLangRouterConfig
from agents.policies.sglang_server import free_port
from agents.rollout.config import RolloutConfig
from agents.train.setup import rollout_policy
from searchgym.errors import BackendError, BackendTimeout

FAKE = Path(__file__).parent / "fake_router"
WORKERS = ("http://127.0.0.1:39001", "http://127.0.0.1:39002")  # listed, never called


@pytest.fixture
def slow_router(monkeypatch):
    """Start the stand-in router with its workers registered `after` seconds after start ("never": not)."""
    started: list[SGLangRouter] = []

    def start(after: str, *, startup_timeout_s: float = 30.0, wait: bool = True) -> SGLangRouter:
        monkeypatch.setenv("PYTHONPATH", str(FAKE))  # the stand-in shadows an installed sglang_router
        monkeypatch.setenv("FAKE_ROUTER_REGISTER_AFTER_S", after)
        router = SGLangRouter(SGLangRouterConfig(worker_urls=WORKERS, python=sys.executable, startup_timeout_s=startup_timeout_s))
        started.append(router)
        if wait:
            router.start()
        return router

    yield start
    for router in started:
        router.stop()


def listed(url: str) -> list[str]:
    return [w["url"] for w in httpx.get(f"{url}/workers", trust_env=False).json()["workers"]]


def test_start_returns_only_once_the_router_lists_every_worker(slow_router):
    router = slow_router("3")
    assert listed(router.url) == list(WORKERS)  # /health answered at once; start waited for the workers


def test_a_router_that_never_lists_its_workers_times_out_naming_them(slow_router):
    router = slow_router("never", startup_timeout_s=1.5, wait=False)
    with pytest.raises(BackendTimeout, match=r"answered /health but listed \[\] of its workers \['http://127.0.0.1:39001'"):
        router.start()
    assert router.process is None  # stopped on the way out


@pytest.fixture
def user_router(monkeypatch):
    """A stand-in router started by hand, as a user starts one before the trainer: returns its url once its
    /health answers (its workers are listed `after` seconds after it started)."""
    processes: list[subprocess.Popen] = []

    def start(after: str) -> str:
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(FAKE), "FAKE_ROUTER_REGISTER_AFTER_S": after}
        processes.append(subprocess.Popen([sys.executable, "-m", "sglang_router.launch_router", "--port", str(port),
                                           "--worker-urls", *WORKERS], env=env))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", trust_env=False, timeout=2.0).status_code == 200:
                    return url
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("the stand-in router did not answer /health within 30 s")

    yield start
    for p in processes:
        p.kill()
        p.wait(timeout=10)


def trainer_config(url: str, timeout_s: float = 300.0) -> SimpleNamespace:
    """The part of a TrainConfig that `rollout_policy` reads."""
    return SimpleNamespace(rollout=RolloutConfig(backend="sglang", sglang_router=url, sglang_timeout_s=timeout_s))


def test_the_trainer_waits_for_a_user_started_router_to_list_its_workers(user_router):
    _, tokenizer = build_tiny_model(TinyModelConfig(seed=0))
    url = user_router("5")
    assert listed(url) == []  # answering /health, no workers yet
    policy = rollout_policy(trainer_config(url), None, tokenizer, rank=0)
    try:
        assert isinstance(policy, RouterPolicy) and [w.url for w in policy.workers()] == list(WORKERS)
    finally:
        policy.close()


def test_the_trainer_refuses_a_router_with_no_workers_after_a_bounded_wait(user_router):
    url = user_router("never")
    _, tokenizer = build_tiny_model(TinyModelConfig(seed=0))
    with pytest.raises(BackendError, match=r"listed no workers within 1s; start it with --worker-urls"):
        rollout_policy(trainer_config(url, timeout_s=1.0), None, tokenizer, rank=0)
