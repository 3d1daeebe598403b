"""API interference: how much 20 runs in flight slow the API of the default `codreamer serve` down.

The same server, data and request mix as the API-under-load benchmark (70% run views, 20% run list pages, 10%
iteration lists, open loop): p99 at 100 and 200 requests/s with 20 runs in flight, then the same rates once every
run has stopped. With CPU per process: the API, its run worker (a child), the worker's embedded model server and
PostgreSQL's processes, and how fast the runs progressed meanwhile (iterations per minute, the worker's CPU per
iteration).
Each figure pools three 15 s stretches, the rates taking turns: one stretch's p99 rests on its few slowest requests
(30 at 200/s), and two stretches back to back differed by 70%.
"""

import asyncio
import subprocess
import time

from bench.api_load import _cancel, _cpu_seconds, _iterations, _sample, _start_runs, _summary
from tests.support import FreshPostgresDatabase, Server, child_pids, wait_for

RATES = (100, 200)
SECONDS = 15.0
STRETCHES = 3


def _processes(server: Server, database: str) -> dict[str, list[int]]:
    """The pids of each part; PostgreSQL's are every `postgres` process (the benchmark's database is the only busy
    one), a backend that comes or goes during a stretch not counted."""
    workers = child_pids(server.process.pid)
    parts = {"api": [server.process.pid], "worker": workers, "model_server": [c for w in workers for c in child_pids(w)]}
    if database == "postgresql":
        parts["database"] = [int(pid) for pid in subprocess.run(["pgrep", "-x", "postgres"], capture_output=True, text=True).stdout.split()]
    return parts


def _cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds so far of each of the processes still there."""
    used = {}
    for pid in pids:
        try:
            used[pid] = _cpu_seconds(pid)
        except FileNotFoundError:
            pass  # gone since it was listed
    return used


def _loaded(server: Server, ids: list[str], database: str) -> dict[str, dict]:
    """Per rate: the latency figures over its stretches, and the cores each process kept busy meanwhile."""
    processes = _processes(server, database)
    samples: dict[int, list] = {rate: [] for rate in RATES}
    used = {rate: dict.fromkeys(processes, 0.0) for rate in RATES}
    for _ in range(STRETCHES):
        for rate in RATES:
            before, started = {k: _cpu(ps) for k, ps in processes.items()}, time.perf_counter()
            samples[rate].append(asyncio.run(_sample(server.url, ids, rate, SECONDS)))
            elapsed = time.perf_counter() - started
            for k, ps in processes.items():
                after = _cpu(ps)
                used[rate][k] += sum(after[p] - before[k][p] for p in after.keys() & before[k].keys()) / elapsed / STRETCHES
    results = {}
    for rate in RATES:
        result = _summary(samples[rate])
        results[str(rate)] = ({k: round(result[k], 1) for k in ("throughput_rps", "p50_ms", "p99_ms")}
                              | {"errors": result["errors"], "cores": {k: round(v, 2) for k, v in used[rate].items()}}
                              | {"p99_ms_by_read": {read: round(v, 1) for read, v in result["p99_ms_by_read"].items()}}
                              | {"stretch_p99_ms": [round(_summary([s])["p99_ms"], 1) for s in samples[rate]]})
    return results


def measure_one(workdir, database: str, runs: int = 20) -> dict:
    pg = FreshPostgresDatabase() if database == "postgresql" else None
    url = pg.url if pg else f"sqlite:///{workdir}/data/codreamer.sqlite"
    server = Server(workdir, {"DATABASE_URL": url, "MAX_CONCURRENT_RUNS": str(runs), "WORKER_CONCURRENCY": str(runs),
                              "EXECUTOR_ID": f"interference-{database}"})
    try:
        server.start(timeout=180)
        ids = _start_runs(server, runs)
        workers = child_pids(server.process.pid)
        done, cpu, started = _iterations(server, ids), sum(_cpu_seconds(p) for p in workers), time.perf_counter()
        with_runs = _loaded(server, ids, database)
        done, cpu = _iterations(server, ids) - done, sum(_cpu_seconds(p) for p in workers) - cpu
        progress = {"iterations_per_min": round(done / (time.perf_counter() - started) * 60, 1),
                    "worker_cpu_s_per_iteration": round(cpu / max(done, 1), 2)}
        _cancel(server, ids)
        with server.client() as client:
            wait_for(lambda: all(client.get(f"/runs/{i}").json()["status"] in ("cancelled", "failed", "succeeded") for i in ids), 180)
        without = _loaded(server, ids, database)
    finally:
        server.stop()
        if pg:
            pg.drop()
    return {"database": database, "runs_in_flight": runs, "with_runs": with_runs, "without_runs": without, "runs_progress": progress,
            "ratio": {r: round(with_runs[r]["p99_ms"] / without[r]["p99_ms"], 2) for r in with_runs}}


def measure(workdir) -> list[dict]:
    results = []
    for database in ("sqlite", "postgresql"):
        (workdir / database).mkdir(parents=True, exist_ok=True)
        results.append(measure_one(workdir / database, database))
    return results
