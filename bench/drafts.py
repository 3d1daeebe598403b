"""Drafts: what a run learned, put to work on prospects the loop never saw (issue 39), on the demo graph.

The demo's simulated team (`app.outcomes.simulated_team`) makes up look-alike prospects of the demo's scenarios
(names and companies of their own; a scenario's role, industry, some of its pains, its goal) and sends their drafts:
each look-alike opens and replies with the probabilities of its base scenario's hidden preferences. Those true
probabilities are read only here; the service sees the prospects, and the outcomes through `POST /outcomes`.

Everything goes through the API, in process (the app and its worker on a SQLite file, an httpx client over ASGI):
`POST /learn-loop`, `PUT /graphs/demo/deployment`, `POST /drafts`, `GET /draft-batches/…`, `POST /outcomes`.

- Throughput: 1,000 look-alikes in one batch on the embedded backend, `codreamer serve` on SQLite, while a client
  reads the batch and its drafts at a fixed rate; then the same reads with no batch in flight. Each phase starts once
  the API has answered what the one before left queued.
- Scale-out: drafts a minute with 1 and 2 `codreamer worker` processes on PostgreSQL, the policy and judge a
  latency-injected OpenAI-compatible server (0.5 s a call): 1,000 look-alikes as one batch and as four. A batch's
  chunks are workflows of their own that any worker takes, so a second worker drafts a share of one batch too.

`python -m bench drafts` runs every part; `DRAFTS_PARTS=throughput` one of them. (Transfer to prospects the loop never
saw is measured in the simulated world, `bench/world.py`; the weekly loop with real delays in `bench/weekly.py`.)
"""

import asyncio
import os
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bench import machine

if TYPE_CHECKING:  # the service's own types, imported with the app only once a part runs (_environment first)
    import httpx

    from app.kit.settings import Settings

GRAPH = "demo"
BOOTSTRAP = 2000  # resamples of the seeds for a ratio's 90% interval


def _environment() -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401  (litellm offline)


@dataclass
class Api:
    http: "httpx.AsyncClient"
    settings: "Settings"


@asynccontextmanager
async def service(data_dir: Path):
    """The app with its worker in this process, on a SQLite file, and a client that calls it over ASGI."""
    from app.kit.settings import Settings
    from app.main import create_app
    from tests.support import connect, lifespan

    settings = Settings(_env_file=None, database_url=f"sqlite:///{data_dir.resolve() / 'codreamer.sqlite'}",
                        art_path=str(data_dir.resolve() / ".art"), executor_id=f"bench-{uuid.uuid4().hex[:8]}",
                        run_worker=True)
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        client.timeout = 120
        yield Api(client, settings)


async def _ok(answer, *codes: int) -> dict:
    assert answer.status_code in (codes or (200,)), f"{answer.request.method} {answer.request.url}: {answer.status_code} {answer.text[:500]}"
    return answer.json()


async def learn(client, body: dict, poll_s: float = 0.2) -> dict:
    """POST /learn-loop, then the run once it finished."""
    run_id = (await _ok(await client.post("/learn-loop", json=body), 202))["run_id"]
    while True:
        run = await _ok(await client.get(f"/runs/{run_id}"))
        if run["status"] in ("succeeded", "failed", "cancelled"):
            assert run["status"] == "succeeded", run
            return run
        await asyncio.sleep(poll_s)


async def deploy(client, policy: str) -> dict:
    return await _ok(await client.put(f"/graphs/{GRAPH}/deployment", json={"policy": policy}))


async def draft(client, prospects: list[dict], seed: int, policy: str | None = None, poll_s: float = 0.2) -> tuple[dict, list[dict]]:
    """POST /drafts (with `policy`, or the deployment), then the finished batch and its drafts, in prospect order."""
    body = {"graph_id": GRAPH, "prospects": prospects, "seed": seed} | ({"policy": policy} if policy else {})
    created = await _ok(await client.post("/drafts", json=body), 202)
    while True:
        batch = await _ok(await client.get(created["links"]["self"]))
        if batch["status"] in ("succeeded", "failed"):
            assert batch["status"] == "succeeded", batch
            break
        await asyncio.sleep(poll_s)
    drafts, after = [], None
    while True:
        page = await _ok(await client.get(created["links"]["drafts"], params={"limit": 200} | ({"after": after} if after is not None else {})))
        drafts += page["data"]
        if not page["has_more"]:
            return batch, drafts
        after = len(drafts) - 1


def true_replies(team, look_alikes, drafts: list[dict]) -> list[float]:
    """The world's positive-reply probability of each prospect's draft (0 where the policy wrote none)."""
    from app.agent.schemas import Email

    out = []
    for look_alike, d in zip(look_alikes, drafts, strict=True):
        assert d["prospect"]["id"] == look_alike.prospect["id"]
        if d["email"] is None:
            out.append(0.0)
            continue
        _, p_positive = team.probabilities(look_alike, Email(**{k: d["email"][k] for k in ("subject", "body", "citations")}))
        out.append(p_positive)
    return out


async def send(api: Api, team, look_alikes, drafts: list[dict], seed: int) -> dict:
    """The team sends every draft a reply window ago (so its outcomes are mature, as a week later), reporting what
    happened through `POST /outcomes`, at most 1,000 events a request."""
    from app.outcomes.schemas import MAX_EVENTS_PER_REQUEST

    sent_at = datetime.now(UTC) - timedelta(seconds=api.settings.reply_window_s + 3600)
    pairs = [(la, d["email"]) for la, d in zip(look_alikes, drafts, strict=True) if d["email"] is not None]
    sent, events = team.send(pairs, seed, sent_at)
    accepted = unattributed = 0
    for start in range(0, len(events), MAX_EVENTS_PER_REQUEST):
        result = await _ok(await api.http.post("/outcomes", json={"events": events[start:start + MAX_EVENTS_PER_REQUEST]}), 202)
        accepted += result["accepted"]
        unattributed += result["unattributed"]
    assert unattributed == 0 and accepted == len(events), (accepted, unattributed, len(events))
    return {"sent": len(sent), "delivered": sum(s.delivered for s in sent), "opened": sum(s.opened for s in sent),
            "replied": sum(s.replied for s in sent), "events": len(events)}


def ratio_interval(numerator: list[float], denominator: list[float], seed: int = 0) -> list[float]:
    """The 5th and 95th percentiles of mean(numerator) ÷ mean(denominator) over resamples of the seeds (a seed's
    pair stays together)."""
    top, bottom = np.array(numerator), np.array(denominator)
    draws = np.random.default_rng(seed).integers(0, len(top), size=(BOOTSTRAP, len(top)))
    return np.percentile(top[draws].mean(axis=1) / bottom[draws].mean(axis=1), [5, 95]).round(3).tolist()


# ---------------------------------------------------------------- throughput

BATCH = 1000
READ_RATES = (20, 200)  # reads a second meanwhile: a few people watching progress and paging drafts; the API target's rate
QUIET_S = 10  # reads with no batch in flight, at each rate, for comparison


def _tree_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds so far of `serve` (the API), its run worker (a child) and the worker's children (the embedded model
    server)."""
    from bench.api_load import _cpu_seconds
    from tests.support import child_pids

    def cpu(p: int) -> float:
        try:
            return _cpu_seconds(p)
        except (FileNotFoundError, ProcessLookupError):
            return 0.0

    workers = child_pids(pid)
    return {"api": cpu(pid), "worker": sum(cpu(w) for w in workers),
            "model_server": sum(cpu(m) for w in workers for m in child_pids(w))}


async def _reads(base_url: str, batch_id: str, policy: str, rate: float, until) -> dict:
    """Open-loop reads at `rate` a second until `until()` is true: 50% the batch (progress), 30% a page of 50 drafts,
    10% the deployment, 10% the policy."""
    import aiohttp

    latencies: dict[str, list[float]] = {"batch": [], "drafts_page": [], "deployment": [], "policy": []}
    errors: list[str] = []
    async with aiohttp.ClientSession(base_url=base_url, connector=aiohttp.TCPConnector(limit=200),
                                     timeout=aiohttp.ClientTimeout(total=10)) as client:
        async def one(i: int) -> None:
            kind = i % 10
            read = "batch" if kind < 5 else "drafts_page" if kind < 8 else "deployment" if kind < 9 else "policy"
            path = {"batch": f"/draft-batches/{batch_id}", "drafts_page": f"/draft-batches/{batch_id}/drafts?limit=50&after={(i * 37) % BATCH}",
                    "deployment": f"/graphs/{GRAPH}/deployment", "policy": f"/policies/{policy}"}[read]
            started = time.perf_counter()
            try:
                async with client.get(path) as response:
                    await response.read()
                    if response.status != 200:
                        errors.append(f"{path}: {response.status}")
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                errors.append(f"{path}: {type(exc).__name__}")
            latencies[read].append((time.perf_counter() - started) * 1000)

        tasks, t0, i = [], time.perf_counter(), 0
        while not until():
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
            i += 1
        await asyncio.gather(*tasks)
        seconds = time.perf_counter() - t0
    every = np.array([ms for values in latencies.values() for ms in values])
    return {"requests": len(every), "seconds": round(seconds, 1), "rate": rate, "achieved_rps": round(len(every) / seconds, 1),
            "p50_ms": round(float(np.percentile(every, 50)), 1), "p99_ms": round(float(np.percentile(every, 99)), 1),
            "max_ms": round(float(every.max()), 1), "errors": len(errors), "error_samples": errors[:3],
            "p99_ms_by_read": {k: round(float(np.percentile(v, 99)), 1) for k, v in latencies.items() if v}}


def _drafted_while_read(server, prospects: list[dict], policy: str, rate: float, seed: int) -> dict:
    """One batch of `prospects`, read at `rate` until it finished: drafts a second and the reads' latencies."""
    import httpx

    async def go() -> dict:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            cpu_before, started = _tree_cpu_seconds(server.process.pid), time.monotonic()
            created = await _ok(await http.post("/drafts", json={"graph_id": GRAPH, "prospects": prospects, "seed": seed}), 202)
            batch: dict = {}

            async def watch() -> None:
                while True:
                    batch.update(await _ok(await http.get(created["links"]["self"])))
                    if batch["status"] in ("succeeded", "failed"):
                        return
                    await asyncio.sleep(0.5)

            watcher = asyncio.create_task(watch())
            reads = await _reads(server.url, created["batch_id"], policy, rate, watcher.done)
            await watcher
            wall = time.monotonic() - started
            cpu_after = _tree_cpu_seconds(server.process.pid)
        assert batch["status"] == "succeeded" and batch["completed"] == len(prospects), batch
        service_s = (datetime.fromisoformat(batch["finished_at"]) - datetime.fromisoformat(batch["created_at"])).total_seconds()
        return {"batch_id": created["batch_id"], "prospects": len(prospects), "read_rate": rate, "seconds": round(wall, 1), "batch_seconds": round(service_s, 1),
                "drafts_per_s": round(len(prospects) / service_s, 1), "reads": reads,
                "cores": {k: round((cpu_after[k] - cpu_before[k]) / wall, 2) for k in cpu_after},
                "load_average_before": round(os.getloadavg()[0], 2)}

    return asyncio.run(go())


def _drained(server, fast_ms: float = 20.0, in_a_row: int = 5, timeout_s: float = 120.0) -> None:
    """Waits until the API answers `/healthz` fast `in_a_row` times: reads an earlier phase left queued (an open-loop
    client gives up on them, the server still answers each) would otherwise count against the next phase."""
    import httpx

    deadline, fast = time.monotonic() + timeout_s, 0
    with httpx.Client(base_url=server.url, timeout=30) as http:
        while fast < in_a_row and time.monotonic() < deadline:
            started = time.perf_counter()
            http.get("/healthz")
            fast = fast + 1 if (time.perf_counter() - started) * 1000 < fast_ms else 0
            time.sleep(0.05)


def _quiet_reads(server, batch_id: str, policy: str, rate: float) -> dict:
    _drained(server)
    deadline = time.monotonic() + QUIET_S
    return asyncio.run(_reads(server.url, batch_id, policy, rate, lambda: time.monotonic() > deadline))


def measure_throughput(workdir: Path, rates: tuple[float, ...] = READ_RATES, size: int = BATCH) -> dict:
    """`codreamer serve` on SQLite (its run worker and the embedded model server in child processes): a short run,
    its last policy deployed, then one batch of `size` look-alikes at each read rate."""
    import httpx

    from app.knowledge_graph.service import demo_graph
    from app.outcomes.simulated_team import SimulatedTeam
    from tests.support import Server

    team = SimulatedTeam(demo_graph())
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/codreamer.sqlite", "EXECUTOR_ID": "drafts-bench"}).start(timeout=180)
    started = time.monotonic()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            run_id = http.post("/learn-loop", json={"iterations": 3, "rollouts_per_group": 4, "feedback_source": "oracle"}).json()["run_id"]
            while http.get(f"/runs/{run_id}").json()["status"] not in ("succeeded", "failed"):
                time.sleep(0.5)
            policy = http.put(f"/graphs/{GRAPH}/deployment", json={"policy": run_id}).json()["policy"]
        batches = []
        for n, rate in enumerate(rates):
            prospects = [la.prospect for la in team.look_alikes(size, seed=20_000 + n)]
            _drained(server)
            batches.append(_drafted_while_read(server, prospects, policy, rate, seed=n))
        # the same reads once every batch has finished
        quiet = {str(rate): _quiet_reads(server, batches[-1]["batch_id"], policy, rate) for rate in rates}
    finally:
        server.stop()
    return {"batch": size, "policy_run": {"iterations": 3, "rollouts_per_group": 4}, "batches": batches, "quiet": quiet,
            "seconds": round(time.monotonic() - started, 1)}


# ---------------------------------------------------------------- scale-out (latency-injected backend)

SCALE_OUT_LATENCY_S = 0.5  # every model call, the judge's too
SCALE_OUT_BATCHES = (1, 4)  # 1,000 prospects as one batch, and as four batches of 250
PER_WORKER = 2  # WORKER_CONCURRENCY: chunks of 25 prospects one worker drafts at once (of one batch or several)


def _scale_out_one(workdir: Path, workers: int, batches: int, base_url: str, size: int) -> dict:
    """API-only `serve` and `workers` `codreamer worker` processes on a fresh PostgreSQL database; a fixed policy
    (`MODEL_BACKEND=openai`, one iteration, so it has lessons) on the latency server; then `size` look-alikes in
    `batches` batches, all posted at once: drafts a minute from the first post to the last batch finished."""
    import json

    from app.knowledge_graph.service import demo_graph
    from app.outcomes.simulated_team import SimulatedTeam
    from tests.support import FreshPostgresDatabase, Server, WorkerProcess, wait_for

    team = SimulatedTeam(demo_graph())
    database = FreshPostgresDatabase()
    env = {"DATABASE_URL": database.url, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "k", "OPENAI_MODEL": "policy",
           "JUDGES": json.dumps({"latency": {"model": "openai/judge", "base_url": base_url, "api_key": "k"}}),
           "WORKER_CONCURRENCY": str(PER_WORKER), "MAX_CONCURRENT_RUNS": "8",
           # one tenant's batches: its limit on chunks drafted at once (default 2) raised to what its workers draft
           "DRAFT_CONCURRENCY_PER_TENANT": str(PER_WORKER * workers)}
    workdir.mkdir(parents=True, exist_ok=True)
    server = Server(workdir, env | {"RUN_WORKER": "false", "EXECUTOR_ID": f"drafts-api-{workers}-{batches}"})
    pool = [WorkerProcess(workdir, env | {"EXECUTOR_ID": f"drafts-{workers}-{batches}-{n}"}) for n in range(workers)]
    try:
        server.start(timeout=180)
        for worker in pool:
            worker.start(timeout=180)
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"backend": "openai", "judge": "latency", "iterations": 1,
                                                      "rollouts_per_group": 2, "max_turns": 4, "feedback_source": "none"}).json()["run_id"]
            run = wait_for(lambda: (r := client.get(f"/runs/{run_id}").json())["status"] in ("succeeded", "failed") and r,
                           timeout=600, interval=0.5)
            assert run["status"] == "succeeded", run
            client.put(f"/graphs/{GRAPH}/deployment", json={"policy": run_id})
            prospects = [la.prospect for la in team.look_alikes(size, seed=30_000)]
            share = size // batches
            started = time.monotonic()
            ids = [client.post("/drafts", json={"graph_id": GRAPH, "prospects": prospects[n * share:(n + 1) * share]}).json()["batch_id"]
                   for n in range(batches)]
            done = wait_for(lambda: (b := [client.get(f"/draft-batches/{i}").json() for i in ids])
                            and all(x["status"] in ("succeeded", "failed") for x in b) and b, timeout=1200, interval=0.5)
            seconds = time.monotonic() - started
    finally:
        for worker in pool:
            worker.stop()
        server.stop()
        database.drop()
    drafted = sum(b["completed"] for b in done if b["status"] == "succeeded")
    return {"workers": workers, "batches": batches, "prospects": size, "drafted": drafted, "seconds": round(seconds, 1),
            "drafts_per_minute": round(60 * drafted / seconds, 1)}


def measure_scale_out(workdir: Path, size: int = BATCH, layouts: tuple[int, ...] = SCALE_OUT_BATCHES) -> dict:
    from bench.orchestration import Latencies, latency_server

    latencies = Latencies(model_s=SCALE_OUT_LATENCY_S, judge_s=SCALE_OUT_LATENCY_S)
    server = latency_server(latencies)
    started = time.monotonic()
    try:
        results = [_scale_out_one(workdir / f"{workers}-{batches}", workers, batches, server.base_url, size)
                   for batches in layouts for workers in (1, 2)]
    finally:
        server.stop()
    speedup = {str(b): round(next(r["drafts_per_minute"] for r in results if r["batches"] == b and r["workers"] == 2)
                             / next(r["drafts_per_minute"] for r in results if r["batches"] == b and r["workers"] == 1), 2)
               for b in layouts}
    return {"latency_s": SCALE_OUT_LATENCY_S, "per_worker": PER_WORKER, "tenant_limit_raised": True, "max_turns": 4,
            "results": results, "speedup": speedup, "seconds": round(time.monotonic() - started, 1)}


# ---------------------------------------------------------------- the section

PARTS = ("throughput", "scale_out")


def measure(workdir: Path, previous: dict | None = None, parts: tuple[str, ...] | None = None) -> dict:
    """Each part in turn (`DRAFTS_PARTS=throughput` runs one; the others keep their previous figures), each with
    the date, the machine and its load average as it began."""
    parts = parts or tuple(p for p in os.environ.get("DRAFTS_PARTS", ",".join(PARTS)).split(",") if p)
    if unknown := set(parts) - set(PARTS):
        raise ValueError(f"unknown parts {sorted(unknown)}; any of {', '.join(PARTS)}")
    result = dict(previous or {})
    for part in parts:
        print(f"   drafts: {part}", flush=True)
        about = {"machine": machine(), "load_average_before": round(os.getloadavg()[0], 2)}
        if part == "throughput":
            result[part] = measure_throughput(workdir / "throughput") | about
        else:
            result[part] = measure_scale_out(workdir / "scale_out") | about
    return result
