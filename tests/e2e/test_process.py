"""The `codreamer` process as an operator meets it: start-up failures are one line, stops are clean.

Real subprocesses: a taken port, an unreachable database, production without API keys, SIGTERM to an idle server and to one
with a run in flight (restarted with the same EXECUTOR_ID, the run resumes and finishes), and a
cancel, which the server logs as one line.
"""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from app.knowledge_graph.service import demo_document
from tests.support import Server, assert_exactly_once, free_port, wait_for, wait_for_status

SCENARIOS = [s.id for s in demo_document().scenarios[:2]]


def codreamer(*args: str, cwd, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("API_KEYS", "DATABASE_URL")}
    environment |= {"TQDM_DISABLE": "1"} | (env or {})
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def test_a_taken_port_is_one_line_and_a_prompt_exit(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = codreamer("serve", "--port", str(port), cwd=tmp_path,
                           env={"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite"}, timeout=30)
        elapsed = time.monotonic() - started
    output = lines(result)
    assert result.returncode != 0, output
    assert elapsed < 15, elapsed  # a fresh interpreter and the CLI, nothing else
    assert len(output) == 1 and f"port {port}" in output[0] and "already in use" in output[0], output
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"], ["db", "upgrade"], ["db", "check"]])
def test_an_unreachable_database_is_one_line_with_the_password_masked(tmp_path, command):
    if command[0] == "serve":
        command = ["serve", "--port", str(free_port())]
    result = codreamer(*command, cwd=tmp_path, env={"DATABASE_URL": "postgresql://u:secret@127.0.0.1:1/db"})
    output = lines(result)
    assert result.returncode == 1, output
    assert len(output) == 1, output
    assert "127.0.0.1:1" in output[0] and "postgresql://u:***@127.0.0.1:1/db" in output[0], output
    assert "secret" not in result.stdout + result.stderr and "Traceback" not in result.stdout + result.stderr


def test_an_invalid_database_url_does_not_echo_it(tmp_path):
    result = codreamer("serve", "--port", str(free_port()), cwd=tmp_path, env={"DATABASE_URL": "mysql://u:secret@db/app"})
    output = lines(result)
    assert result.returncode == 1 and len(output) == 1 and "DATABASE_URL" in output[0], output
    assert "secret" not in result.stdout + result.stderr


def test_production_without_api_keys_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "API_KEYS"} | {"ENVIRONMENT": "production"}
    result = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "serve", "--port", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert "API_KEYS" in result.stdout + result.stderr and "refusing to start" in result.stdout + result.stderr


def sigterm(server: Server, timeout: float = 60) -> int:
    server.process.send_signal(signal.SIGTERM)
    return server.process.wait(timeout=timeout)


@pytest.mark.slow
def test_a_cancel_is_one_log_line_and_sigterm_exits_0(tmp_path):
    """One server: a run cancelled while it executes, then SIGTERM to the (now idle) server."""
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "process-cancel",
                               "PYTHONUNBUFFERED": "1"}).start()
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": 20, "scenario_ids": SCENARIOS, "rollouts_per_group": 3}).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] == "running", timeout=120)
            time.sleep(0.5)  # inside a step
            assert client.post(f"/runs/{run_id}/cancel").status_code == 202
            assert wait_for_status(client, run_id, timeout=60)["status"] == "cancelled"
            wait_for(lambda: f"run {run_id} cancelled" in server.log.read_text(), timeout=30)
        assert sigterm(server) == 0
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    mentions = [line for line in log.splitlines() if run_id in line]
    assert len(mentions) == 1 and f"run {run_id} cancelled" in mentions[0], log[-3000:]


@pytest.mark.slow
def test_sigterm_mid_run_exits_0_and_the_run_resumes_after_a_restart(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "process-sigterm",
           "SHUTDOWN_DRAIN_S": "0", "PYTHONUNBUFFERED": "1"}  # no drain: the run is interrupted mid-step
    iterations = 8  # enough that the SIGTERM after the first finds the run in flight, pipelined as it is
    server = Server(tmp_path, env).start()
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": iterations, "scenario_ids": SCENARIOS, "rollouts_per_group": 3}).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] >= 1, timeout=120)
            assert client.get(f"/runs/{run_id}").json()["status"] == "running"
        assert sigterm(server) == 0
    finally:
        server.stop()
    first = server.log.read_text()
    assert "Traceback" not in first, first[-3000:]
    assert "1 run(s) interrupted by shutdown" in first, first[-3000:]  # it was in flight, not finished
    restarted = Server(tmp_path, env).start()
    try:
        with restarted.client() as client:
            wait_for_status(client, run_id, timeout=120)
            assert_exactly_once(client, run_id, iterations)
        assert sigterm(restarted) == 0
    finally:
        restarted.stop()
    assert "Traceback" not in restarted.log.read_text()
