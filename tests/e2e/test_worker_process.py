"""`codreamer serve` works runs in a child process: kill -9 of it, on SQLite (the embedded default). kill -9 of the
API, which takes the worker with it, is `tests/e2e/test_service.py::test_crash_mid_run_resumes_exactly_once`."""

import os

from tests.support import Server, assert_exactly_once, child_pids, process_gone, run_workers, wait_for, wait_for_status

LOOP_LIBRARY = "/tiktoken/_tiktoken"  # litellm's tokenizer, a compiled library: it shows in a process's memory map
BODY = {"iterations": 3, "rollouts_per_group": 2, "max_turns": 3, "scenario_ids": ["scn-healthcare-cto"]}


def test_a_killed_worker_is_restarted_and_its_run_finishes_exactly_once_while_the_api_answers(tmp_path):
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{tmp_path}/codreamer.sqlite", "EXECUTOR_ID": "child-worker"}).start()
    try:
        [worker] = wait_for(lambda: run_workers(server.process.pid) or None, timeout=60)
        assert os.getpriority(os.PRIO_PROCESS, worker) > os.getpriority(os.PRIO_PROCESS, server.process.pid)
        # Batch scheduling: a waking request preempts the worker at once, not after the worker's time slice.
        assert os.sched_getscheduler(worker) == os.SCHED_BATCH != os.sched_getscheduler(server.process.pid)
        with server.client() as client:
            run_id = client.post("/learn-loop", json=BODY).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] >= 1, timeout=180)
            [model_server] = child_pids(worker)  # the embedded model server, started by the run: batch like its parent
            assert os.sched_getscheduler(model_server) == os.SCHED_BATCH
            # The loop (ART's litellm and its tokenizer library) is loaded by the worker, which has judged an
            # iteration by now (the restarted one may have less left to do than its first judge call)
            assert LOOP_LIBRARY in _shared_libraries(worker)
            os.kill(worker, 9)
            wait_for(lambda: process_gone(worker), timeout=30)
            assert client.get(f"/runs/{run_id}").status_code == 200  # the API never went away
            [restarted] = wait_for(lambda: run_workers(server.process.pid) or None, timeout=30)
            assert restarted != worker
            assert wait_for_status(client, run_id)["status"] == "succeeded"
            assert_exactly_once(client, run_id, BODY["iterations"])
        assert LOOP_LIBRARY not in _shared_libraries(server.process.pid)  # never by the API
        assert "the run worker exited with code -9; restarting it" in server.log.read_text()
    finally:
        server.stop()


def _shared_libraries(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as maps:
        return maps.read()
