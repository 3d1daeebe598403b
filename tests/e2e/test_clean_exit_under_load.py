"""Clean exits while other work keeps every core busy: no traceback, exit codes as documented.

Two paths that once printed a traceback only under load: `codreamer run` refusing an unknown
scenario (a pooled connection cut off mid-rollback at shutdown), and Ctrl-C to `codreamer serve`
with a run in flight (a workflow still touching DBOS after it was destroyed). Each is repeated
REPEAT times (CODREAMER_REPEAT, 1 by default; docs/guide/developing.md gives the 30× command)
while a process per core spins, started and stopped by the `busy_cores` fixture.
"""

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import Server, wait_for

REPO = Path(__file__).resolve().parents[2]
REPEAT = int(os.environ.get("CODREAMER_REPEAT", "1"))
TRACEBACKS = ("Traceback", "unhandled exception", "Exception in", "Exception during", "Event loop is closed")

# serial: its spinners would slow whatever ran beside it in the other worker
pytestmark = [pytest.mark.slow, pytest.mark.serial]


@pytest.fixture(scope="module")
def busy_cores():
    """One spinning process per core for the whole module, killed at its end."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield len(spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert all(spinner.returncode == -signal.SIGKILL for spinner in spinners)  # they were busy all along


def no_traceback(text: str) -> None:
    found = [marker for marker in TRACEBACKS if marker in text]
    assert not found, f"{found} in:\n{text[-4000:]}"


@pytest.mark.parametrize("attempt", range(REPEAT))
def test_unknown_scenario_exits_2_without_a_traceback_under_load(busy_cores, tmp_path, attempt):
    result = subprocess.run(
        [sys.executable, "-m", "app", "run", "--iterations", "1", "--scenario", "nope"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1", "COLUMNS": "200"},
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "unknown scenario ids" in result.stderr and "nope" in result.stderr
    no_traceback(result.stdout + result.stderr)
    assert list(tmp_path.iterdir()) == []


def run_state(database: Path, run_id: str) -> tuple[str, str | None]:
    """The run's status and its DBOS workflow's, read from the files the server left."""
    with sqlite3.connect(database) as db:
        status, attempt = db.execute("SELECT status, attempt FROM runs WHERE id = ?", (run_id,)).fetchone()
    workflow_id = run_id if attempt == 1 else f"{run_id}.{attempt}"
    with sqlite3.connect(database.with_name(database.stem + "-dbos" + database.suffix)) as db:
        row = db.execute("SELECT status FROM workflow_status WHERE workflow_uuid = ?", (workflow_id,)).fetchone()
    return status, row and row[0]


@pytest.mark.parametrize("attempt", range(REPEAT))
def test_ctrl_c_with_a_run_in_flight_exits_0_without_a_traceback_under_load(busy_cores, tmp_path, attempt):
    database = tmp_path / "data" / "codreamer.sqlite"
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{database}", "EXECUTOR_ID": "sigint", "PYTHONUNBUFFERED": "1",
                               "PYTHONPATH": str(REPO), "SHUTDOWN_DRAIN_S": "1"})
    server.start(timeout=300)
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": 20, "rollouts_per_group": 2,
                                                      "scenario_ids": ["scn-healthcare-cto"]}).json()["run_id"]
            # Running: its workflow is in its first steps (the preflight starts the model server), which Ctrl-C must
            # interrupt as cleanly as any. Waiting for an iteration as well took over 2 minutes on the busy cores.
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] == "running", timeout=300)
        server.process.send_signal(signal.SIGINT)  # Ctrl-C, mid-run: 20 iterations do not fit in the 1 s drain
        code = server.process.wait(timeout=120)
    finally:
        server.stop()
    log = server.log.read_text(errors="replace")
    assert code == 0, log[-4000:]
    no_traceback(log)
    assert "Finished server process" in log, log[-4000:]
    assert "1 run(s) interrupted by shutdown" in log, log[-4000:]
    # intact: left running under this EXECUTOR_ID, its workflow PENDING, for recovery by the next start
    assert run_state(database, run_id) == ("running", "PENDING")
