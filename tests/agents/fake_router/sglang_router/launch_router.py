"""`python -m sglang_router.launch_router` as a slow real router behaves at start-up: `/health` answers at
once, and `GET /workers` lists the `--worker-urls` only after FAKE_ROUTER_REGISTER_AFTER_S seconds ("never":
not at all). It routes nothing; it is for the start-up checks of `SGLangRouter` and the trainer."""

from __future__ import annotations

import argparse
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--worker-urls", nargs="+", default=[])
    parser.add_argument("--policy", default="cache_aware")
    args, _ = parser.parse_known_args()
    after = os.environ.get("FAKE_ROUTER_REGISTER_AFTER_S", "0")
    register_at = float("inf") if after == "never" else time.monotonic() + float(after)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body: dict = {}
            elif self.path == "/workers":
                listed = args.worker_urls if time.monotonic() >= register_at else []
                body = {"workers": [{"id": f"w{i}", "url": u, "is_healthy": True} for i, u in enumerate(listed)]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a: object) -> None:
            pass

    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
