"""`ServerProcess`: the OpenEnv server as a child process this object starts and stops (scripts, tests,
benchmarks that need a live server beside them)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import IO, Any

from searchgym.errors import ConfigError, EnvServerError

logger = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at the moment of asking."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`python -m searchgym.integrations.openenv --id ENV_ID --env-arg ...` in a child process on
    127.0.0.1, ready when its `/health` answers. Use it as a context manager:

    >>> with ServerProcess("SearchQA-Synthetic-v0", {"num_entities": 300}) as server:  # doctest: +SKIP
    ...     env = RemoteSearchQAEnv(server.url)

    The child's output goes to a temporary log file, whose end is quoted when it fails to start."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, port: int | None = None,
                 max_sessions: int = 64, start_timeout_s: float = 120.0, python: str = sys.executable):
        if start_timeout_s <= 0:
            raise ConfigError(f"start_timeout_s must be > 0, got {start_timeout_s}")
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [python, "-m", "searchgym.integrations.openenv", "--id", env_id, "--port", str(self.port),
                        "--max-sessions", str(max_sessions), "--log-level", "warning"]
        for key, value in (env_kwargs or {}).items():
            self.command += ["--env-arg", f"{key}={json.dumps(value)}"]
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> ServerProcess:
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy())
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise EnvServerError(f"the env server exited with code {self.process.returncode} at start: {tail}")
            if self._healthy():
                return self
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise EnvServerError(f"the env server did not answer /health within {self.start_timeout_s} s: {tail}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the child's output."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-chars:]

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the server to stop (SIGTERM), and kill it if it has not within `timeout_s`."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("the env server (pid %d) ignored SIGTERM for %.0f s; killing it", self.process.pid, timeout_s)
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
