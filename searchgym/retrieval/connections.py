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
  closed at once, before it can hold anything.

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


def guarded_protocol(base: type[asyncio.Protocol], *, header_timeout_s: float, max_connections: int) -> type:
    """A subclass of uvicorn's HTTP protocol class `base` (h11 or httptools) with the bounds above."""
    timeout_answer = _plain(b"408 Request Timeout", b"request headers not complete within %g s" % header_timeout_s)
    # Retry-After: HTTPRetriever then waits and tries again within its budget instead of failing.
    busy_answer = _plain(b"503 Service Unavailable", b"too many open connections (%d); try again" % max_connections,
                         b"retry-after: 1\r\n")

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        _header_timer: asyncio.TimerHandle | None = None
        _partial = False
        _refused = False

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                logger.warning("refusing a connection: %d open, the limit is %d", len(self.connections), max_connections)
                self._refused = True
                transport.write(busy_answer)
                # Closing a socket whose request is still unread makes the kernel send a reset, which can
                # destroy the 503 before the client reads it: end our side, read and drop what comes, and
                # close shortly after.
                if transport.can_write_eof():
                    transport.write_eof()
                self.loop.call_later(1.0, transport.close)
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            before = self.cycle
            if self.cycle is None or self.cycle.response_complete:
                self._partial = True  # these bytes begin a new request
                self._arm()
            super().data_received(data)
            if self.cycle is not before:  # its headers are complete: the app and its body deadline take over
                self._partial = False
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or not (self.cycle is None or self.cycle.response_complete):
                return
            if self._partial:
                self.transport.write(timeout_answer)
            self.transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol
