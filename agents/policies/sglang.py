"""`SGLangPolicy`: a client of an SGLang server's native API.

Generation uses `POST /generate` with `input_ids` (so the rollout's token ids are exactly what the server
continues), `return_logprob` and `sampling_params.n`; token ids and logprobs are read from
`meta_info.output_token_logprobs` (`[logprob, token_id, text]` triples). Each prompt is one request, sent
concurrently, so that every prompt carries its own token budget and the server batches them itself.
The server's `text` is not used: it drops stop strings, while the ids keep every sampled token; the text
is decoded here from the ids.

A seeded call (`SamplingParams.seed`) sends each sample as its own request (`n=1`) with its own
`sampling_seed`: `sample_seed(seed, i * n + j)` for sample j of prompt i. The native API takes one seed
per request and SGLang's parallel sampling copies it to every sample, so under
`--enable-deterministic-inference` one shared seed would make a GRPO group n copies of one sample (and
two group members whose turns so far are equal would continue identically). Unseeded calls keep one
request per prompt with `n` (one prefill for the group); separate requests of one prompt still share
it through the server's prefix cache.

Weight sync after a learner update, bracketed by `/pause_generation` and `/continue_generation`, with
`/flush_cache` so no cached prefix computed by the old weights is reused:
- `load_weights(path)` (default path): `/update_weights_from_disk` with a folder the server can read;
- `update_weights(named_tensors)` (trainer and server on one host): `/update_weights_from_tensor`, wrapped
  in `/begin_weight_update` and `/end_weight_update` as SGLang >= 0.5.21 requires. It serializes tensors
  with SGLang's own serializer, so `sglang` must be importable in the trainer's process. CUDA tensors go
  as CUDA IPC handles; CPU tensors as named shared-memory files (torch's `file_system` sharing, which
  starts a `torch_shm_manager` daemon that lives as long as the server holds the segments).

Leave `SGLANG_RETURN_ORIGINAL_LOGPROB` unset on the server: with it, logprobs ignore the temperature.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from agents.policies.base import Completion, SamplingParams, check_budgets
from agents.policies.http import HTTPConfig, JSONClient
from searchgym.errors import BackendError, ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

PauseMode = Literal["abort", "retract", "in_place"]


@dataclass(frozen=True)
class SGLangPolicyConfig:
    """Where the server is and how to talk to it."""

    url: str = "http://127.0.0.1:30000"
    tokenizer: str | None = None
    """Tokenizer folder or id; None asks the server (`/model_info` -> `tokenizer_path`)."""
    http: HTTPConfig = field(default_factory=HTTPConfig)
    update_timeout_s: float = 600.0
    """Timeout of weight updates (loading a large checkpoint takes a while)."""
    max_concurrency: int = 64
    """Requests in flight at once."""
    abort_retries: int = 2
    """Times a request aborted by the server (e.g. by a concurrent pause) is sent again."""
    pause_mode: PauseMode = "retract"
    """What `/pause_generation` does to requests in flight during a weight update."""
    tp_size: int = 1
    """Tensor-parallel ranks of the server (the tensor path sends one payload per rank)."""

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.abort_retries < 0 or self.tp_size < 1 or self.update_timeout_s <= 0:
            raise ConfigError("abort_retries must be >= 0, tp_size >= 1 and update_timeout_s > 0")
        if self.pause_mode not in get_args(PauseMode):
            raise ConfigError(f"pause_mode must be abort, retract or in_place, got {self.pause_mode!r}")


def sample_seed(seed: int, index: int) -> int:
    """The `sampling_seed` of sample `index` of a call seeded with `seed`: a hash of both, in [0, 2**31),
    so the samples of one call are drawn with different seeds."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


class SGLangPolicy:
    def __init__(self, config: SGLangPolicyConfig | None = None, *, tokenizer: PreTrainedTokenizerBase | None = None):
        self.config = config or SGLangPolicyConfig()
        self.client = JSONClient(self.config.url, self.config.http, max_connections=self.config.max_concurrency)
        self._pool = ThreadPoolExecutor(self.config.max_concurrency)
        self._version = 0
        self.tokenizer = tokenizer if tokenizer is not None else self._load_tokenizer()

    def close(self) -> None:
        self._pool.shutdown()
        self.client.close()

    def _load_tokenizer(self) -> PreTrainedTokenizerBase:
        from transformers import AutoTokenizer

        from agents.models import ensure_pad_token

        name = self.config.tokenizer or self.model_info().get("tokenizer_path")
        if not name:
            raise ConfigError("the server did not say where its tokenizer is; set SGLangPolicyConfig.tokenizer")
        tokenizer = AutoTokenizer.from_pretrained(name)
        ensure_pad_token(tokenizer)
        return tokenizer

    # -- server info ------------------------------------------------------------------------------------

    def health(self, *, timeout_s: float = 5.0) -> bool:
        """True when `/health` answers 200 within `timeout_s` (no retries)."""
        try:
            self.client.request("GET", "/health", timeout_s=timeout_s, retries=0)
        except BackendError:
            return False
        return True

    def model_info(self) -> dict[str, Any]:
        last: BackendError | None = None
        for path in ("/model_info", "/get_model_info"):  # renamed in recent SGLang releases
            try:
                info = self.client.request("GET", path)
            except BackendError as e:
                last = e
                continue
            if isinstance(info, dict):
                return info
        raise BackendError(f"the server at {self.config.url} answered neither /model_info nor /get_model_info") from last

    # -- generation -------------------------------------------------------------------------------------

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, max_new_tokens: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        budgets = check_budgets(prompts, params, max_new_tokens)
        if params.seed is None or (params.n == 1 and len(prompts) == 1):
            futures = [self._pool.submit(self._generate_one, list(p), params, b) for p, b in zip(prompts, budgets)]
            return [f.result() for f in futures]
        # One request per sample, each with its own seed (see the module docstring).
        n = params.n
        rows = [[self._pool.submit(self._generate_one, list(p), replace(params, n=1, seed=sample_seed(params.seed, i * n + j)), b) for j in range(n)]
                for i, (p, b) in enumerate(zip(prompts, budgets))]
        return [[f.result()[0] for f in row] for row in rows]

    def request_payload(self, prompt: list[int], params: SamplingParams, budget: int) -> dict[str, Any]:
        """The `/generate` body of one request. A seed goes to the server only with `n == 1`: `generate`
        splits a seeded call into one request per sample."""
        if params.seed is not None and params.n > 1:
            raise ConfigError(f"a seeded request must have n=1 (got n={params.n}): every sample needs its own "
                              "sampling_seed; call generate, which sends one request per sample")
        sampling: dict[str, Any] = {
            "n": params.n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else -1,
            "max_new_tokens": budget,
            "stop": list(params.stop),
            "skip_special_tokens": True,
            "no_stop_trim": True,
        }
        if params.stop_token_ids is not None:
            # Our stop ids replace the model's EOS, as in HFPolicy.
            sampling["stop_token_ids"] = list(params.stop_token_ids)
            sampling["ignore_eos"] = True
        if params.seed is not None:
            sampling["sampling_seed"] = params.seed
        return {"input_ids": prompt, "sampling_params": sampling, "return_logprob": True, "logprob_start_len": -1}

    def _generate_one(self, prompt: list[int], params: SamplingParams, budget: int) -> list[Completion]:
        payload = self.request_payload(prompt, params, budget)
        for attempt in range(self.config.abort_retries + 1):
            answer = self.client.request("POST", "/generate", payload)
            outputs = answer if isinstance(answer, list) else [answer]
            if len(outputs) != params.n:
                raise BackendError(f"/generate returned {len(outputs)} outputs for n={params.n}")
            completions = [self._completion(o) for o in outputs]
            if all(c.finish_reason != "abort" for c in completions):
                return completions
            logger.warning("the server aborted a request (attempt %d); sending it again", attempt + 1)
        raise BackendError(f"the server aborted the request {self.config.abort_retries + 1} times; is it being paused or updated?")

    def _completion(self, output: Any) -> Completion:
        try:
            meta = output["meta_info"]
            triples = meta["output_token_logprobs"]
            ids = [int(t[1]) for t in triples]
            logprobs = [float(t[0]) for t in triples]
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise BackendError(f"/generate answer lacks meta_info.output_token_logprobs (was return_logprob honoured?): {str(output)[:300]}") from e
        if "output_ids" in output and list(output["output_ids"]) != ids:
            raise BackendError("/generate returned output_ids that disagree with output_token_logprobs")
        reason = meta.get("finish_reason") or {}
        kind = reason.get("type") if isinstance(reason, dict) else str(reason)
        finish = {"stop": "stop", "length": "length", "abort": "abort"}.get(kind or "", "stop")
        return Completion(
            token_ids=ids,
            logprobs=logprobs,
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            finish_reason=finish,  # type: ignore[arg-type]
            matched_stop=reason.get("matched") if isinstance(reason, dict) else None,
            meta={"weight_version": meta.get("weight_version")},
        )

    # -- weights ----------------------------------------------------------------------------------------

    def load_weights(self, path: str | Path, *, version: int | None = None) -> None:
        """Have the server load the checkpoint folder `path` (it must see the same file system). `version`
        tags the update (default: one more than the last); a router client sets it so that every worker,
        including one added later, reports the same version."""
        self._version = self._version + 1 if version is None else version
        with self._paused():
            answer = self.client.request(
                "POST",
                "/update_weights_from_disk",
                {"model_path": str(path), "weight_version": str(self._version)},
                timeout_s=self.config.update_timeout_s,
                retries=0,
            )
            self._check_success(answer, "update_weights_from_disk")
        logger.info("server at %s loaded %s (weight version %d)", self.config.url, path, self._version)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], *, version: int | None = None) -> None:
        """Send tensors through shared memory (same host only), bracketed by begin/end_weight_update.
        `version` as in `load_weights`."""
        try:
            from sglang.srt.utils import MultiprocessingSerializer
        except ImportError as e:
            raise ConfigError("the tensor weight path needs sglang importable in this process; use load_weights(path) otherwise") from e
        import torch.multiprocessing as tmp

        # Serializing moves a CPU tensor's storage into shared memory; copies keep the trainer's own
        # parameters where they are (CUDA tensors are shared by IPC handle and need no copy).
        named = [(name, t.detach() if t.is_cuda else t.detach().clone()) for name, t in named_tensors]
        if not named:
            raise ConfigError("update_weights got no tensors")
        # CUDA tensors travel as CUDA IPC handles. CPU tensors would by default travel as file descriptors
        # through a connection that only a child process can open (it checks the parent's authkey); shared
        # memory files named in the payload work for any process on this host. `named` keeps them alive
        # until the server has copied them.
        strategy = tmp.get_sharing_strategy()
        tmp.set_sharing_strategy("file_system")
        try:
            blob = MultiprocessingSerializer.serialize(named, output_str=True)
        finally:
            tmp.set_sharing_strategy(strategy)
        self._version = self._version + 1 if version is None else version
        with self._paused():
            self._check_success(self.client.request("POST", "/begin_weight_update", {}, timeout_s=self.config.update_timeout_s, retries=0), "begin_weight_update")
            try:
                payload = {
                    "serialized_named_tensors": [blob] * self.config.tp_size,
                    "load_format": None,
                    "flush_cache": True,
                    "weight_version": str(self._version),
                }
                answer = self.client.request("POST", "/update_weights_from_tensor", payload, timeout_s=self.config.update_timeout_s, retries=0)
                self._check_success(answer, "update_weights_from_tensor")
            finally:
                self._check_success(self.client.request("POST", "/end_weight_update", {}, timeout_s=self.config.update_timeout_s, retries=0), "end_weight_update")

    def flush_cache(self, *, attempts: int = 10) -> None:
        """Drop the server's prefix cache. It refuses while requests are running, so retry a few times."""
        last: BackendError | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.config.http.backoff_s)
            try:
                self.client.request("POST", "/flush_cache", {}, retries=0)
                return
            except BackendError as e:
                last = e
                logger.debug("flush_cache refused (attempt %d): %s", attempt + 1, e)
        raise BackendError(f"the server would not flush its cache after {attempts} attempts") from last

    @contextmanager
    def _paused(self) -> Iterator[None]:
        self.client.request("POST", "/pause_generation", {"mode": self.config.pause_mode})
        try:
            self.flush_cache()
            yield
        finally:
            self.client.request("POST", "/continue_generation", {})

    @staticmethod
    def _check_success(answer: Any, what: str) -> None:
        if isinstance(answer, dict) and answer.get("success") is False:
            raise BackendError(f"/{what} failed on the server: {answer.get('message', answer)}")

    @property
    def weight_version(self) -> int:
        return self._version

    def describe(self) -> dict[str, Any]:
        return {"policy": "sglang", "url": self.config.url, "tokenizer": getattr(self.tokenizer, "name_or_path", None), "weight_version": self._version}
