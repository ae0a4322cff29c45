"""Helpers the tests share."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def hotpot_record(i: int, distractors: int = 0) -> dict:
    """A HotpotQA-format bridge question (official JSON layout) whose two gold paragraphs, "City i" and
    "River i", hold its answer "River i"; `distractors` more paragraphs ("Town i", ...) share its number."""
    context = [[f"City {i}", [f"City {i} lies on River {i}."]], [f"River {i}", [f"River {i} is long."]]]
    context += [[f"Town {i}" + (f" {d}" if d else ""), [f"Town {i} has a mill."]] for d in range(distractors)]
    return {"_id": f"h{i}", "question": f"Which river flows through city {i}?", "answer": f"River {i}", "type": "bridge",
            "level": "easy", "supporting_facts": [[f"City {i}", 0], [f"River {i}", 0]], "context": context}


def shared_file(relative: str) -> Path:
    """A file under ../shared/data, or skip the test when the samples are absent (a user's checkout)."""
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.skip(
            f"real data sample {relative} not found at {SHARED_DATA} (only present in the development workspace; "
            "the same layouts are tested on small files the tests write)"
        )
    return path


class LoopbackServer:
    """A real HTTP server on a free loopback port, served from a daemon thread, for client tests. Handlers that
    hang should wait on `release`, which `close()` sets so that shutdown does not wait for them."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], path: str = ""):
        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def send_reply(handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
    """Answer a request: `payload` as it is when bytes, else as JSON, with a content length and `headers`."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    handler.send_response(status)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
