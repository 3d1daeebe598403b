"""The HTTP connection as uvicorn's httptools protocol serves it, with the bounds a proxy would add.

httptools accepts request headers of any size and waits forever for a request that never
completes, so one unauthenticated connection could hold memory and a slot without limit. Here a
request head (request line and headers) may be at most `max_header_bytes`, answered 431 above it,
and must arrive within `header_timeout_s` of the connection opening or of the previous response;
an idle or half-sent connection is closed then. Each response leaves in one write (`OneSendPerResponse`).
"""

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                  b"connection: close\r\ncontent-length: %d\r\n\r\n%s")


class OneSendPerResponse:
    """A connection's transport that holds a write back until the next write or the end of the event loop's step.

    uvicorn writes a response's head and its body separately: two send() calls, two segments and two wake-ups of the
    client. Held, the head leaves with the body in one. At most one write is held, so a streamed body is never
    gathered in memory; closing sends what is held first."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop, self._held = transport, loop, b""

    def write(self, data: bytes) -> None:
        if self._held:
            data, self._held = self._held + data, b""
            self._transport.write(data)
        elif data:
            self._held = bytes(data)
            self._loop.call_soon(self._send_held)

    def _send_held(self) -> None:
        held, self._held = self._held, b""
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._send_held()
        self._transport.close()

    def abort(self) -> None:
        self._held = b""
        self._transport.abort()

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


def bounded_protocol(max_header_bytes: int, header_timeout_s: float) -> type[asyncio.Protocol]:
    """A uvicorn `http` protocol class with these bounds, which sends each response in one write."""

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = OneSendPerResponse(transport, self.loop)  # type: ignore[assignment]
            self._head_bytes, self._awaiting_head, self._head_deadline, self._tail = 0, True, None, b""
            self._arm_head_deadline()

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

        def data_received(self, data: bytes) -> None:
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

        def on_headers_complete(self) -> None:
            self._awaiting_head, self._head_bytes, self._tail = False, 0, b""
            self._disarm_head_deadline()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            # what the parser reads next is the next request's head (a body the app answered early, with a
            # 413 say, is read to its end first); the keep-alive timeout covers the wait for it
            self._awaiting_head = True
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_deadline()
            super().connection_lost(exc)

    return BoundedHttpToolsProtocol
