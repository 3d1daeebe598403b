"""Each response leaves `codreamer serve`'s HTTP protocol in one write: head and body together, streams whole."""

import asyncio

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from app.kit.serving import bounded_protocol
from tests.support import free_port

WRITES: list[bytes] = []  # what the protocol handed the real transport, write by write


class RecordingProtocol(bounded_protocol(max_header_bytes=8192, header_timeout_s=5.0)):
    """The served protocol, whose real transport records each write it sends."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        send = transport.write
        transport.write = lambda data: (WRITES.append(bytes(data)), send(data))[1]  # type: ignore[method-assign]
        super().connection_made(transport)


async def chunks():
    for n in range(3):
        yield b"chunk %d\n" % n
        await asyncio.sleep(0.01)


APP = Starlette(routes=[
    Route("/json", lambda _request: JSONResponse({"answer": 42})),
    Route("/stream", lambda _request: StreamingResponse(chunks(), media_type="text/plain")),
])


async def test_a_response_is_one_write_and_streams_and_closes_arrive_whole():
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(APP, host="127.0.0.1", port=port, http=RecordingProtocol, log_level="warning",
                                           lifespan="off"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(3):  # kept alive: each response its own write
                WRITES.clear()
                answer = await client.get("/json")
                assert answer.json() == {"answer": 42}
                assert len(WRITES) == 1 and WRITES[0].startswith(b"HTTP/1.1 200 OK") and WRITES[0].endswith(b'{"answer":42}')

            WRITES.clear()
            streamed = await client.get("/stream")
            assert streamed.text == "chunk 0\nchunk 1\nchunk 2\n"
            assert WRITES[0].startswith(b"HTTP/1.1 200 OK") and b"chunk 0" in WRITES[0]  # the head with the first chunk

            WRITES.clear()
            closing = await client.get("/json", headers={"Connection": "close"})
            assert closing.json() == {"answer": 42} and len(WRITES) == 1  # sent before the connection closed
    finally:
        server.should_exit = True
        await serving
