"""LLMJudge over fake chat backends: batching, cache, retries, malformed replies, errors and timeouts."""

import json
import threading
import time

import pytest

from searchgym.errors import BackendError, BackendTimeout, ConfigError
from searchgym.judges import LLMJudge, LLMJudgeConfig
from tests.judges.helpers import BRIDGE, req, rnd


def reply(u: int, v: int, analysis: str = "fine") -> str:
    return "```json\n" + json.dumps({"analysis": analysis, "retrieval_reward": u, "thinking_reward": v}) + "\n```"


class Scripted:
    """Answers from a function of the user message; records every call."""

    def __init__(self, answer=lambda user: reply(1, 1)):
        self.answer = answer
        self.calls: list[tuple[int, float]] = []

    def chat(self, conversations, *, max_tokens=512, temperature=0.0):
        self.calls.append((len(conversations), temperature))
        return [self.answer(c[-1]["content"]) for c in conversations]

    def describe(self):
        return {"kind": "scripted"}


def requests(n: int):
    """n distinct requests, as if from n different episodes."""
    return [req(BRIDGE, rnd(f"query number {i}", "d1")) for i in range(n)]


def test_batches_across_episodes_and_caches():
    backend = Scripted(lambda user: reply(1, 0) if "query number 1" in user else reply(1, 1))
    judge = LLMJudge(backend, LLMJudgeConfig(batch_size=2))
    verdicts = judge.label(requests(5))
    assert [(v.retrieval_utility, v.reasoning_correctness) for v in verdicts] == [(1, 1), (1, 0), (1, 1), (1, 1), (1, 1)]
    assert [v.failed for v in verdicts] == [False] * 5
    assert [n for n, _ in backend.calls] == [2, 2, 1]  # 5 rounds in batches of 2
    again = judge.label(requests(5))
    assert again == verdicts and len(backend.calls) == 3  # all from the cache
    assert judge.stats.cache_hits == 5 and judge.stats.requests == 10


def test_identical_rounds_in_one_call_are_asked_once():
    backend = Scripted()
    judge = LLMJudge(backend)
    same = requests(1) * 3
    assert len(judge.label(same)) == 3
    assert backend.calls == [(1, 0.0)]


def test_garbage_replies_fail_after_bounded_retries():
    backend = Scripted(lambda user: "The retrieval looks good, I would say 1.")
    judge = LLMJudge(backend, LLMJudgeConfig(attempts=3, retry_temperature=0.5))
    verdicts = judge.label(requests(2))
    for v in verdicts:
        assert v.failed and v.error == "malformed" and (v.retrieval_utility, v.reasoning_correctness) == (0, 0)
        assert "not JSON" in v.analysis
    assert backend.calls == [(2, 0.0), (2, 0.5), (2, 0.5)]  # first try greedy, retries at retry_temperature
    assert (judge.stats.failures, judge.stats.malformed, judge.stats.retries) == (2, 2, 4)
    # Failures are not cached: the next call asks again.
    judge.label(requests(1))
    assert len(backend.calls) == 6


def test_malformed_then_valid_on_retry():
    answers = iter(["{not json", reply(0, 1)])
    judge = LLMJudge(Scripted(lambda user: next(answers)))
    (v,) = judge.label(requests(1))
    assert (v.retrieval_utility, v.reasoning_correctness, v.failed) == (0, 1, False)
    assert judge.stats.retries == 1 and judge.stats.failures == 0


class Raising:
    def __init__(self, error):
        self.error = error
        self.calls = 0

    def chat(self, conversations, **kwargs):
        self.calls += 1
        raise self.error

    def describe(self):
        return {"kind": "raising"}


@pytest.mark.parametrize(
    "error, kind",
    [(BackendError("server down"), "backend"), (BackendTimeout("slow"), "timeout"), (RuntimeError("bug"), "exception")],
)
def test_backend_errors_become_failed_labels(error, kind):
    backend = Raising(error)
    judge = LLMJudge(backend, LLMJudgeConfig(attempts=3))
    verdicts = judge.label(requests(2))
    assert all(v.failed and v.error == kind and v.contribution == 0 for v in verdicts)
    assert backend.calls == 1  # errors are not malformed replies: the backend already retried
    assert getattr(judge.stats, kind) == 2


class Sleeping:
    def __init__(self, seconds: float):
        self.seconds, self.calls = seconds, 0
        self.release = threading.Event()

    def chat(self, conversations, **kwargs):
        self.calls += 1
        self.release.wait(self.seconds)
        return [reply(1, 1)] * len(conversations)

    def describe(self):
        return {"kind": "sleeping"}


def test_hung_backend_times_out_and_later_batches_fail_fast():
    backend = Sleeping(30)
    judge = LLMJudge(backend, LLMJudgeConfig(timeout_s=0.2, batch_size=1))
    start = time.monotonic()
    verdicts = judge.label(requests(3))
    elapsed = time.monotonic() - start
    backend.release.set()
    assert all(v.failed and v.error == "timeout" for v in verdicts)
    assert backend.calls == 1  # the second and third batches were not sent to a backend that just hung
    assert elapsed < 10  # bounded by the judge's timeout, not by the backend


def test_wrong_number_of_replies_is_a_backend_failure():
    class Short(Scripted):
        def chat(self, conversations, **kwargs):
            return [reply(1, 1)]

    verdicts = LLMJudge(Short()).label(requests(2))
    assert all(v.failed and v.error == "backend" for v in verdicts)


def test_config_and_backend_are_validated():
    with pytest.raises(ConfigError):
        LLMJudgeConfig(attempts=0)
    with pytest.raises(ConfigError):
        LLMJudgeConfig(timeout_s=0)
    with pytest.raises(ConfigError):
        LLMJudge(object())  # type: ignore[arg-type]
    judge = LLMJudge(Scripted(), LLMJudgeConfig(deferred=False, name="qwen-judge"))
    assert (judge.name, judge.deferred) == ("qwen-judge", False)
    assert judge.describe()["backend"] == {"kind": "scripted"}


def _env(judge):
    from tests.envs.test_step_info import make_env

    return make_env(judge=judge)


def test_in_env_deferred_llm_judge_labels_the_episode_in_one_call():
    from tests.envs.test_step_info import GOOD, play

    backend = Scripted(lambda user: reply(1, 0) if "<search>Rome river</search>\n\nInformation (round 2, latest" in user else reply(1, 1))
    infos = play(_env(LLMJudge(backend)), GOOD)
    assert infos[0]["labels"]["pending"] and infos[0]["labels"]["judge"] == "llm"
    assert backend.calls == [(2, 0.0)]  # both search rounds in one batch, at the episode's end
    labels = infos[-1]["episode"]["turn_labels"]
    assert [(t["retrieval_utility"], t["reasoning_correctness"], t["contribution"]) for t in labels] == [(1, 1, 1), (1, 0, 0), (None, None, None)]
    assert labels[0]["analysis"] == "fine" and not labels[0]["pending"]


def test_in_env_sync_llm_judge_timeout_does_not_raise():
    from tests.envs.test_step_info import GOOD, play

    backend = Sleeping(30)
    infos = play(_env(LLMJudge(backend, LLMJudgeConfig(deferred=False, timeout_s=0.1))), GOOD)
    backend.release.set()
    assert infos[0]["labels"]["failed"] and infos[0]["labels"]["error"] == "timeout"
    assert infos[-1]["episode"]["judge_failures"] == 2 and infos[-1]["reward"]["total"] == 1.0
