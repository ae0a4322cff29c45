"""The retry rules the three HTTP clients share (`searchgym.retry`)."""

import pytest

from searchgym.errors import ConfigError
from searchgym.retry import JITTER, RETRY_STATUS, backoff_delay, check_retry_knobs


def test_backoff_doubles_and_is_jittered_down_only():
    for attempt, nominal in ((1, 0.2), (2, 0.4), (3, 0.8), (4, 1.6)):
        waits = [backoff_delay(0.2, attempt) for _ in range(200)]
        assert all((1 - JITTER) * nominal <= w <= nominal for w in waits)
        assert len(set(waits)) > 1  # jittered: clients failing together do not retry in lock step
    assert backoff_delay(0.0, 3) == 0.0
    with pytest.raises(ValueError, match="from 1"):
        backoff_delay(0.2, 0)


def test_one_knob_name_in_every_client():
    from agents.policies.http import HTTPConfig
    from searchgym.backends.openai import OpenAIConfig
    from searchgym.retrieval.http import HTTPRetrieverConfig

    for make, owner in ((lambda **kw: HTTPConfig(**kw), "HTTPConfig"),
                        (lambda **kw: OpenAIConfig("http://127.0.0.1:1/v1", "m", **kw), "OpenAIConfig"),
                        (lambda **kw: HTTPRetrieverConfig("http://127.0.0.1:1", **kw), "HTTPRetrieverConfig")):
        assert make(retries=3, backoff_s=0.1).retries == 3
        with pytest.raises(ConfigError, match=f"{owner}.retries must be >= 0"):
            make(retries=-1)
        with pytest.raises(ConfigError, match=f"{owner}.backoff_s must be >= 0"):
            make(backoff_s=-0.1)
    with pytest.raises(ConfigError, match="X.retries"):
        check_retry_knobs("X", -1, 0.0)


def test_retry_statuses_are_server_side_trouble_only():
    assert {429, 502, 503, 504} <= RETRY_STATUS
    assert not {400, 401, 403, 404, 422} & RETRY_STATUS
