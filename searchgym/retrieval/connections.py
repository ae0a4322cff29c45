"""Bounds on what one client connection may hold: the retrieval server's guard against slow clients.

uvicorn closes a kept-alive connection that stays idle after a response (`timeout_keep_alive`), but
nothing else: a socket that connects and sends nothing, or sends its request headers a byte at a time,
is held for as long as the client likes, and so is every file descriptor and buffer that goes with it
(1,500 such sockets were held for 91 s, none closed). `guarded_protocol` wraps uvicorn's HTTP protocol
class so that:

- a connection must deliver complete request headers within `header_timeout_s` of opening (or, on a
  kept-alive connection, of the first byte of its next request); otherwise it is closed, with a
  `408 Request Timeout` when part of a request had arrived;
- at most `max_connections` are open at once; one more is answered `503` with `Retry-After: 1` and
  closed at once, before it can hold anything;
- a request's head is capped as its bytes arrive, before the HTTP parser sees them (`HeadMeter`): a
  request line over `max_request_line_bytes` is answered `414`, a head over `max_header_bytes` or with
  more than `max_header_fields` header lines `431`, and the connection is closed. httptools (what uvicorn
  picks when it is installed) has no such cap, so a client that never ends its headers was held, and
  buffered, for the whole header deadline: 16 loopback clients grew the server by 750 MiB in 12 s. With
  the cap a connection holds at most one head and one read buffer; an API-key check (`asgi`) then runs
  when the head is complete, before any of the body is read, so a client without the key costs no more.

The body deadline (`body_timeout_s`) is the app's (`searchgym.retrieval.asgi.read_body`): a body that
does not arrive in time, such as one shorter than its `Content-Length`, gets a 408.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger(__name__)


def _plain(status: bytes, detail: bytes, extra: bytes = b"") -> bytes:
    body = b'{"detail": "' + detail + b'"}'
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\n" + extra
            + b"content-length: %d\r\n\r\n" % len(body) + body)


class HeadMeter:
    """Counts one request head (the request line, then header lines, up to the empty line) as its bytes
    arrive in chunks of any size, and says when it goes past a cap. Lines may end in CRLF or LF; empty
    lines before the request line are skipped (RFC 9112 2.2) but counted."""

    def __init__(self, max_line: int, max_bytes: int, max_fields: int):
        self.max_line, self.max_bytes, self.max_fields = max_line, max_bytes, max_fields
        self.reset()

    def reset(self) -> None:
        """Start counting the next request's head."""
        self.done = False
        """Whether the head has ended (its empty line arrived)."""
        self.size = self.line = self.fields = 0
        self._blank = True  # the current line holds nothing but CRs so far
        self._request_line = True

    def feed(self, data: bytes) -> tuple[int, bytes] | None:
        """Count `data`, the head's next bytes (what follows its end is not counted): None while within the
        caps, else the HTTP status and the reason to answer with."""
        pos = 0
        while not self.done:
            nl = data.find(b"\n", pos)
            end = len(data) if nl < 0 else nl + 1
            self.size += end - pos
            self.line += end - pos
            stop = len(data) if nl < 0 else nl
            self._blank = self._blank and data.count(b"\r", pos, stop) == stop - pos
            refused = self._over()
            if refused or nl < 0:
                return refused
            if not self._blank:
                self._request_line, self.fields = False, self.fields + (not self._request_line)
            elif not self._request_line:
                self.done = True
            refused = self._over()
            if refused:
                return refused
            self.line, self._blank, pos = 0, True, end
        return None

    def _over(self) -> tuple[int, bytes] | None:
        if self._request_line and not self._blank and self.line > self.max_line:
            return 414, b"request line over %d bytes" % self.max_line
        if self.size > self.max_bytes:
            return 431, b"request head over %d bytes" % self.max_bytes
        if self.fields > self.max_fields:
            return 431, b"more than %d header lines" % self.max_fields
        return None


_STATUS = {414: b"414 URI Too Long", 431: b"431 Request Header Fields Too Large"}


class _Guard:
    """The bounds above, mixed into uvicorn's HTTP protocol class (the class attributes are set per server
    by `guarded_protocol`)."""

    header_timeout_s: float
    max_connections: int
    head_caps: tuple[int, int, int]
    """`HeadMeter`'s caps: request line bytes, head bytes, header lines."""
    timeout_answer: bytes
    busy_answer: bytes
    resets_on_complete: bool
    """httptools reports the end of each message (`on_message_complete`); h11 processes one request at a
    time, so there the next head begins with the first bytes after a complete response."""
    _header_timer: asyncio.TimerHandle | None = None
    _partial = False
    _refused = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._head = HeadMeter(*self.head_caps)
        if len(self.connections) > self.max_connections:
            logger.warning("refusing a connection: %d open, the limit is %d", len(self.connections), self.max_connections)
            self._refuse(self.busy_answer)
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        before = self.cycle
        if self.cycle is None or self.cycle.response_complete:
            self._partial = True  # these bytes begin a new request
            self._arm()
            if not self.resets_on_complete and self._head.done:
                self._head.reset()
        if not self._head.done and (refused := self._head.feed(data)):
            self._refuse_head(*refused)
            return
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not before:  # its headers are complete: the app and its body deadline take over
            self._partial = False
            self._disarm()

    def on_message_complete(self) -> None:
        self._head.reset()  # what follows on the connection is the next request's head
        super().on_message_complete()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _refuse_head(self, status: int, reason: bytes) -> None:
        logger.warning("refusing a request from %s: %s", self.client, reason.decode())
        self._disarm()
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head past the caps while an answer is on its way: no room for a second answer.
            self._refused = True
            self.transport.close()
            return
        self._refuse(_plain(_STATUS[status], reason + b"; send smaller request headers"))

    def _refuse(self, answer: bytes) -> None:
        self._refused = True
        self.transport.write(answer)
        # Closing a socket whose request is still unread makes the kernel send a reset, which can destroy
        # the answer before the client reads it: end our side, read and drop what comes, and close shortly
        # after.
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(1.0, self.transport.close)

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not (self.cycle is None or self.cycle.response_complete):
            return
        if self._partial:
            self.transport.write(self.timeout_answer)
        self.transport.close()


def guarded_protocol(base: type[asyncio.Protocol], *, header_timeout_s: float, max_connections: int,
                     max_request_line_bytes: int = 8192, max_header_bytes: int = 32768, max_header_fields: int = 100) -> type:
    """A subclass of uvicorn's HTTP protocol class `base` (h11 or httptools) with the bounds above."""
    settings = {
        "header_timeout_s": header_timeout_s,
        "max_connections": max_connections,
        "head_caps": (max_request_line_bytes, max_header_bytes, max_header_fields),
        "timeout_answer": _plain(b"408 Request Timeout", b"request headers not complete within %g s" % header_timeout_s),
        # Retry-After: HTTPRetriever then waits and tries again within its budget instead of failing.
        "busy_answer": _plain(b"503 Service Unavailable", b"too many open connections (%d); try again" % max_connections,
                              b"retry-after: 1\r\n"),
        "resets_on_complete": hasattr(base, "on_message_complete"),
    }
    return type(f"Guarded{base.__name__}", (_Guard, base), settings)
