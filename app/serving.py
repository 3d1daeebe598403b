"""The HTTP connection as uvicorn's httptools protocol serves it, with the bounds a proxy would add.

httptools accepts request headers of any size and waits forever for a request that never
completes, so one unauthenticated connection could hold memory and a slot without limit. Here a
request head (request line and headers) may be at most `max_header_bytes`, answered 431 above it,
and must arrive within `header_timeout_s` of the connection opening or of the previous response;
an idle or half-sent connection is closed then.
"""

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                  b"connection: close\r\ncontent-length: %d\r\n\r\n%s")


def bounded_protocol(max_header_bytes: int, header_timeout_s: float) -> type[asyncio.Protocol]:
    """A uvicorn `http` protocol class with these bounds."""

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_bytes, self._awaiting_head, self._head_deadline = 0, True, None
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
            if self._awaiting_head:
                self._head_bytes += len(data)
                if self._head_bytes > max_header_bytes:
                    detail = b'{"detail":"request headers exceed %d bytes"}' % max_header_bytes
                    self.transport.write(HEAD_TOO_LARGE % (len(detail), detail))
                    self.transport.close()
                    self._disarm_head_deadline()
                    return
                self._arm_head_deadline()
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self._awaiting_head, self._head_bytes = False, 0
            self._disarm_head_deadline()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            self._awaiting_head = True  # the next request's head; the keep-alive timeout covers the wait for it
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_deadline()
            super().connection_lost(exc)

    return BoundedHttpToolsProtocol
