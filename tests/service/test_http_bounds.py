"""`codreamer serve`'s HTTP protocol (app/kit/serving.py) under uvicorn on a loopback port, with an app whose requests
wait for the test: the connection cap's 503 when every connection is busy, and a body deadline that does not blame
the client for the time the app took to read (tests/e2e/test_connection_bounds.py has the served app's bounds)."""

import asyncio
from contextlib import asynccontextmanager

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.kit.serving import bounded_protocol
from tests.support import free_port


@asynccontextmanager
async def serving(app, **bounds):
    port = free_port()
    protocol = bounded_protocol(max_header_bytes=8192, header_timeout_s=5.0, **bounds)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, http=protocol, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        await task


async def read_to_close(port: int, request: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), 30)  # far past anything the server waits for
    finally:
        writer.close()


async def test_above_the_cap_with_every_connection_busy_a_new_one_is_answered_503():
    release, arrived = asyncio.Event(), []

    async def busy(request: Request) -> JSONResponse:
        arrived.append(1)
        await release.wait()
        return JSONResponse({"done": True})

    app = Starlette(routes=[Route("/busy", busy)])
    async with serving(app, body_timeout_s=5.0, max_connections=3) as (url, port):
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            requests = [asyncio.create_task(client.get("/busy")) for _ in range(3)]
            while len(arrived) < 3:  # each connection has sent its request whole: none is slow, none makes room
                await asyncio.sleep(0.01)
            refused = await read_to_close(port)
            assert refused.startswith(b"HTTP/1.1 503 ") and b"too many connections" in refused, refused
            release.set()
            assert [(await request).status_code for request in requests] == [200, 200, 200]
        assert (await read_to_close(port, b"GET /busy HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")).startswith(b"HTTP/1.1 200 ")


async def test_a_body_the_app_is_slow_to_read_is_not_cut_off():
    """The client sent its body at once; the app took its time before reading it, so uvicorn stopped reading from the
    socket: the time that took is not the client's, and the deadline does not end the request."""
    app_waited = asyncio.Event()

    async def upload(request: Request) -> JSONResponse:
        await asyncio.sleep(2.0)  # four times the body deadline below
        app_waited.set()
        return JSONResponse({"received": len(await request.body())})

    app = Starlette(routes=[Route("/upload", upload, methods=["POST"])])
    async with serving(app, body_timeout_s=0.5, max_connections=10) as (url, _):
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            answer = await client.post("/upload", content=b"x" * 4_000_000)
    assert app_waited.is_set() and answer.status_code == 200 and answer.json() == {"received": 4_000_000}


async def test_a_body_that_stops_arriving_is_answered_408_while_the_app_waits_for_it():
    got: list[type] = []

    async def upload(request: Request) -> JSONResponse:
        try:
            await request.body()
        except Exception as exc:  # noqa: BLE001 - what the app learns is the test's subject
            got.append(type(exc))
            raise
        return JSONResponse({})

    app = Starlette(routes=[Route("/upload", upload, methods=["POST"])])
    async with serving(app, body_timeout_s=0.5, max_connections=10) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
        answer = b""
        while chunk := await asyncio.wait_for(reader.read(65536), 30):  # until the server closes
            answer += chunk
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b"connection: close" in answer, answer
    assert got == [ClientDisconnect]  # the app was told the client left, and its own answer went nowhere

