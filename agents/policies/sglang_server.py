"""Starting and stopping an SGLang server: `python -m sglang.launch_server`, bound to loopback by default.

>>> with SGLangServer(SGLangServerConfig(model_path="/models/qwen2.5-0.5b")) as server:  # doctest: +SKIP
...     policy = SGLangPolicy(SGLangPolicyConfig(url=server.url))
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from searchgym.errors import BackendError, BackendTimeout, ConfigError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SGLangServerConfig:
    """One server process."""

    model_path: str
    """A model folder (or hub id, online) the server loads."""
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port."""
    python: str = sys.executable
    """The interpreter whose environment has sglang installed."""
    module: str = "sglang.launch_server"
    extra_args: tuple[str, ...] = ()
    """More `launch_server` flags, e.g. `("--tp-size", "2", "--mem-fraction-static", "0.6")`."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to this process's environment for the server (e.g. CUDA_VISIBLE_DEVICES)."""
    startup_timeout_s: float = 600.0
    """How long to wait for `/health` before giving up and stopping the process."""
    stop_timeout_s: float = 30.0
    """How long a stopping server gets after SIGTERM before SIGKILL."""
    log_path: str | None = None
    """Where the server's output goes (default: a temporary file, named in the log and deleted by `stop`;
    errors raised while starting carry its tail)."""

    def __post_init__(self) -> None:
        if not self.model_path:
            raise ConfigError("model_path is required")
        if not 0 <= self.port < 65536:
            raise ConfigError(f"port must be in [0, 65535], got {self.port}")
        if self.startup_timeout_s <= 0 or self.stop_timeout_s <= 0:
            raise ConfigError("startup_timeout_s and stop_timeout_s must be > 0")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class SGLangServer:
    """A server process this object started and stops (its whole process group: SGLang forks workers)."""

    kind = "SGLang server"
    """What the process is called in errors."""

    def __init__(self, config: SGLangServerConfig):
        self.config = config
        self.port = config.port or free_port(config.host)
        self.url = f"http://{config.host}:{self.port}"
        self.process: subprocess.Popen | None = None
        self._own_log = config.log_path is None
        self.log_path: Path | None = Path(config.log_path) if config.log_path else None

    def command(self) -> list[str]:
        c = self.config
        return [c.python, "-m", c.module, "--model-path", c.model_path, "--host", c.host, "--port", str(self.port), *c.extra_args]

    def start(self) -> str:
        """Start the process and wait until `/health` answers 200. Returns the base url."""
        if self.process is not None:
            raise ConfigError("this server is already started")
        env = {**os.environ, **self.config.env}
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="sglang-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        logger.info("starting %s (log: %s)", " ".join(self.command()), self.log_path)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        logger.info("SGLang server ready at %s", self.url)
        return self.url

    def _wait_healthy(self) -> None:
        if not self._poll_until("/health", lambda answer: answer.status_code == 200, interval_s=0.5):
            raise BackendTimeout(f"the {self.kind} did not become healthy within {self.config.startup_timeout_s}s; "
                                 f"its output:\n{self.log_tail()}")

    def _poll_until(self, path: str, ready: Callable[[httpx.Response], bool], *, interval_s: float) -> bool:
        """GET `path` every `interval_s` until `ready(answer)` holds (True) or `startup_timeout_s` has passed
        (False). Raises BackendError as soon as the process exits; a refused or timed-out request is a miss."""
        assert self.process is not None
        deadline = time.monotonic() + self.config.startup_timeout_s
        with httpx.Client(trust_env=False) as client:
            while time.monotonic() < deadline:
                code = self.process.poll()
                if code is not None:
                    raise BackendError(f"the {self.kind} exited with code {code} while starting; its output:\n{self.log_tail()}")
                try:
                    if ready(client.get(f"{self.url}{path}", timeout=5.0)):
                        return True
                except httpx.HTTPError:
                    pass
                time.sleep(interval_s)
        return False

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after `stop_timeout_s`, then SIGKILL to any worker
        left in the group. Idempotent."""
        proc, self.process = self.process, None
        if proc is None:
            self._drop_log()
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the group this Popen created (start_new_session)
            proc.wait(timeout=self.config.stop_timeout_s)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            logger.warning("SGLang server %d ignored SIGTERM for %ss; killing it", proc.pid, self.config.stop_timeout_s)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10.0)
        self._drop_log()

    def _drop_log(self) -> None:
        if self._own_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def log_tail(self, chars: int = 4000) -> str:
        if self.log_path is None:
            return "(no log)"
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> SGLangServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
