"""The HTTP connection as uvicorn's httptools protocol serves it, with the bounds a proxy would add.

httptools accepts request headers of any size and waits forever for a request that never
completes, so one unauthenticated connection could hold memory and a slot without limit. Here:

- a request head (request line and headers) may be at most `max_header_bytes`, answered 431 above
  it, and must arrive within `header_timeout_s` of the connection opening or of the previous
  response; an idle or half-sent connection is closed then;
- a request body must arrive within `body_timeout_s` of its head, plus one second for every
  `min_body_rate` bytes received (a client sending at least that fast is never cut off); a slower
  one is answered 408 and closed, whatever the app is doing with it;
- an answer sent before the body has all arrived (a 401, a 413, /healthz) ends the connection: it
  says `connection: close`, and the rest of the body is discarded for at most `linger_s` (so the
  client can read the answer before the socket closes) instead of being read to its end;
- at most `max_connections` are open: above it, a new connection closes the oldest one that is
  still sending its request (or idle between requests), or, when every one is busy with a request
  it has sent whole, is answered 503 and closed. uvicorn's own `limit_concurrency` is no help here:
  it answers 503 to each new *request* while that many connections are open, so slow connections
  that never finish a request keep every file descriptor and turn every other client away.

Each response leaves in one write (`OneSendPerResponse`).
"""

import asyncio
import logging
import resource
from collections import OrderedDict
from collections.abc import Callable

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.kit.settings import Settings

HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                  b"connection: close\r\ncontent-length: %d\r\n\r\n%s")
CLOSING_ANSWER = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
RESERVED_FILES = 128  # file descriptors the default connection cap leaves the process (database, logs, its worker)
log = logging.getLogger("uvicorn.error")


def closing_answer(status: bytes, detail: str) -> bytes:
    body = b'{"detail":"%s"}' % detail.encode()
    return CLOSING_ANSWER % (status, len(body), body)


def default_max_connections() -> int:
    """The process's open-file limit less what it needs besides connections, so that a flood of connections meets
    the cap before accept() fails for lack of descriptors (which would also fail the database and the worker)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(32, soft - RESERVED_FILES) if soft != resource.RLIM_INFINITY else 65_536


class OneSendPerResponse:
    """A connection's transport that holds a write back until the next write or the end of the event loop's step.

    uvicorn writes a response's head and its body separately: two send() calls, two segments and two wake-ups of the
    client. Held, the head leaves with the body in one. At most one write is held, so a streamed body is never
    gathered in memory; closing sends what is held first.

    Closing while the client is still sending (`unread()`) lingers: what is held and buffered is sent and the
    sending side shut down, and the socket closes when the client has sent everything or after `linger_s`. Closing
    a socket with unread data in it resets the connection, and the client may lose the answer it was sent."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 unread: Callable[[], bool] = lambda: False, linger_s: float = 0.0) -> None:
        self._transport, self._loop, self._held = transport, loop, b""
        self._unread, self._linger_s, self.lingering = unread, linger_s, False

    def write(self, data: bytes) -> None:
        if self.lingering:  # closed from the app's side: what it still sends (after a 400 uvicorn sent) goes nowhere
            return
        if self._held:
            data, self._held = self._held + data, b""
            self._transport.write(data)
        elif data:
            self._held = bytes(data)
            self._loop.call_soon(self._send_held)

    def _send_held(self) -> None:
        held, self._held = self._held, b""
        if held and not self._transport.is_closing() and not self.lingering:
            self._transport.write(held)

    def close(self) -> None:
        if self.lingering:
            return
        self._send_held()
        if self._linger_s > 0 and self._unread() and self._transport.can_write_eof() and not self._transport.is_closing():
            self.lingering = True
            self._transport.write_eof()
            self._loop.call_later(self._linger_s, self._transport.close)
        else:
            self._transport.close()

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def abort(self) -> None:
        self._held = b""
        self._transport.abort()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


def bounded_protocol(max_header_bytes: int, header_timeout_s: float, *, body_timeout_s: float | None = None,
                     min_body_rate: int = 0, max_connections: int | None = None,
                     linger_s: float = 2.0) -> type[asyncio.Protocol]:
    """A uvicorn `http` protocol class with these bounds, which sends each response in one write.

    Without `body_timeout_s` a body may take forever, and without `max_connections` any number may be open: the
    served app passes both (`http_protocol`)."""
    live: OrderedDict[asyncio.Protocol, None] = OrderedDict()  # this server's connections, oldest first

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = OneSendPerResponse(transport, self.loop, lambda: self._body_pending, linger_s)  # type: ignore[assignment]
            self._head_bytes, self._awaiting_head, self._head_deadline, self._tail = 0, True, None, b""
            self._body_pending, self._body_timer, self._body_since, self._body_bytes = False, None, 0.0, 0
            if max_connections is not None and len(live) >= max_connections and not self._make_room():
                log.warning("%d connections are open (MAX_CONNECTIONS), each with a request in progress: "
                            "a new connection was answered 503", len(live))
                self.transport.write(closing_answer(b"503 Service Unavailable", "too many connections; retry shortly"))
                self.transport.close()
                return
            live[self] = None
            self._arm_head_deadline()

        @staticmethod
        def _make_room() -> bool:
            """Closes the oldest connection that is still sending its request or is idle between requests."""
            for connection in live:
                if connection.transport.is_closing() or not connection._busy():
                    live.pop(connection)
                    if connection.transport.is_closing():
                        connection.transport.abort()
                    else:
                        connection._give_up(b"408 Request Timeout", "closed for a newer connection: too many are open")
                    return True
            return False

        def _busy(self) -> bool:
            """Whether the app is working on a request the client has sent whole (an SSE stream, say)."""
            return self.cycle is not None and not self.cycle.response_complete and not self._body_pending

        def _give_up(self, status: bytes, detail: str) -> None:
            """Ends the connection; a request still arriving is answered `status`, and its app told the client left."""
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                if self._body_pending and not cycle.response_started:
                    self.transport.write(closing_answer(status, detail))
                cycle.disconnected = True  # the app's receive() now returns http.disconnect and its answer is dropped
                cycle.message_event.set()
            self.transport.close()

        def _arm_head_deadline(self) -> None:
            if self._head_deadline is None:
                self._head_deadline = self.loop.call_later(header_timeout_s, self._head_overdue)

        def _disarm_head_deadline(self) -> None:
            if self._head_deadline is not None:
                self._head_deadline.cancel()
                self._head_deadline = None

        def _head_overdue(self) -> None:
            self._head_deadline = None
            if self._awaiting_head and not self.transport.is_closing():
                self.transport.close()

        def _body_deadline(self) -> float:
            return self._body_since + body_timeout_s + (self._body_bytes / min_body_rate if min_body_rate else 0.0)

        def _body_overdue(self) -> None:
            self._body_timer = None
            if not self._body_pending or self.transport.is_closing():
                return
            deadline = self._body_deadline()
            waiting_for_us = self.flow.read_paused or (self.cycle is not None and self.cycle.waiting_for_100_continue)
            if waiting_for_us:  # the app has not taken what arrived (or asked for the body it expects): not the client's time
                deadline = max(deadline, self.loop.time() + 1.0)
            if self.loop.time() < deadline:
                self._body_timer = self.loop.call_at(deadline, self._body_overdue)
                return
            self._give_up(b"408 Request Timeout", f"the request body did not arrive within {body_timeout_s:g} s")

        def _disarm_body_deadline(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def data_received(self, data: bytes) -> None:
            if self.transport.is_closing():  # lingering after an early answer, or given up: discarded
                return
            if self._awaiting_head:  # count up to the blank line that ends the head: the body is not head
                window = self._tail + data
                end = window.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
                self._tail = window[-3:]
                if self._head_bytes > max_header_bytes:
                    detail = b'{"detail":"request headers exceed %d bytes"}' % max_header_bytes
                    self.transport.write(HEAD_TOO_LARGE % (len(detail), detail))
                    self.transport.close()
                    self._disarm_head_deadline()
                    return
                self._arm_head_deadline()
            super().data_received(data)
            if self._body_pending and self._body_timer is None and body_timeout_s is not None and not self.transport.is_closing():
                self._body_timer = self.loop.call_at(self._body_deadline(), self._body_overdue)

        def on_headers_complete(self) -> None:
            self._awaiting_head, self._head_bytes, self._tail = False, 0, b""
            self._disarm_head_deadline()
            self._body_pending, self._body_since, self._body_bytes = True, self.loop.time(), 0
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and cycle.scope is self.scope:
                send = cycle.send

                async def send_closing_early(message) -> None:
                    # an answer before the whole body arrived (a 401, a 413): the connection ends with it
                    if message["type"] == "http.response.start" and cycle.more_body:
                        cycle.keep_alive = False
                    await send(message)

                cycle.send = send_closing_early  # type: ignore[method-assign]

        def on_body(self, body: bytes) -> None:
            self._body_bytes += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            # what the parser reads next is the next request's head; the keep-alive timeout covers the wait for it
            self._awaiting_head, self._body_pending = True, False
            self._disarm_body_deadline()
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            live.pop(self, None)
            self._disarm_head_deadline()
            self._disarm_body_deadline()
            super().connection_lost(exc)

    return BoundedHttpToolsProtocol


def http_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """The protocol `codreamer serve` answers with, bounded as `settings` say."""
    return bounded_protocol(
        settings.max_header_bytes, settings.header_timeout_s, body_timeout_s=settings.body_timeout_s,
        min_body_rate=settings.min_body_rate, max_connections=settings.max_connections or default_max_connections(),
        linger_s=settings.close_linger_s)
