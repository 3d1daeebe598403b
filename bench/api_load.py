"""API under load: clients poll runs while 20 runs train, at a fixed arrival rate (open loop)."""

import asyncio
import gc
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np

from app.knowledge_graph.service import demo_document
from tests.support import FreshPostgresDatabase, Server, child_pids, wait_for

SCENARIOS = [s.id for s in demo_document().scenarios[:2]]
LEAD_IN_S = 1.0  # of load before each measured stretch, not recorded


@dataclass
class Sample:
    """What one stretch of load saw: each request's latency in ms, by read, and the errors."""
    by_read: dict[str, list[float]] = field(default_factory=lambda: {"run": [], "runs_page": [], "iterations": []})
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


async def _sample(base_url: str, run_ids: list[str], rate: float, seconds: float) -> Sample:
    """aiohttp as the client: it costs the shared CPU less than httpx. The client's own heap is frozen first, so a
    full collection of it (the app and numpy are imported here) does not pause the measurement.

    A lead-in second at the same rate, not recorded, opens the client's connections first: a dashboard polls over
    connections it keeps, while opening some 70 at once stalled the busy API for up to 400 ms, which alone set a
    stretch's p99."""
    gc.collect()
    gc.freeze()
    sample = Sample()
    connector = aiohttp.TCPConnector(limit=200)
    async with aiohttp.ClientSession(base_url=base_url, connector=connector, timeout=aiohttp.ClientTimeout(total=10)) as client:
        async def one(i: int, record: Sample) -> None:
            kind = i % 10
            read = "run" if kind < 7 else "runs_page" if kind < 9 else "iterations"
            path = {"run": f"/runs/{run_ids[i % len(run_ids)]}", "runs_page": "/runs?limit=20",
                    "iterations": f"/runs/{run_ids[i % len(run_ids)]}/iterations"}[read]
            started = time.perf_counter()
            try:
                async with client.get(path) as response:
                    await response.read()
                    if response.status != 200:
                        record.errors.append(f"{path}: {response.status}")
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                record.errors.append(f"{path}: {type(exc).__name__}")
            record.by_read[read].append((time.perf_counter() - started) * 1000)

        async def send(record: Sample, seconds: float) -> float:
            tasks = []
            t0 = time.perf_counter()
            for i in range(int(rate * seconds)):
                delay = t0 + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(i, record)))
            await asyncio.gather(*tasks)
            return time.perf_counter() - t0

        await send(Sample(), LEAD_IN_S)
        sample.seconds = await send(sample, seconds)
    return sample


def _summary(samples: list[Sample]) -> dict:
    """Percentiles over every request of the samples together."""
    by_read = {read: [ms for s in samples for ms in s.by_read[read]] for read in samples[0].by_read}
    ms = np.array([v for values in by_read.values() for v in values])
    errors = [e for s in samples for e in s.errors]
    seconds = sum(s.seconds for s in samples)
    return {
        "requests": len(ms), "seconds": seconds, "throughput_rps": len(ms) / seconds,
        "p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()), "errors": len(errors),
        "p99_ms_by_read": {read: float(np.percentile(v, 99)) for read, v in by_read.items() if v},
        "error_samples": errors[:5],
    }


async def _load(base_url: str, run_ids: list[str], rate: float, seconds: float) -> dict:
    return _summary([await _sample(base_url, run_ids, rate, seconds)])


def _start_runs(server: Server, count: int) -> list[str]:
    with server.client() as client:
        ids = [client.post("/learn-loop", json={"iterations": 200, "scenario_ids": SCENARIOS, "rollouts_per_group": 4}).json()["run_id"]
               for _ in range(count)]
        try:
            wait_for(lambda: sum(client.get(f"/runs/{i}").json()["status"] == "running" for i in ids) == count, timeout=180)
        except AssertionError:
            raise RuntimeError(f"{count} runs did not all start:\n{server.log.read_text()[-3000:]}") from None
    return ids


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reaped_children_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds that a process's exited children used, once it has waited for them."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _cpu(server: Server) -> dict[str, float]:
    """CPU seconds so far: the `serve` process (the API) and its child processes and theirs (the run worker and its
    model server)."""
    pid = server.process.pid
    children = child_pids(pid)
    return {"serve": _cpu_seconds(pid),
            "children": sum(_cpu_seconds(c) for c in children + [g for c in children for g in child_pids(c)])}


def _cores(server: Server, during) -> dict[str, float]:
    """Cores each process kept busy while `during()` ran."""
    before, started = _cpu(server), time.perf_counter()
    during()
    after, elapsed = _cpu(server), time.perf_counter() - started
    return {k: (after[k] - before[k]) / elapsed for k in before}


def _iterations(server: Server, ids: list[str]) -> int:
    with server.client() as client:
        return sum(client.get(f"/runs/{i}").json()["iterations_completed"] for i in ids)


def _cancel(server: Server, ids: list[str]) -> None:
    with server.client() as client:
        for run_id in ids:
            client.post(f"/runs/{run_id}/cancel")


def measure(workdir, database: str, *, split_worker: bool = False, runs: int = 20, rate: float = 200, seconds: float = 20) -> dict:
    pg = FreshPostgresDatabase() if database == "postgresql" else None
    url = pg.url if pg else f"sqlite:///{workdir}/data/codreamer.sqlite"
    env = {"DATABASE_URL": url, "MAX_CONCURRENT_RUNS": str(runs), "WORKER_CONCURRENCY": str(runs), "EXECUTOR_ID": f"bench-{database}"}
    server = Server(workdir, env | ({"RUN_WORKER": "false", "EXECUTOR_ID": "bench-api"} if split_worker else {}))
    worker = None
    try:
        server.start()
        if split_worker:
            # The worker yields the CPU to the API (nice 19): batch work behind latency-sensitive work.
            worker = subprocess.Popen(["nice", "-n", "19", sys.executable, "-m", "app", "worker"], cwd=workdir, env=server.env | env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ids = _start_runs(server, runs)
        result = {"load_average_before": os.getloadavg()[0]}
        # Where the CPU goes with the runs alone: the API's process and its children (the run worker, the model server).
        result["runs_alone"] = _cores(server, lambda: time.sleep(10))
        iterations = _iterations(server, ids)
        loaded = _cores(server, lambda: result.update(asyncio.run(_load(server.url, ids, rate, seconds))))
        result["iterations_during_load"] = _iterations(server, ids) - iterations
        _cancel(server, ids)
        result["cores_serve"], result["cores_children"] = loaded["serve"], loaded["children"]
        # And the API alone, on the same data once every run has stopped: what one process can serve.
        with server.client() as client:
            wait_for(lambda: all(client.get(f"/runs/{i}").json()["status"] in ("cancelled", "failed", "succeeded") for i in ids), 180)
        alone: dict = {}
        cores = _cores(server, lambda: alone.update(asyncio.run(_load(server.url, ids, rate, seconds / 2))))
        result["api_alone"] = {k: alone[k] for k in ("throughput_rps", "p50_ms", "p99_ms", "errors")}
        result["api_alone"]["cpu_ms_per_request"] = 1000 * cores["serve"] * alone["seconds"] / alone["requests"]
    finally:
        if worker:
            worker.terminate()
            worker.wait(timeout=30)
        server.stop()
        if pg:
            pg.drop()
    layout = ("API + worker processes" if split_worker
              else "serve (one command; its run worker and model server in child processes)")
    return {"database": database, "layout": layout,
            "runs_in_flight": runs, "target_rps": rate} | result
