"""`LLMJudge`: CW-GRPO's LLM judge over any `ChatBackend`.

Each request becomes one conversation (`searchgym.judges.prompt`): the judging rules as the system
message, the trace up to the latest round as the user message. Requests from any number of episodes go to
the backend in batches of `batch_size` (one `chat` call per batch; the OpenAI-compatible backend sends a
batch's conversations concurrently, the transformers backend generates them as one padded batch).

Failure handling, never an exception:

- a reply that is not the required JSON is asked again, up to `attempts` tries in all (retries at
  `retry_temperature`, since a greedy backend would repeat itself), then the round fails as `malformed`;
- a backend error (after the backend's own bounded retries) fails the batch's rounds as `backend`;
- a batch that takes longer than `timeout_s` fails as `timeout`. The wait is abandoned, not the work: an
  in-process model finishes the batch in a background thread and its result is discarded; an HTTP backend
  is bounded by its own timeouts.

A failed round gets `Verdict.failure` (u = v = 0, `failed=True`, the error kind) and is counted in
`stats`; it is not cached, so the same round is asked again next time. Successful verdicts are cached in
memory (least recently used first out), keyed by the conversation, the backend's description and the
sampling settings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from searchgym.backends.base import ChatBackend, ChatMessage
from searchgym.errors import BackendError, BackendTimeout, ConfigError
from searchgym.judges.base import ErrorKind, JudgeRequest, JudgeStats, Verdict
from searchgym.judges.prompt import MalformedReply, build_messages, parse_reply

__all__ = ["LLMJudge", "LLMJudgeConfig"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMJudgeConfig:
    deferred: bool = True
    """Label each episode's rounds in one batch at its end (True) or each round at its step (False)."""
    max_tokens: int = 512
    """Reply budget; the analysis comes before the JSON labels, so keep room for it."""
    temperature: float = 0.0
    """Sampling temperature of the first ask (0: greedy, as the CW-GRPO reference judge)."""
    retry_temperature: float = 0.7
    """Temperature when asking again after a malformed reply."""
    attempts: int = 2
    """Tries per round for malformed replies, the first included (>= 1)."""
    batch_size: int = 16
    """Conversations per backend call."""
    timeout_s: float | None = 300.0
    """Longest wait for one backend call, in seconds; None waits for the backend's own timeouts."""
    cache_size: int = 100_000
    """Verdicts kept in memory; 0 disables the cache."""
    max_doc_chars: int = 2000
    """Each document's text is cut to this many characters in the prompt."""
    name: str = "llm"
    """Recorded as `TurnLabels.judge`."""

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError(f"LLMJudgeConfig.max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0 or self.retry_temperature < 0:
            raise ConfigError("LLMJudgeConfig temperatures must be >= 0")
        if self.attempts < 1:
            raise ConfigError(f"LLMJudgeConfig.attempts must be >= 1 (the first try counts), got {self.attempts}")
        if self.batch_size < 1:
            raise ConfigError(f"LLMJudgeConfig.batch_size must be >= 1, got {self.batch_size}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError(f"LLMJudgeConfig.timeout_s must be > 0 or None, got {self.timeout_s}")
        if self.cache_size < 0 or self.max_doc_chars < 1:
            raise ConfigError("LLMJudgeConfig.cache_size must be >= 0 and max_doc_chars >= 1")
        if not self.name:
            raise ConfigError("LLMJudgeConfig.name must be a non-empty string")


class LLMJudge:
    """Labels search rounds by asking a chat model, with batching, bounded retries and a cache."""

    def __init__(self, backend: ChatBackend, config: LLMJudgeConfig | None = None):
        if not isinstance(backend, ChatBackend):
            raise ConfigError(f"LLMJudge needs a ChatBackend (chat(conversations, ...) and describe()); got {type(backend).__name__}")
        self.backend = backend
        self.config = config or LLMJudgeConfig()
        self.name = self.config.name
        self.deferred = self.config.deferred
        self.stats = JudgeStats()
        self._cache: OrderedDict[str, Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"kind": "llm", "backend": _safe_describe(self.backend), **asdict(self.config)}

    # -- labelling --------------------------------------------------------------------------------------

    def label(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        cfg = self.config
        n = len(requests)
        self.stats.add(requests=n)
        results: list[Verdict | None] = [None] * n
        convs = [build_messages(r, max_doc_chars=cfg.max_doc_chars) for r in requests]
        fingerprint = json.dumps([_safe_describe(self.backend), cfg.max_tokens, cfg.temperature], sort_keys=True, default=str)
        keys = [_key(fingerprint, c) for c in convs]
        # Identical rounds (the same trace judged twice in a batch) are asked once.
        todo: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            hit = self._cache_get(k)
            if hit is not None:
                results[i] = hit
                self.stats.add(cache_hits=1)
            else:
                todo.setdefault(k, []).append(i)
        problems: dict[str, str] = {}
        hung = False
        for attempt in range(cfg.attempts):
            if not todo:
                break
            if attempt:
                self.stats.add(retries=len(todo))
            temperature = cfg.temperature if attempt == 0 else cfg.retry_temperature
            malformed: dict[str, list[int]] = {}
            pending = list(todo)
            for start in range(0, len(pending), cfg.batch_size):
                chunk = pending[start : start + cfg.batch_size]
                if hung:
                    # A backend that just hung would most likely hang again: fail fast instead of waiting.
                    replies, error, message = None, "timeout", "skipped: an earlier batch of this call timed out"
                else:
                    replies, error, message = self._call([convs[todo[k][0]] for k in chunk], temperature)
                    hung = error == "timeout"
                for j, k in enumerate(chunk):
                    if replies is None:
                        self._fail(results, todo[k], error or "backend", message)
                        continue
                    try:
                        u, v, analysis = parse_reply(replies[j], data=convs[todo[k][0]][-1]["content"])
                    except MalformedReply as e:
                        malformed[k] = todo[k]
                        problems[k] = f"{e}; reply began {str(replies[j])[:120]!r}"
                        continue
                    verdict = Verdict(u, v, analysis=analysis)
                    self._cache_put(k, verdict)
                    for i in todo[k]:
                        results[i] = verdict
            todo = malformed
        for k, idx in todo.items():
            self._fail(results, idx, "malformed", f"no valid JSON after {cfg.attempts} tries: {problems.get(k, '')}")
        return [r if r is not None else Verdict.failure("exception", "internal: round left unlabelled") for r in results]

    def _fail(self, results: list[Verdict | None], indices: list[int], error: ErrorKind, message: str) -> None:
        verdict = Verdict.failure(error, analysis=message)
        for i in indices:
            results[i] = verdict
        self.stats.add(failures=len(indices), **{error: len(indices)})

    def _call(self, conversations: list[list[ChatMessage]], temperature: float) -> tuple[list[str] | None, ErrorKind | None, str]:
        """(replies, None, "") or (None, error kind, message). Never raises."""
        self.stats.add(backend_calls=1)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["replies"] = self.backend.chat(conversations, max_tokens=self.config.max_tokens, temperature=temperature)
            except BaseException as e:  # noqa: BLE001 - reported to the caller thread, which classifies it
                outcome["error"] = e

        if self.config.timeout_s is None:
            run()
        else:
            worker = threading.Thread(target=run, name="llm-judge-call", daemon=True)
            worker.start()
            worker.join(self.config.timeout_s)
            if worker.is_alive():
                logger.warning("judge backend call of %d conversations exceeded %.1f s; labelling them failed",
                               len(conversations), self.config.timeout_s)
                return None, "timeout", f"backend call exceeded {self.config.timeout_s} s"
        error = outcome.get("error")
        if error is not None:
            kind: ErrorKind = "timeout" if isinstance(error, BackendTimeout) else "backend" if isinstance(error, BackendError) else "exception"
            logger.warning("judge backend call failed (%s): %s", kind, error)
            return None, kind, f"{type(error).__name__}: {error}"
        replies = outcome.get("replies")
        if not isinstance(replies, list) or len(replies) != len(conversations):
            got = len(replies) if isinstance(replies, list) else type(replies).__name__
            return None, "backend", f"backend returned {got} replies for {len(conversations)} conversations"
        return replies, None, ""

    # -- cache ------------------------------------------------------------------------------------------

    def _cache_get(self, key: str) -> Verdict | None:
        with self._lock:
            verdict = self._cache.get(key)
            if verdict is not None:
                self._cache.move_to_end(key)
            return verdict

    def _cache_put(self, key: str, verdict: Verdict) -> None:
        if self.config.cache_size == 0:
            return
        with self._lock:
            self._cache[key] = verdict
            self._cache.move_to_end(key)
            while len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)


def _key(fingerprint: str, conversation: list[ChatMessage]) -> str:
    h = hashlib.sha256(fingerprint.encode())
    h.update(json.dumps(conversation, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _safe_describe(backend: ChatBackend) -> Any:
    try:
        return backend.describe()
    except Exception as e:  # noqa: BLE001 - a description is best effort; it only keys the cache
        return {"describe_failed": type(e).__name__}
