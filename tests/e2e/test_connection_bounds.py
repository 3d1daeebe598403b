"""What one unauthenticated connection may cost `codreamer serve`: bounded request heads and bodies, no idle,
half-sent or dripping connection kept, a cap on connections that slow ones cannot fill, and a log that strangers
cannot flood (issue 37, findings 2 and 5)."""

import socket
import time

import httpx
import pytest

from tests.support import Server

pytestmark = pytest.mark.slow
HEAD_TIMEOUT_S = 1.0
MAX_CONNECTIONS = 80
LOG_REPEATS = 5
DRIPPED_BODY = b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: %s\r\nContent-Length: 1000000\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bounds")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "RUN_WORKER": "false",
                              "HEADER_TIMEOUT_S": str(HEAD_TIMEOUT_S), "MAX_HEADER_BYTES": "32768", "API_KEYS": "bounds-key",
                              # a body gets 1 s whatever its pace; the cap is low enough for a test to reach
                              "BODY_TIMEOUT_S": "1", "MIN_BODY_RATE": "0", "MAX_CONNECTIONS": str(MAX_CONNECTIONS),
                              "LOG_REPEATS": str(LOG_REPEATS)}).start()
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


def drip_until_closed(sock: socket.socket, head: bytes, bound_s: float = 60) -> bytes:
    """Sends `head`, then the body a byte at a time, until the server closes the connection; what it answered.
    Fails only if the connection is still open after `bound_s`, far past any deadline the server was given."""
    sock.sendall(head)
    sock.settimeout(0.2)
    answer, give_up = b"", time.monotonic() + bound_s
    while time.monotonic() < give_up:
        try:
            sock.sendall(b"x")
        except OSError:  # closed for good: what was answered is read below
            pass
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return answer
        if not chunk:
            return answer
        answer += chunk
    raise AssertionError(f"still open after {bound_s} s of dripping; answered so far: {answer[:300]!r}")


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


FORM_PART = b'--b\r\nContent-Disposition: form-data; name="email"\r\n\r\n'


@pytest.mark.parametrize("path, content_type, start", [
    ("/outcomes/hooks/no-such-source", "application/json", b""),  # read by the JSON checks before any route
    ("/outcomes/hooks/no-such-source", "text/plain", b""),  # read by the route itself
    ("/outcomes/hooks/no-such-source/inbound", "multipart/form-data; boundary=b", FORM_PART),  # read as a form
])
def test_a_dripping_body_is_answered_408_and_closed(server, path, content_type, start):
    with connect(server) as sock:
        answer = drip_until_closed(sock, DRIPPED_BODY % (path.encode(), content_type.encode()) + start)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert b"connection: close" in answer and b"did not arrive within 1 s" in answer


@pytest.mark.parametrize("method, path, status", [("GET", "/healthz", b"200"), ("POST", "/learn-loop", b"401")])
def test_an_answer_before_the_body_ends_the_connection(server, method, path, status):
    """The app answered without the body (a public probe, a missing key): the rest of the body is not waited for."""
    with connect(server) as sock:
        answer = drip_until_closed(sock, f"{method} {path} HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:300]
    assert b"connection: close" in answer


def test_slow_connections_cannot_take_every_slot(server):
    """As many dripping bodies as the cap allows, then more: the oldest slow ones make room, and a probe is served."""
    slow = []
    try:
        for _ in range(MAX_CONNECTIONS + 20):
            sock = connect(server)
            sock.sendall(DRIPPED_BODY % (b"/outcomes/hooks/no-such-source", b"text/plain") + b"x")
            slow.append(sock)
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        answers = []
        for sock in slow:
            sock.settimeout(30)
            answers.append(read_all(sock))  # each is closed: for a newer connection, or at its body's deadline
        assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), {a[:120] for a in answers}
        assert b"closed for a newer connection" in answers[0]  # the oldest made room first
    finally:
        for sock in slow:
            sock.close()


def test_clients_leaving_mid_body_leave_no_traceback_and_repeats_are_counted(server):
    """Anyone can post to a hook URL: 300 requests cut off mid-body and 100 malformed ones leave a few lines."""
    before = server.log.stat().st_size
    for n in range(300):
        path, content_type = [("/outcomes/hooks/no-such-source", b"text/plain"), ("/outcomes/hooks/no-such-source", b"application/json"),
                              ("/outcomes/hooks/no-such-source/inbound", b"multipart/form-data; boundary=b")][n % 3]
        with connect(server) as sock:
            sock.sendall(DRIPPED_BODY % (path.encode(), content_type) + FORM_PART + b"part")
    for _ in range(100):  # a chunk size that is not hexadecimal: uvicorn answers 400 and logs a warning each time
        with connect(server) as sock:
            sock.sendall(b"POST /outcomes/hooks/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 400 ")
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200  # served after all of them
    log = server.log.read_bytes()[before:].decode(errors="replace")
    assert "Traceback" not in log and "ClientDisconnect" not in log, log[:3000]
    assert log.count("Invalid HTTP request received.") == LOG_REPEATS, log[:3000]
    assert len(log) < 2000, log[:3000]
