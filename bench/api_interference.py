"""API interference: how much 20 runs in flight slow the API of the default `codreamer serve` down.

The same server, data and request mix as the API-under-load benchmark (70% run views, 20% run list pages, 10%
iteration lists, open loop): p99 at 100 and 200 requests/s with 20 runs in flight, then the same rates once every
run has stopped. With CPU per process: the API, its run worker (a child), the worker's embedded model server and
PostgreSQL's processes, and how fast the runs progressed meanwhile (iterations per minute, the worker's CPU per
iteration).
Also how long the API's event loop and the load client's waited for a core, as Linux counts it (`/proc/<pid>/schedstat`):
runnable but not running, which a request's latency includes beside the work done for it.
Each figure pools three 15 s stretches, the rates taking turns: one stretch's p99 rests on its few slowest requests
(30 at 200/s), and two stretches back to back differed by 70%.
"""

import asyncio
import functools
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench.api_load import (
    _cancel,
    _cpu_seconds,
    _iterations,
    _reaped_children_cpu_seconds,
    _sample,
    _start_runs,
    _summary,
)
from tests.support import FreshPostgresDatabase, Server, child_pids, wait_for

RATES = (100, 200)
SECONDS = 15.0
STRETCHES = 3


def _cpu_counters(server: Server, database: str) -> dict[str, Callable[[], float]]:
    """Each part's CPU seconds so far: the API, its run worker (a child), the worker's model server and, on PostgreSQL,
    the whole server. PostgreSQL's is its postmaster's tree: every `postgres` process there now plus what the
    postmaster's exited children used (it reaps them), so a backend that starts or ends during a stretch counts too. A
    pool that opened and closed connections under load once hid most of PostgreSQL's CPU in backends that lived less
    than a stretch."""
    workers = child_pids(server.process.pid)
    counters = {"api": functools.partial(_cpu, [server.process.pid]), "worker": functools.partial(_cpu, workers),
                "model_server": functools.partial(_cpu, [c for w in workers for c in child_pids(w)])}
    if database == "postgresql":
        counters["database"] = _postgres_cpu
    return counters


def _waited_for_a_core_s(pid: int) -> float:
    """Seconds so far that the process's main thread (the API's, or this client's, event loop) was runnable but waited
    for a core."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def _cpu(pids: list[int]) -> float:
    """CPU seconds so far of those of the processes still there."""
    used = 0.0
    for pid in pids:
        try:
            used += _cpu_seconds(pid)
        except FileNotFoundError:
            pass  # gone since it was listed
    return used


def _postgres_cpu() -> float:
    """CPU seconds so far of this machine's PostgreSQL (the benchmark's database is its only busy one): the postmaster
    (the oldest `postgres` process), its children there now, and its children that exited."""
    pids = [int(pid) for pid in subprocess.run(["pgrep", "-x", "postgres"], capture_output=True, text=True).stdout.split()]
    postmaster = min(pids, key=_start_time)
    return _cpu(pids) + _reaped_children_cpu_seconds(postmaster)


def _start_time(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except FileNotFoundError:
        return 1 << 62  # gone: not the postmaster


def _loaded(server: Server, ids: list[str], database: str) -> dict[str, dict]:
    """Per rate: the latency figures over its stretches, and the cores each process kept busy meanwhile."""
    counters = _cpu_counters(server, database)
    samples: dict[int, list] = {rate: [] for rate in RATES}
    meters = {"cores": counters, "waited": {"api": functools.partial(_waited_for_a_core_s, server.process.pid),
                                            "client": functools.partial(_waited_for_a_core_s, os.getpid())}}
    per_s = {rate: {m: dict.fromkeys(c, 0.0) for m, c in meters.items()} for rate in RATES}  # seconds per second
    for _ in range(STRETCHES):
        for rate in RATES:
            before, started = {m: {k: count() for k, count in c.items()} for m, c in meters.items()}, time.perf_counter()
            samples[rate].append(asyncio.run(_sample(server.url, ids, rate, SECONDS)))
            elapsed = time.perf_counter() - started
            for m, c in meters.items():
                for k, count in c.items():
                    per_s[rate][m][k] += (count() - before[m][k]) / elapsed / STRETCHES
    results = {}
    for rate in RATES:
        result = _summary(samples[rate])
        results[str(rate)] = ({k: round(result[k], 1) for k in ("throughput_rps", "p50_ms", "p99_ms")}
                              | {"errors": result["errors"], "cores": {k: round(v, 2) for k, v in per_s[rate]["cores"].items()}}
                              | {"waited_for_a_core_ms_per_s": {k: round(v * 1000, 1) for k, v in per_s[rate]["waited"].items()}}
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
