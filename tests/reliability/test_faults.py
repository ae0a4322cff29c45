"""Faults provoked for real, each with its documented outcome (docs/faults-and-load.md).

- Retrieval server SIGKILLed or hung mid-episode: `env.step` raises `RetrievalError` / `RetrievalTimeout`
  within the client's budget and leaves the episode as it was; the same step succeeds once the server is
  back, and a server that comes back within the retry budget is a retried success with no error at all.
- SGLang server SIGKILLed mid-rollout: `BackendError` out of `RolloutEngine.rollout` within a bounded
  time, no trajectory returned; after a restart on the same port the next rollout is complete.
- LLM judge whose server hangs or answers garbage: the episode runs to its end in bounded time, and each
  affected round is flagged (`failed=True`, an error kind, u = v = p = 0, counted in `judge_failures`).
- A checkpoint write that fails (file size limit, as a full disk would): `CheckpointError`, no partial
  checkpoint anywhere, the previous one loads, and the run resumes from it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the retrieval server needs the server extra")
pytest.importorskip("httpx", reason="the HTTP clients need httpx")

from searchgym.envs import SearchQAEnv
from searchgym.errors import RetrievalError, RetrievalTimeout
from searchgym.retrieval import HTTPRetriever, HTTPRetrieverConfig
from tools.loadgen import RANK_BM25_SERVE, SERVE, ServerProcess

ROOT = Path(__file__).resolve().parents[2]

LAUNCHERS = {"server-module": RANK_BM25_SERVE, "searchgym-serve": SERVE}


class SilentServer:
    """A loopback TCP server that accepts connections, reads requests and never answers, or answers
    `reply` (e.g. headers and half a body) and then stalls. Closing it closes every connection."""

    def __init__(self, port: int = 0, reply: bytes = b""):
        self.reply = reply
        self.accepted = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(64)
        self._sock.settimeout(0.05)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._conns.append(conn)
            t = threading.Thread(target=self._hold, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _hold(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        replied = False
        while not self._stop.is_set():
            try:
                if not conn.recv(65536):
                    return
            except TimeoutError:
                continue
            except OSError:
                return
            if self.reply and not replied:
                conn.sendall(self.reply)
                replied = True

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        for conn in self._conns:
            conn.close()
        self._sock.close()


def _corpus_file(tmp_path: Path, corpus) -> Path:
    path = tmp_path / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": d.id, "contents": d.contents}) + "\n" for d in corpus)
    return path


def _timed(fn, *args):
    start = time.monotonic()
    try:
        return fn(*args), None, time.monotonic() - start
    except Exception as e:  # noqa: BLE001 - returned to the test, which asserts its type
        return None, e, time.monotonic() - start


# -- the retrieval server ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["server-module", "searchgym-serve"])
def test_retrieval_server_killed_mid_episode(launcher, tmp_path, ten_doc_corpus, small_records):
    corpus = _corpus_file(tmp_path, ten_doc_corpus)

    def start(port: int | None = None) -> ServerProcess:
        return ServerProcess(["--corpus", str(corpus)], port=port, launcher=LAUNCHERS[launcher], startup_timeout_s=120)

    server = start()
    budget = HTTPRetrieverConfig(server.url, timeout_s=3.0, retries=2, backoff_s=0.1)
    env = SearchQAEnv(small_records, retriever=HTTPRetriever(budget), top_k=2, candidates=3, max_turns=4)
    try:
        env.reset(options={"index": 2})
        obs, *_ = env.step("<search>Who discovered radioactivity?</search>")
        assert "Becquerel" in obs

        # Killed: a typed error within the budget, and the episode untouched.
        server.kill()
        action = "<think>Becquerel found it; where was he born?</think><search>Henri Becquerel born</search>"
        _, error, seconds = _timed(env.step, action)
        assert type(error) is RetrievalError and "Is it running" in str(error), error
        assert seconds < budget.timeout_s
        assert (env.turn, len(env.turn_infos), len(env.transcript)) == (1, 1, 3)
        print(f"[{launcher}] SIGKILL mid-episode: {type(error).__name__} after {seconds:.2f} s (budget {budget.timeout_s:g} s)")

        # Restarted on the same port: the caller's retry of the same step goes through as turn 1.
        server = start(server.port)
        obs, _, _, _, info = env.step(action)
        assert info["turn"] == 1 and "Henri Becquerel" in obs and info["shown"][0]["id"] == "d6"

        # Killed again, back while the client is still retrying: a success, no error at all.
        server.kill()
        patient = HTTPRetriever(HTTPRetrieverConfig(server.url, timeout_s=90.0, retries=12, backoff_s=0.1))
        env.retriever = patient
        restarted: dict[str, ServerProcess] = {}
        thread = threading.Thread(target=lambda: restarted.setdefault("server", start(server.port)))
        thread.start()
        result, error, seconds = _timed(env.step, "<search>Paris</search>")
        thread.join()
        server = restarted["server"]
        assert error is None and "Paris" in result[0] and result[4]["turn"] == 2
        assert seconds < 90.0
        print(f"[{launcher}] restarted: the same step succeeded; killed again and restarted during the client's retries: "
              f"success after {seconds:.2f} s, no error")

        _, reward, terminated, truncated, info = env.step("<answer>Paris</answer>")
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert info["episode"]["turns"] == 4 and info["episode"]["searches"] == 3 and info["episode"]["format_valid"]
    finally:
        server.close()


HALF_AN_ANSWER = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"result": [['


@pytest.mark.parametrize("reply", [b"", HALF_AN_ANSWER], ids=["never-answers", "stalls-mid-body"])
def test_retrieval_server_hung_mid_episode(reply, tmp_path, ten_doc_corpus, small_records):
    corpus = _corpus_file(tmp_path, ten_doc_corpus)
    launcher = LAUNCHERS["server-module"]
    server = ServerProcess(["--corpus", str(corpus)], launcher=launcher, startup_timeout_s=120)
    budget = HTTPRetrieverConfig(server.url, timeout_s=1.0, retries=4, backoff_s=0.1)
    env = SearchQAEnv(small_records, retriever=HTTPRetriever(budget), top_k=2, candidates=3, max_turns=3)
    try:
        env.reset(options={"index": 1})
        env.step("<search>radioactivity</search>")
        server.kill()
        with closing(SilentServer(server.port, reply)) as hung:
            _, error, seconds = _timed(env.step, "<search>Who discovered radioactivity?</search>")
            assert isinstance(error, RetrievalTimeout), error
            assert hung.accepted >= 1
        assert seconds < budget.timeout_s + 2.0  # the 1 s budget for the call, not 1 s for each of its 5 attempts
        assert (env.turn, len(env.turn_infos)) == (1, 1)
        print(f"hung server ({'headers and half a body, then silence' if reply else 'accepts, never answers'}): "
              f"{type(error).__name__} after {seconds:.2f} s (budget {budget.timeout_s:g} s)")

        server = ServerProcess(["--corpus", str(corpus)], port=server.port, launcher=launcher, startup_timeout_s=120)
        _, _, _, _, info = env.step("<search>Who discovered radioactivity?</search>")
        assert info["turn"] == 1 and info["shown"][0]["id"] == "d5"
    finally:
        server.close()


# -- the SGLang server -------------------------------------------------------------------------------------


class CallCounter:
    """Passes every call to the policy under test, counting them so the test knows when a turn is in flight."""

    def __init__(self, policy):
        self.policy, self.tokenizer, self.calls = policy, policy.tokenizer, 0

    def generate(self, prompts, params, *, max_new_tokens=None):
        self.calls += 1
        return self.policy.generate(prompts, params, max_new_tokens=max_new_tokens)

    @property
    def weight_version(self) -> int:
        return self.policy.weight_version


def _kill_during_call(counter: CallCounter, call: int, kill, delay_s: float, killed_at: list[float]) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 60
        while counter.calls < call and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay_s)
        kill()
        killed_at.append(time.monotonic())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _sglang_rollouts_survive_a_kill(start_server, kill_server, tokenizer, make_env, *, delay_s: float, same_tokens: bool) -> None:
    from agents.policies.http import HTTPConfig
    from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig
    from agents.rollout import RolloutConfig, RolloutEngine
    from searchgym.errors import BackendError
    from tests.agents.test_rollout_exact import check_token_exact

    server = start_server(0)
    http = HTTPConfig(timeout_s=60.0, connect_timeout_s=1.0, retries=2, backoff_s=0.1)
    policy = SGLangPolicy(SGLangPolicyConfig(url=server.url, http=http), tokenizer=tokenizer)
    counter = CallCounter(policy)
    config = RolloutConfig(group_size=2, temperature=0.0, max_turn_tokens=8, max_response_tokens=400, use_chat_template=False)
    engine = RolloutEngine(counter, make_env, config)
    questions = [{"options": {"index": 0}}, {"options": {"index": 1}}]
    try:
        before = engine.rollout(questions)
        assert all(t.num_turns == 3 for t in before)  # three policy calls per rollout

        # Killed while the second turn's requests are in flight.
        counter.calls = 0
        killed_at: list[float] = []
        watcher = _kill_during_call(counter, 2, lambda: kill_server(server), delay_s, killed_at)
        result, error, _ = _timed(engine.rollout, questions)
        failed_at = time.monotonic()
        watcher.join(10)
        assert result is None and isinstance(error, BackendError), error
        assert "is the server running" in str(error)
        seconds = failed_at - killed_at[0]
        assert seconds < 5.0
        print(f"killed during turn 2 of a rollout: {type(error).__name__} {seconds:.2f} s after the kill, no trajectory returned")

        server = start_server(server.port)  # same port: the client is unchanged
        after = engine.rollout(questions)
        assert len(after) == 4
        for t, ref in zip(after, before):
            check_token_exact(t, tokenizer)
            assert t.num_turns == 3 and t.finish_reason == ref.finish_reason
            if same_tokens:  # the scripted server: the very episodes of before the kill
                assert t.token_ids == ref.token_ids
        print(f"restarted on the same port: the next rollout returned {len(after)} complete trajectories")
    finally:
        engine.close()
        policy.close()
        server.stop()


@pytest.fixture
def tiny():
    """(model, tokenizer): the tiny random Llama of the agents tests."""
    pytest.importorskip("torch", reason="the rollout tests need torch")
    from agents.models import TinyModelConfig, build_tiny_model

    return build_tiny_model(TinyModelConfig(seed=0))


def _make_env(records, corpus):
    return lambda: SearchQAEnv(records, corpus, retriever="rank_bm25", cache_dir=False, max_turns=3)


def test_fake_sglang_process_killed_mid_rollout(tiny, ten_doc_corpus, small_records):
    """The loopback stand-in as a process (it answers each /generate after 0.4 s with fixed tokens)."""
    from agents.policies.sglang_server import SGLangServer
    from tests.agents.test_sglang_client import fake_server_config

    def start(port: int) -> SGLangServer:
        server = SGLangServer(fake_server_config(port=port, extra_args=("--generate-delay", "0.4")))
        server.start()
        return server

    def kill(server: SGLangServer) -> None:
        server.process.kill()  # the process this test started, by its id
        server.process.wait(10)

    _sglang_rollouts_survive_a_kill(start, kill, tiny[1], _make_env(small_records, ten_doc_corpus), delay_s=0.15, same_tokens=True)


@pytest.mark.server
@pytest.mark.slow
def test_real_sglang_server_killed_mid_rollout(tmp_path, tiny, ten_doc_corpus, small_records):
    """A real SGLang (CPU build) serving the tiny model; its whole process group is SIGKILLed mid-rollout."""
    from agents.models import save_model
    from agents.policies.sglang_server import SGLangServer, SGLangServerConfig
    from tests.agents.test_sglang_server import VENV, _server_venv

    venv = _server_venv()
    model, tok = tiny
    save_model(model, tok, tmp_path / "model")

    def start(port: int) -> SGLangServer:
        config = SGLangServerConfig(
            model_path=str(tmp_path / "model"), port=port, python=str(venv / "bin" / "python"),
            env={"SGLANG_USE_CPU_ENGINE": "1", "PYTHONPATH": str(VENV / "sglang-cpu-stubs")},
            extra_args=("--device", "cpu", "--max-total-tokens", "8192", "--disable-overlap-schedule", "--dtype", "float32", "--random-seed", "0"),
            startup_timeout_s=600.0,
        )  # fmt: skip
        server = SGLangServer(config)
        server.start()
        return server

    def kill(server: SGLangServer) -> None:
        os.killpg(server.process.pid, signal.SIGKILL)  # the group this test's launcher started (SGLang forks)
        server.process.wait(30)

    # Greedy decoding of a random model meets near-ties, which batching order can flip: compare shapes only.
    _sglang_rollouts_survive_a_kill(start, kill, tok, _make_env(small_records, ten_doc_corpus), delay_s=0.0, same_tokens=False)


# -- the LLM judge ------------------------------------------------------------------------------------------


class ChatServer:
    """An OpenAI-compatible loopback server that answers every chat request with `body` (HTTP 200)."""

    def __init__(self, body: bytes):
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


GARBAGE_REPLY = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Looks fine to me!! {u: yes"}, "finish_reason": "stop"}]}).encode()

JUDGE_FAULTS = {
    # name: (server, backend read timeout s, judge wait bound s, error kind the rounds must carry)
    "hangs-backend-timeout": ("silent", 0.4, 30.0, "timeout"),
    "hangs-judge-timeout": ("silent", 30.0, 1.0, "timeout"),
    "garbage-labels": ("garbage", 5.0, 30.0, "malformed"),
    "garbage-body": ("html", 5.0, 30.0, "backend"),
}


@pytest.mark.parametrize("mode", ["deferred", "sync"])
@pytest.mark.parametrize("fault", list(JUDGE_FAULTS))
def test_llm_judge_faults_flag_the_rounds(fault, mode, ten_doc_corpus, small_records):
    from agents.learners.cw_grpo import round_contributions
    from searchgym.backends.openai import OpenAIChatBackend, OpenAIConfig
    from searchgym.judges.llm import LLMJudge, LLMJudgeConfig

    kind, read_timeout, judge_timeout, expected = JUDGE_FAULTS[fault]
    server = SilentServer() if kind == "silent" else ChatServer(GARBAGE_REPLY if kind == "garbage" else b"<html>502 Bad Gateway</html>")
    backend = OpenAIChatBackend(OpenAIConfig(f"http://127.0.0.1:{server.port}/v1", "judge", timeout_s=read_timeout, connect_timeout_s=1.0, retries=1, backoff_s=0.05))
    judge = LLMJudge(backend, LLMJudgeConfig(timeout_s=judge_timeout, attempts=2, deferred=mode == "deferred"))
    env = SearchQAEnv(small_records, ten_doc_corpus, retriever="rank_bm25", cache_dir=False, judge=judge, max_turns=4)
    try:
        env.reset(options={"index": 2})
        start = time.monotonic()
        infos = [env.step("<think>Who found radioactivity?</think><search>discovered radioactivity</search>")[4]]
        infos.append(env.step("<think>Henri Becquerel. Where was he born?</think><search>Henri Becquerel born</search>")[4])
        _, reward, terminated, _, last = env.step("<answer>Paris</answer>")
        seconds = time.monotonic() - start
        infos.append(last)
    finally:
        backend.close()
        server.close()

    assert terminated and reward == 1.0  # the answer's reward does not depend on the judge
    episode = last["episode"]
    assert episode["judge_failures"] == 2
    for labels in episode["turn_labels"][:2]:
        assert labels["failed"] and labels["error"] == expected and not labels["pending"]
        assert (labels["retrieval_utility"], labels["reasoning_correctness"], labels["contribution"]) == (0, 0, 0)
    assert round_contributions(infos) == ([0, 0], True)  # CW-GRPO reads a failed round as p = 0
    assert judge.stats.failures >= 2 and getattr(judge.stats, expected) >= 2
    # Bounded: the slowest fault here (two rounds, sync, each asked twice) takes about its bound, far below the
    # 30 s waits it would take unbounded; the slack is for a busy machine.
    bound = {"hangs-backend-timeout": 2 * 2 * 2 * 0.5, "hangs-judge-timeout": 2 * 1.0}.get(fault, 5.0)
    assert seconds < bound + 5.0, f"{fault}/{mode} took {seconds:.1f} s"
    print(f"judge {fault} ({mode}): episode of 2 searches + answer in {seconds:.2f} s; both rounds flagged failed, "
          f"error={expected!r}, p=0; judge_failures={episode['judge_failures']}; reward {reward}")


# -- checkpoints on a full disk -------------------------------------------------------------------------------

FULL_DISK_RUN = textwrap.dedent(
    """
    import json, resource, signal, sys, torch
    from pathlib import Path
    from dataclasses import replace
    from agents.train import TrainConfig
    from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
    from agents.train.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, trainable_state
    from agents.train.trainer import Trainer

    out = Path(sys.argv[1])
    config = TrainConfig(model="tiny", steps=2, questions_per_step=2, out_dir=str(out),
                         env=EnvConfig(num_entities=300, num_questions=20, max_turns=2),
                         rollout=RolloutConfig(group_size=2, max_turn_tokens=12, max_response_tokens=64),
                         optim=OptimConfig(micro_batch=2, lr=1e-3))
    trainer = Trainer(config)
    trainer.train_step()
    saved = trainable_state(trainer.model)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit, a write fails with EFBIG instead
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    errors = []
    # 100 kB: the weights file fails; 600 kB: the weights fit, the optimizer state does not.
    for limit, attempt in ((100_000, trainer.train_step), (600_000, trainer.save)):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            attempt()
            errors.append(None)
        except CheckpointError as e:
            errors.append(str(e))
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    root = out / "checkpoints"
    fresh = Trainer(replace(config, resume=False, out_dir=str(out / "fresh")))
    state = load_checkpoint(list_checkpoints(root)[-1], fresh.models, fresh.optimizers)
    same = all(torch.equal(saved[n], p) for n, p in trainable_state(fresh.model).items())
    print(json.dumps({"errors": errors, "folders": sorted(p.name for p in root.iterdir()), "restored_position": state["position"],
                      "restored_equal": same, "unsaved_step": trainer.step}))
    """
)


@pytest.mark.slow
def test_checkpoint_write_fails_on_a_full_disk(tmp_path):
    pytest.importorskip("torch", reason="training needs torch")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", FULL_DISK_RUN, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    weights_error, optimizer_error = result["errors"]
    assert weights_error and "could not write checkpoint" in weights_error and "File too large" in weights_error
    assert optimizer_error and "could not write checkpoint" in optimizer_error
    assert result["folders"] == ["step-000001"]  # no partial step-2 folder, no temporary folder left
    assert result["restored_equal"] and result["restored_position"] == 2 and result["unsaved_step"] == 2
    for limit, error in zip(("100 kB", "600 kB"), result["errors"]):
        print(f"checkpoint write under a {limit} file size limit: CheckpointError: {error[:160]}")
    print(f"checkpoint folder afterwards: {result['folders']}; step 1 reloads bit for bit")

    # The run started again resumes from step 1: step 2's metrics line, logged before its save failed,
    # is dropped and logged again when step 2 is redone.
    from agents.train import TrainConfig
    from agents.train.checkpoint import list_checkpoints
    from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
    from agents.train.trainer import Trainer

    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    trainer = Trainer(TrainConfig(model="tiny", steps=2, questions_per_step=2, out_dir=str(out),
                                  env=EnvConfig(num_entities=300, num_questions=20, max_turns=2),
                                  rollout=RolloutConfig(group_size=2, max_turn_tokens=12, max_response_tokens=64),
                                  optim=OptimConfig(micro_batch=2, lr=1e-3)))
    assert trainer.step == 1 and [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1]
    trainer.run()
    trainer.close()
    assert [p.name for p in list_checkpoints(out / "checkpoints")] == ["step-000001", "step-000002"]
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    print("restarted: resumed from step 1, dropped the unsaved step's metrics line, finished step 2")
