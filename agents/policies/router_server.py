"""Starting and stopping SGLang's router (`python -m sglang_router.launch_router`, from the
`sglang-router` package) in front of running SGLang servers, bound to loopback by default.

>>> urls = ("http://127.0.0.1:30001", "http://127.0.0.1:30002")
>>> with SGLangRouter(SGLangRouterConfig(worker_urls=urls)) as router:  # doctest: +SKIP
...     policy = RouterPolicy(RouterPolicyConfig(url=router.url))
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal, get_args

import httpx

from agents.policies.sglang_server import SGLangServer, SGLangServerConfig
from searchgym.errors import BackendTimeout, ConfigError


RoutingPolicy = Literal["cache_aware", "round_robin", "random", "power_of_two"]


@dataclass(frozen=True)
class SGLangRouterConfig:
    """One router process."""

    worker_urls: tuple[str, ...]
    """The SGLang servers to route to (more can be added later with `POST /workers`)."""
    policy: RoutingPolicy = "cache_aware"
    """How the router picks a worker; cache_aware sends requests that share a prefix to one worker."""
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port."""
    python: str = sys.executable
    """The interpreter whose environment has sglang-router installed."""
    extra_args: tuple[str, ...] = ()
    """More `launch_router` flags, e.g. `("--health-check-interval-secs", "5")`."""
    startup_timeout_s: float = 60.0
    stop_timeout_s: float = 10.0
    log_path: str | None = None
    """Where the router's output goes (default: a temporary file deleted by `stop`)."""

    def __post_init__(self) -> None:
        if not self.worker_urls:
            raise ConfigError("the router needs at least one worker url")
        bad = [u for u in self.worker_urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ConfigError(f"worker urls must start with http:// or https://, got {bad}")
        if self.policy not in get_args(RoutingPolicy):
            raise ConfigError(f"policy must be cache_aware, round_robin, random or power_of_two, got {self.policy!r}")


class SGLangRouter(SGLangServer):
    """A router process this object started and stops; it is ready when its `/health` answers and its
    `GET /workers` lists every worker it was started with (the router registers them after it starts
    answering, so for a moment, longer on a busy machine, it can answer and route nowhere)."""

    kind = "SGLang router"

    def __init__(self, config: SGLangRouterConfig):
        self.router_config = config
        super().__init__(
            SGLangServerConfig(
                model_path="sglang-router",
                host=config.host,
                port=config.port,
                python=config.python,
                module="sglang_router.launch_router",
                extra_args=config.extra_args,
                startup_timeout_s=config.startup_timeout_s,
                stop_timeout_s=config.stop_timeout_s,
                log_path=config.log_path,
            )
        )

    def _wait_healthy(self) -> None:
        super()._wait_healthy()
        wanted = {u.rstrip("/") for u in self.router_config.worker_urls}
        listed: set[str] = set()

        def lists_every_worker(answer: httpx.Response) -> bool:
            nonlocal listed
            if answer.status_code != 200:
                return False
            try:
                listed = {str(w.get("url", "")).rstrip("/") for w in answer.json().get("workers", [])}
            except (ValueError, AttributeError, TypeError):  # not JSON, or not a list of workers (yet)
                return False
            return wanted <= listed

        if not self._poll_until("/workers", lists_every_worker, interval_s=0.2):
            raise BackendTimeout(f"the SGLang router answered /health but listed {sorted(listed)} of its workers "
                                 f"{sorted(wanted)} within {self.config.startup_timeout_s}s; its output:\n{self.log_tail()}")

    def command(self) -> list[str]:
        c = self.router_config
        return [
            c.python,
            "-m",
            "sglang_router.launch_router",
            "--host",
            c.host,
            "--port",
            str(self.port),
            "--worker-urls",
            *c.worker_urls,
            "--policy",
            c.policy,
            *c.extra_args,
        ]
