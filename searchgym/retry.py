"""The retry rules every HTTP client here shares: which answers are worth another attempt, and how long
to wait before it. `searchgym.http.HTTPClient` applies them; this module holds only the rules.

The retrieval client (`searchgym.retrieval.http`), the OpenAI-compatible chat backend
(`searchgym.backends.openai`) and the policy servers' JSON client (`agents.policies.http`) each bound
their attempts with the same two knobs, `retries` (attempts after the first) and `backoff_s` (the base
wait), and sleep `backoff_delay(backoff_s, attempt)` between attempts: exponential, with jitter so that many
clients failing together do not retry in lock step.
"""

from __future__ import annotations

import random

__all__ = ["JITTER", "RETRY_STATUS", "backoff_delay", "check_retry_knobs"]

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
"""HTTP answers worth retrying: the request timed out on the server's side (408), came too early (425),
the server is busy (429, 503), failed on its side (500) or a proxy lost it (502, 504). Any other 4xx is
the request's fault and fails at once."""

JITTER = 0.5
"""Each wait is drawn uniformly from [(1 - JITTER) * w, w] for the nominal wait w."""

_rng = random.Random()  # its own generator: retry timing must not consume the caller's seeded draws


def backoff_delay(backoff_s: float, attempt: int) -> float:
    """Seconds to wait before retry `attempt` (1 for the first retry): `backoff_s * 2 ** (attempt - 1)`,
    jittered down by up to `JITTER` of itself.

    >>> 0.5 * 0.5 <= backoff_delay(0.5, 1) <= 0.5
    True
    >>> 2.0 * 0.5 <= backoff_delay(0.5, 3) <= 2.0
    True
    """
    if attempt < 1:
        raise ValueError(f"attempt counts retries from 1, got {attempt}")
    nominal = backoff_s * 2 ** (attempt - 1)
    return nominal * (1.0 - JITTER * _rng.random())


def check_retry_knobs(owner: str, retries: int, backoff_s: float) -> None:
    """Raise a `ConfigError` naming `owner` when `retries` or `backoff_s` is negative."""
    from searchgym.errors import ConfigError

    if retries < 0:
        raise ConfigError(f"{owner}.retries must be >= 0, got {retries}")
    if backoff_s < 0:
        raise ConfigError(f"{owner}.backoff_s must be >= 0, got {backoff_s}")
