"""The embedded database's disk fills up mid-run: readiness says so, nothing recorded is lost, and the run
does not hang `running` once space is back (it finishes, or ends failed and resumable)."""

import errno
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from app.knowledge_graph.service import demo_document
from tests.support import Server, wait_for, wait_for_status

pytestmark = pytest.mark.slow
SCENARIO = demo_document().scenarios[0].id


@pytest.fixture
def small_disk(tmp_path):
    """A 40 MiB tmpfs of its own, so that filling it fills nothing else."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Writes until the disk refuses (ENOSPC)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    chunk = b"\0" * (1 << 20)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def readiness(server: Server) -> httpx.Response:
    return httpx.get(f"{server.url}/readyz", timeout=10)


def test_a_full_disk_is_not_ready_and_the_run_ends_once_space_is_back(tmp_path, small_disk):
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{small_disk}/codreamer.sqlite", "EXECUTOR_ID": "full-disk",
                               "WORKER_HEARTBEAT_S": "1", "WORKER_TIMEOUT_S": "5"}).start(timeout=180)
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": 30, "rollouts_per_group": 2,
                                                      "scenario_ids": [SCENARIO]}).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] >= 1, timeout=240)
            filler = fill(small_disk)
            answer = readiness(server)
            assert answer.status_code == 503, answer.text
            assert "disk holding the database" in answer.json()["detail"] and "full" in answer.json()["detail"]
            # Reads go on: the run as far as it got is there to see while the disk is full.
            assert client.get(f"/runs/{run_id}").status_code == 200
            recorded = client.get(f"/runs/{run_id}").json()["iterations_completed"]
            wait_for(lambda: "disk" in server.log.read_text(errors="replace").lower(), timeout=120)
            filler.unlink()
            wait_for(lambda: readiness(server).status_code == 200, timeout=30)
            run = wait_for_status(client, run_id, timeout=300)
            assert run["status"] in ("succeeded", "failed"), run
            if run["status"] == "failed":  # resumable, and a resumed run goes on from its last recorded iteration
                assert "Resume it" in run["error"]["message"], run
                assert client.post(f"/runs/{run_id}/resume").status_code == 202
                wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] > run["iterations_completed"],
                         timeout=240)
            iterations = [item["iteration"] for item in client.get(f"/runs/{run_id}/iterations").json()["data"]]
            assert iterations == list(range(len(iterations))) and len(iterations) >= recorded + 1  # the baseline is 0
    finally:
        server.stop()
