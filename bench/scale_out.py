"""Scale-out: runs completed per minute with 1, 2 and 4 `codreamer worker` processes on one PostgreSQL database.

The runs are I/O-bound, so this machine's 2 cores do not cap them: the policy (`MODEL_BACKEND=openai`, a fixed
model, so no training step) and a RULER judge are the orchestration benchmark's latency-injected
OpenAI-compatible server on loopback (0.5 s a model call, 2 s a judge call). The API is `serve` with
RUN_WORKER=false; each worker takes at most WORKER_CONCURRENCY runs at once, so capacity grows with workers.
"""

import json
import time

from bench.orchestration import Latencies, latency_server
from tests.support import FreshPostgresDatabase, Server, WorkerProcess, wait_for

RUNS = 8
PER_WORKER = 2  # WORKER_CONCURRENCY
BODY = {"backend": "openai", "judge": "latency", "iterations": 2, "rollouts_per_group": 4, "max_turns": 4,
        "scenario_ids": ["scn-healthcare-cto"], "feedback_source": "none"}


def measure_one(workdir, workers: int, base_url: str) -> dict:
    database = FreshPostgresDatabase()
    env = {"DATABASE_URL": database.url, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "k", "OPENAI_MODEL": "policy",
           "JUDGES": json.dumps({"latency": {"model": "openai/judge", "base_url": base_url, "api_key": "k"}}),
           "WORKER_CONCURRENCY": str(PER_WORKER), "MAX_CONCURRENT_RUNS": str(RUNS)}
    server = Server(workdir, env | {"RUN_WORKER": "false", "EXECUTOR_ID": f"scale-api-{workers}"})
    pool = [WorkerProcess(workdir, env | {"EXECUTOR_ID": f"scale-{workers}-{n}"}) for n in range(workers)]
    try:
        server.start(timeout=180)
        for worker in pool:
            worker.start(timeout=180)
        with server.client() as client:
            started = time.monotonic()
            ids = [client.post("/learn-loop", json=BODY).json()["run_id"] for _ in range(RUNS)]
            statuses = wait_for(lambda: (s := [client.get(f"/runs/{i}").json()["status"] for i in ids])
                                and all(x in ("succeeded", "failed", "cancelled") for x in s) and s, timeout=900, interval=0.5)
            seconds = time.monotonic() - started
    finally:
        for worker in pool:
            worker.stop()
        server.stop()
        database.drop()
    return {"workers": workers, "runs": RUNS, "succeeded": statuses.count("succeeded"), "seconds": round(seconds, 1),
            "runs_per_minute": round(60 * statuses.count("succeeded") / seconds, 2)}


def measure(workdir) -> dict:
    latencies = Latencies()
    server = latency_server(latencies)
    try:
        results = []
        for workers in (1, 2, 4):
            (workdir / str(workers)).mkdir(parents=True, exist_ok=True)
            results.append(measure_one(workdir / str(workers), workers, server.base_url))
    finally:
        server.stop()
    one = results[0]["runs_per_minute"]
    return {"latencies": {"model_s": latencies.model_s, "judge_s": latencies.judge_s}, "per_worker": PER_WORKER,
            "results": results, "speedup": {str(r["workers"]): round(r["runs_per_minute"] / one, 2) for r in results if one}}
