"""`serve`'s /readyz covers what runs in its children: while the run worker's model server is down between restarts,
the service says it is not ready, and says so again once it serves."""

import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.support import Server, child_pids, process_gone, run_workers, wait_for

pytestmark = pytest.mark.slow


def model_servers(worker: int) -> list[int]:
    found = []
    for child in child_pids(worker):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"app.backends.embedded.server" in command and not process_gone(child):
            found.append(child)
    return found


def readiness(server: Server) -> httpx.Response:
    return httpx.get(f"{server.url}/readyz", timeout=10)


def test_readyz_is_503_while_the_model_server_restarts_and_200_once_it_serves(tmp_path):
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite"}).start()
    try:
        [worker] = wait_for(lambda: run_workers(server.process.pid) or None, timeout=120)
        wait_for(lambda: readiness(server).status_code == 200, timeout=120)
        # killed more often than it is restarted at once in a minute: its next start waits, and readiness says why
        unready = None
        for _ in range(6):
            [pid] = wait_for(lambda: model_servers(worker) or None, timeout=120)
            os.kill(pid, signal.SIGKILL)
            try:
                unready = wait_for(lambda: (a := readiness(server)).status_code == 503 and a, timeout=10, interval=0.05)
                break
            except AssertionError:
                continue  # back before it was seen down: kill it again (its restarts slow down)
        assert unready is not None, "readiness never said the model server was down"
        assert "embedded model server" in unready.json()["detail"], unready.text
        wait_for(lambda: readiness(server).status_code == 200, timeout=120)
        assert len(model_servers(worker)) == 1
    finally:
        server.stop()
