"""The retrieval server's plain-ASGI layer: `POST /retrieve` answered before FastAPI's routing, the
API-key check that guards every path, and reading a request body within its caps and deadline.

`searchgym.retrieval.server` builds the app (`create_app`) on top of these.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math

from fastapi import FastAPI
from fastapi.responses import Response

from searchgym.retrieval.batching import encode_json

logger = logging.getLogger(__name__)


class RequestRejected(Exception):
    """A request the server refuses; carries the HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def unreachable(request) -> Response:
    raise AssertionError("POST /retrieve is answered by RetrievalApp before routing")


_JSON = b"application/json"


class RetrievalApp(FastAPI):
    """FastAPI, with `POST /retrieve` answered in plain ASGI before FastAPI's middleware and routing.

    Those layers (error and exception middleware, the exit stack, route matching, `Request` and
    `Response` objects) cost more per request than a BM25 search, and the server runs them on one event
    loop for every client. `/retrieve` needs none of them: it reads, caps and validates its body itself,
    turns every failure into a JSON answer, and sends the two ASGI messages of the response directly.
    Anything it still raises gets the same plain 500 that Starlette's error middleware sends. Every other
    path (`/health`, `/docs`, a wrong method) takes the usual route.

    The API key, when there is one, is checked first, on the headers alone: the app is called as soon as
    a request's head is complete (whose size the protocol caps, `searchgym.retrieval.connections`), so a
    request without the key is answered 401 and its connection closed before any of its body is read.
    """

    retrieve_endpoint = None
    api_key: bytes | None = None

    async def __call__(self, scope, receive, send) -> None:
        if self.api_key is not None and scope["type"] in ("http", "websocket") and not _authorized(scope, self.api_key):
            await _send(send, 401, encode_json({"detail": "missing or wrong API key: send 'Authorization: Bearer <key>' "
                                                          "or 'X-API-Key: <key>'"}), _JSON,
                        [(b"www-authenticate", b"Bearer"), (b"connection", b"close")])
            return
        endpoint = self.retrieve_endpoint
        if endpoint is None or scope["type"] != "http" or scope["path"] != "/retrieve" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        media = _JSON
        try:
            answer = await endpoint(scope, receive)
        except Exception:  # answered as a 500, as the error middleware would
            logger.exception("/retrieve failed")
            answer, media = (500, b"Internal Server Error"), b"text/plain; charset=utf-8"
        if answer is None:  # the client disconnected before sending its whole request
            return
        status, data, *extra = answer
        headers = list(extra[0]) if extra else []
        if status in (408, 413):
            # The request's body was not read to its end: what follows on the connection is not a request.
            headers.append((b"connection", b"close"))
        await _send(send, status, data, media, headers)


async def _send(send, status: int, data: bytes, media: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", media), (b"content-length", b"%d" % len(data)), *headers],
    })
    await send({"type": "http.response.body", "body": data})


def _authorized(scope, key: bytes) -> bool:
    """Whether the request carries `key` (bearer token or X-API-Key), compared in constant time."""
    given = b""
    for name, value in scope["headers"]:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            given = value[7:].strip()
        elif name == b"x-api-key":
            given = value.strip()
    # compare_digest takes time independent of where the two differ, so the key cannot be guessed byte
    # by byte from response times.
    return hmac.compare_digest(given, key)


def retry_after_s(seconds: float) -> int:
    """`Retry-After` is in whole seconds; at least 1."""
    return max(1, math.ceil(seconds))


def retry_after(seconds: float) -> list[tuple[bytes, bytes]]:
    return [(b"retry-after", b"%d" % retry_after_s(seconds))]


async def read_body(scope, receive, limit: int, timeout_s: float = 30.0) -> bytes | None:
    """The request body, refused past `limit` bytes (declared or sent) or when it is not whole within
    `timeout_s` (408); None when the client disconnects."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise RequestRejected(413, f"request body of {value.decode()} bytes; this server accepts at most {limit}")
            break
    chunks, size = [], 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
        except asyncio.TimeoutError:
            raise RequestRejected(408, f"request body not complete within {timeout_s:g} s ({size} bytes arrived; is "
                                       "it shorter than its Content-Length?)") from None
        if message["type"] != "http.request":  # http.disconnect
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestRejected(413, f"request body over {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
