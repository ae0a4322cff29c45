"""`RouterPolicy`: rollouts through SGLang's router (`sglang-router`), weight pushes to each of its workers.

Generation goes to the router's `/generate`, which picks a worker per request (cache-aware by default,
so a GRPO group's samples, one request with `n`, share one prefill) and retries a request on another
worker when one does not answer. The router does not forward weight updates, so a push asks the router
for its workers (`GET /workers`), sends the update to each worker's own url (an `SGLangPolicy` per
worker, concurrently for `load_weights`), and reads back each worker's `weight_version`
(`/get_model_info`). A worker that fails the push or reports another version would sample with old
weights: it is taken out of the router (`DELETE /workers/{id}`) and named in `removed`, or the push
raises, as `on_stale_worker` says. Every completion carries the version of the worker that sampled it;
after a push, a completion from another version (a worker added to the router since, or restarted) is a
`BackendError`, so no rollout is silently off-policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from agents.policies.base import Completion, SamplingParams
from agents.policies.http import HTTPConfig
from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
from searchgym.errors import BackendError, ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

StaleWorkerAction = Literal["remove", "raise"]


@dataclass(frozen=True)
class RouterPolicyConfig:
    """Where the router is, and what a weight push does with a worker that did not take it."""

    url: str = "http://127.0.0.1:30000"
    """The router's base url (`python -m sglang_router.launch_router --port ...`)."""
    tokenizer: str | None = None
    """Tokenizer folder or id; None asks the router (it forwards `/get_model_info` to a worker)."""
    http: HTTPConfig = field(default_factory=HTTPConfig)
    """Timeouts and retries of generation requests to the router and of pushes to each worker."""
    update_timeout_s: float = 600.0
    """Timeout of one worker's weight update."""
    max_concurrency: int = 64
    """Requests to the router in flight at once."""
    on_stale_worker: StaleWorkerAction = "remove"
    """A worker that fails a push or reports another weight version: `remove` takes it out of the router
    and continues with the others (the push fails only when no worker took it); `raise` stops."""
    removal_wait_s: float = 10.0
    """How long to wait for the router to stop listing a removed worker (it removes in the background)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"router url must start with http:// or https://, got {self.url!r}")
        if self.max_concurrency < 1 or self.update_timeout_s <= 0 or self.removal_wait_s < 0:
            raise ConfigError("max_concurrency must be >= 1, update_timeout_s > 0 and removal_wait_s >= 0")
        if self.on_stale_worker not in get_args(StaleWorkerAction):
            raise ConfigError(f"on_stale_worker must be 'remove' or 'raise', got {self.on_stale_worker!r}")


@dataclass(frozen=True)
class RouterWorker:
    """One worker as the router lists it."""

    id: str
    url: str
    healthy: bool


class RouterPolicy:
    """A `Policy` over the workers behind one SGLang router."""

    def __init__(self, config: RouterPolicyConfig | None = None, *, tokenizer: PreTrainedTokenizerBase | None = None):
        self.config = config or RouterPolicyConfig()
        c = self.config
        self.router = SGLangPolicy(
            SGLangPolicyConfig(url=c.url, tokenizer=c.tokenizer, http=c.http, max_concurrency=c.max_concurrency),
            tokenizer=tokenizer,
        )
        self.tokenizer = self.router.tokenizer
        self.removed: list[str] = []
        """Urls of workers taken out of the router because a push did not reach them."""
        self._clients: dict[str, SGLangPolicy] = {}
        self._version = 0

    def close(self) -> None:
        self.router.close()
        for client in self._clients.values():
            client.close()

    # -- the router -------------------------------------------------------------------------------------

    def health(self, *, timeout_s: float = 5.0) -> bool:
        return self.router.health(timeout_s=timeout_s)

    def model_info(self) -> dict[str, Any]:
        return self.router.model_info()

    def workers(self) -> list[RouterWorker]:
        """The workers the router routes to now (`GET /workers`)."""
        answer = self.router.client.request("GET", "/workers")
        try:
            return [
                RouterWorker(id=str(w["id"]), url=str(w["url"]).rstrip("/"), healthy=bool(w.get("is_healthy", True)))
                for w in answer["workers"]
            ]
        except (KeyError, TypeError) as e:
            raise BackendError(
                f"GET {self.config.url}/workers did not list workers with id and url (is this an "
                f"sglang-router?): {str(answer)[:300]}"
            ) from e

    @property
    def members(self) -> list[SGLangPolicy]:
        """A client of each worker the router lists now (for per-server checks such as `model_info`)."""
        return [self._client(w.url) for w in self.workers()]

    def _client(self, url: str) -> SGLangPolicy:
        if url not in self._clients:
            c = self.config
            config = SGLangPolicyConfig(url=url, http=c.http, update_timeout_s=c.update_timeout_s, max_concurrency=4)
            client = SGLangPolicy(config, tokenizer=self.tokenizer)
            # A worker met after a push was checked by it: its client starts at that version, so
            # `member.weight_version` compares with what the worker reports.
            client._version = self._version
            self._clients[url] = client
        return self._clients[url]

    # -- generation -------------------------------------------------------------------------------------

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, max_new_tokens: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        groups = self.router.generate(prompts, params, max_new_tokens=max_new_tokens)
        if self._version:
            expected = str(self._version)
            stale = {c.meta.get("weight_version") for g in groups for c in g} - {expected, None}
            if stale:
                raise BackendError(
                    f"a worker behind the router at {self.config.url} sampled with weight version(s) "
                    f"{sorted(stale)}, expected {expected!r}: was a worker added or restarted since the "
                    "last push? Push the weights again before sampling."
                )
        return groups

    # -- weights ----------------------------------------------------------------------------------------

    def load_weights(self, path: str | Path) -> None:
        """Every worker loads the folder, concurrently (each reads it on its own)."""
        self._push(lambda client, v: client.load_weights(path, version=v), concurrent=True)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Every worker gets the tensors, one after the other (`SGLangPolicy` switches torch's process-wide
        sharing strategy while it serializes, which concurrent calls would race on)."""
        named = list(named_tensors)
        if not named:
            raise ConfigError("update_weights got no tensors")
        self._push(lambda client, v: client.update_weights(named, version=v), concurrent=False)

    def _push(self, call: Callable[[SGLangPolicy, int], None], *, concurrent: bool) -> None:
        listed = self.workers()
        if not listed:
            raise BackendError(f"the router at {self.config.url} lists no workers to push weights to")
        target = self._version + 1

        def push(worker: RouterWorker) -> str | None:
            """None when the worker reports the new version, else why not."""
            client = self._client(worker.url)
            try:
                call(client, target)
                reported = client.model_info().get("weight_version")
            except BackendError as e:
                return f"{type(e).__name__}: {e}"
            return None if reported == str(target) else f"reports weight version {reported!r}, expected {str(target)!r}"

        if concurrent and len(listed) > 1:
            with ThreadPoolExecutor(len(listed)) as pool:
                outcomes = list(pool.map(push, listed))
        else:
            outcomes = [push(w) for w in listed]
        failed = [(w, why) for w, why in zip(listed, outcomes) if why is not None]
        if failed:
            detail = "; ".join(f"{w.url}: {why}" for w, why in failed)
            if self.config.on_stale_worker == "raise" or len(failed) == len(listed):
                raise BackendError(
                    f"weight version {target} did not reach every worker of the router at {self.config.url}: {detail}"
                )
            logger.warning(
                "removing %d worker(s) from the router that did not take weight version %d: %s",
                len(failed),
                target,
                detail,
            )
            for worker, _ in failed:
                self._remove(worker)
        self._version = target
        logger.info("weight version %d on %d worker(s) behind %s", target, len(listed) - len(failed), self.config.url)

    def _remove(self, worker: RouterWorker) -> None:
        self.router.client.request("DELETE", f"/workers/{worker.id}", retries=0)
        self.removed.append(worker.url)
        stale = self._clients.pop(worker.url, None)
        if stale is not None:
            stale.close()
        deadline = time.monotonic() + self.config.removal_wait_s
        while any(w.id == worker.id for w in self.workers()):
            if time.monotonic() > deadline:
                raise BackendError(
                    f"the router at {self.config.url} still lists {worker.url} {self.config.removal_wait_s}s after "
                    "its removal; it may serve rollouts with old weights"
                )
            time.sleep(0.1)

    @property
    def weight_version(self) -> int:
        return self._version

    def describe(self) -> dict[str, Any]:
        return {
            "policy": "sglang-router",
            "url": self.config.url,
            "weight_version": self._version,
            "removed": list(self.removed),
        }
