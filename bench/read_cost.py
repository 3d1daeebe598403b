"""CPU per read: what one request of each kind costs the API process, counted by the process's own CPU clock
(user + system, /proc/<pid>/stat) over 2,000 sequential requests on one keep-alive connection, not by wall time.

The server is `codreamer serve` on SQLite with one finished run of 5 iterations and 20 runs in its list, idle
otherwise. Conditional reads send the tag of the previous answer, as a polling dashboard does.
"""

import os
import time
from pathlib import Path

import httpx

from tests.support import Server

REQUESTS = 2000
RUNS = 20
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _cost(client: httpx.Client, pid: int, path: str, conditional: bool) -> dict | None:
    first = client.get(path)
    assert first.status_code == 200, first.text
    if conditional and "etag" not in first.headers:
        return None  # a version of the service from before conditional reads
    headers = {"If-None-Match": first.headers["etag"]} if conditional else {}
    for _ in range(50):  # warm: caches, the connection, the interpreter's specialisations
        client.get(path, headers=headers)
    before, started = _cpu_seconds(pid), time.perf_counter()
    statuses = {client.get(path, headers=headers).status_code for _ in range(REQUESTS)}
    cpu, wall = _cpu_seconds(pid) - before, time.perf_counter() - started
    return {"cpu_ms": round(cpu / REQUESTS * 1000, 3), "wall_ms": round(wall / REQUESTS * 1000, 3),
            "statuses": sorted(statuses), "bytes": len(first.content)}


def measure(workdir: Path) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir / 'reads.db'}", "EXECUTOR_ID": "read-bench"}).start(timeout=180)
    try:
        with server.client() as client:
            body = {"iterations": 5, "rollouts_per_group": 2, "max_turns": 3}
            run_ids = [client.post("/learn-loop", json=body | {"iterations": 1}).json()["run_id"] for _ in range(RUNS - 1)]
            run_id = client.post("/learn-loop", json=body).json()["run_id"]
            for rid in [*run_ids, run_id]:
                while client.get(f"/runs/{rid}").json()["status"] not in ("succeeded", "failed"):
                    time.sleep(0.5)
            pid = server.process.pid
            reads = {
                "run view": f"/runs/{run_id}",
                "run list page (20)": "/runs?limit=20",
                "iteration list (6)": f"/runs/{run_id}/iterations",
                "iteration detail": f"/runs/{run_id}/iterations/3",
            }
            costs = {name: _cost(client, pid, path, conditional=False) for name, path in reads.items()}
            for name in ("run view", "iteration list (6)", "iteration detail"):
                if (cost := _cost(client, pid, reads[name], conditional=True)) is not None:
                    costs[f"{name}, 304"] = cost
            healthz = _cost(client, pid, "/healthz", conditional=False)
        return {"requests_each": REQUESTS, "reads": costs, "floor_healthz": healthz}
    finally:
        server.stop()


if __name__ == "__main__":  # the same measurement of any checkout, e.g. an older commit's: `python -m bench.read_cost OUT`
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(sys.argv[1]).write_text(json.dumps(measure(Path(tmp) / "reads"), indent=2))
