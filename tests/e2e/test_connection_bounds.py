"""What one unauthenticated connection may cost `codreamer serve`: bounded request heads, no idle or half-sent connection kept."""

import socket

import httpx
import pytest

from tests.support import Server

pytestmark = pytest.mark.slow
HEAD_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bounds")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "RUN_WORKER": "false",
                              "HEADER_TIMEOUT_S": str(HEAD_TIMEOUT_S), "MAX_HEADER_BYTES": "32768"}).start()
    yield server
    server.stop()


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.settimeout(30)  # far past the head timeout: a connection still open then was kept
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_head_over_the_limit_is_refused_with_431_before_it_is_all_read(server):
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: ")
        try:
            for _ in range(3000):  # up to 300 MB, unless the server stops listening first
                sock.sendall(b"a" * 100_000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"request headers exceed 32768 bytes" in answer
    within = httpx.get(f"{server.url}/healthz", headers={"X-Pad": "a" * 20_000}, timeout=10)
    assert within.status_code == 200  # a large head under the limit is served


def test_idle_and_half_sent_connections_are_closed(server):
    idle = [connect(server) for _ in range(10)]
    half_sent = [connect(server) for _ in range(40)]
    for sock in half_sent:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Slow: ")
    try:
        for sock in idle + half_sent:
            assert read_all(sock) == b""  # closed by the server, not by our 30 s timeout (that would raise)
    finally:
        for sock in idle + half_sent:
            sock.close()
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_a_kept_alive_connection_serves_several_requests(server):
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert [client.get("/healthz").status_code for _ in range(3)] == [200, 200, 200]
