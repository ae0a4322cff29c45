"""A small stand-in for an SGLang server on loopback, speaking the same JSON shapes.

In-process (`FakeSGLang(policy=...)`), `/generate` is answered by an `HFPolicy` (a tiny model), so the
client's ids, logprobs, stop handling and weight updates can be checked against real forward passes.
Every request is recorded; `fail_next` and `hang_s` inject errors and stalls.

As a process (`python -m tests.agents.fake_sglang --model-path scripted --host H --port P`), it answers
`/health` and a fixed `/generate`, for launcher and killed-server tests. It imports no torch, so it
starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeSGLang:
    def __init__(self, policy: Any = None, *, model_path: str = "fake-model", tokenizer_path: str | None = None):
        self.policy = policy
        self.model_path = model_path
        self.tokenizer_path = tokenizer_path
        self.calls: list[tuple[str, str, Any]] = []
        self.fail_next: list[int] = []
        """Status codes to answer the next requests with (one per request), before any real handling."""
        self.hang_s = 0.0
        """Seconds to sleep before answering /generate (to trigger client timeouts)."""
        self.paused = False
        self.abort_next = 0
        """How many coming /generate requests to answer with finish_reason abort (as a paused server does)."""
        self.chat_script: Any = None
        """For `/v1/chat/completions`: `chat_script(messages) -> (text, finish_reason, matched_stop)`."""
        self.weight_version = "0"
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeSGLang:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        return [p for _, p, _ in self.calls]

    # -- routes -----------------------------------------------------------------------------------------

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            self.calls.append((method, path, body))
            if self.fail_next:
                return self.fail_next.pop(0), {"error": "injected failure"}
        if path == "/health":
            return 200, ""
        if path in ("/model_info", "/get_model_info"):
            return 200, {"model_path": self.model_path, "tokenizer_path": self.tokenizer_path, "is_generation": True, "weight_version": self.weight_version}
        if path == "/generate":
            if self.hang_s:
                time.sleep(self.hang_s)
            return 200, self.generate(body)
        if path == "/flush_cache":
            return 200, "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"
        if path == "/pause_generation":
            self.paused = True
            return 200, {"message": "Generation paused successfully."}
        if path == "/continue_generation":
            self.paused = False
            return 200, {"message": "Generation continued successfully."}
        if path in ("/begin_weight_update", "/end_weight_update"):
            return 200, {"success": True, "message": ""}
        if path == "/update_weights_from_disk":
            if self.policy is None:
                return 400, {"success": False, "message": "no model"}
            try:
                self.policy.load_weights(body["model_path"])
            except Exception as e:  # noqa: BLE001 (the real server reports any load failure as success=false)
                return 400, {"success": False, "message": f"Failed to update weights: {e}"}
            self.weight_version = str(body.get("weight_version", self.weight_version))
            return 200, {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
        if path == "/v1/chat/completions" and self.chat_script is not None:
            choices = []
            for i in range(int(body.get("n", 1))):
                text, finish, matched = self.chat_script(body["messages"])
                choice = {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                if matched is not None:
                    choice["matched_stop"] = matched
                choices.append(choice)
            return 200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": body.get("model"), "choices": choices}
        return 404, {"detail": "Not Found"}

    def generate(self, body: dict[str, Any]) -> Any:
        sp = body.get("sampling_params", {})
        n = int(sp.get("n", 1))
        with self._lock:
            abort, self.abort_next = self.abort_next > 0, max(0, self.abort_next - 1)
        if abort:
            outs = [self._output([], [], "", {"type": "abort", "message": "paused"}) for _ in range(n)]
            return outs[0] if n == 1 else outs
        if self.policy is None:  # scripted: token ids 5, 6, 7
            outs = [self._output([5, 6, 7], [-0.5, -0.25, -0.125], "abc", {"type": "length", "length": 3}) for _ in range(n)]
            return outs[0] if n == 1 else outs
        from agents.policies.base import SamplingParams

        stop_ids = tuple(sp["stop_token_ids"]) if sp.get("ignore_eos") else None
        params = SamplingParams(
            n=n,
            temperature=float(sp.get("temperature", 1.0)),
            top_p=float(sp.get("top_p", 1.0)),
            top_k=max(0, int(sp.get("top_k", -1))),
            max_new_tokens=int(sp.get("max_new_tokens", 128)),
            stop=tuple(sp.get("stop") or ()),
            stop_token_ids=stop_ids,
            seed=sp.get("sampling_seed"),
        )
        completions = self.policy.generate([body["input_ids"]], params)[0]
        outs = []
        for c in completions:
            if c.finish_reason == "stop":
                reason = {"type": "stop", "matched": c.matched_stop}
            else:
                reason = {"type": "length", "length": len(c.token_ids)}
            text = c.text
            if isinstance(c.matched_stop, str) and not sp.get("no_stop_trim"):
                text = text[: text.find(c.matched_stop)]
            outs.append(self._output(c.token_ids, c.logprobs, text, reason))
        return outs[0] if n == 1 else outs

    def _output(self, ids: list[int], logprobs: list[float], text: str, reason: dict) -> dict[str, Any]:
        return {
            "text": text,
            "output_ids": list(ids),
            "meta_info": {
                "id": "fake",
                "finish_reason": reason,
                "prompt_tokens": 0,
                "completion_tokens": len(ids),
                "weight_version": self.weight_version,
                "output_token_logprobs": [[lp, t, None] for lp, t in zip(logprobs, ids)],
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, answer = fake.route(method, self.path, body)
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int, default=None, help="exit at once with this code (a failed start)")
    parser.add_argument("--generate-delay", type=float, default=0.0, help="seconds each /generate takes (to kill one in flight)")
    args = parser.parse_args()
    if args.exit_code is not None:
        print("fake server: failing on purpose", flush=True)
        raise SystemExit(args.exit_code)
    time.sleep(args.startup_delay)
    fake = FakeSGLang(model_path=args.model_path)
    fake.hang_s = args.generate_delay
    fake.server.server_close()
    fake.server = ThreadingHTTPServer((args.host, args.port), fake._handler())
    print(f"fake server listening on {args.host}:{args.port}", flush=True)
    fake.server.serve_forever()


if __name__ == "__main__":
    main()
