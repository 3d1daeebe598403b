"""Fair queues and a database outage (issue 53), each through the API of real processes on PostgreSQL.

- A noisy tenant: `codreamer serve` (API only) and two `codreamer worker` processes on PostgreSQL. Alice asks for 50
  batches of 1,000 prospects and 100 evaluations as fast as she can (what her caps refuse is a 429); then Bob's
  one-prospect batch is timed from its request to `succeeded`, and what Alice still has queued or running then is
  counted. Target: Bob's batch within 10 s, before Alice's queue has drained.
- Dead webhooks: then two of Bob's one-prospect batches aimed at a closed loopback port, and a third without a
  webhook, timed as above; beside the same third batch with no dead-webhook batch ahead of it. Target: at most 5 s
  later.
- The outage drill: `codreamer serve` on a PostgreSQL cluster of its own (`tests.support.PrivateCluster`); ten rounds
  of a batch of 200 prospects and two evaluations, the cluster stopped for 15 s once the batch has drafted some, then
  started again, and nothing resumed by hand. Target: 10 of 10 batches and evaluations succeed, each prospect drafted
  exactly once.

`python -m bench fairness` (about 25 minutes on 2 cores); `FAIRNESS_PARTS=noisy,outage` picks parts, `OUTAGE_ROUNDS`
sets the rounds.
"""

import os
import time

import httpx

from tests.drills import ENDED, outage_round, prospects
from tests.support import FreshPostgresDatabase, PrivateCluster, Server, WorkerProcess, free_port, wait_for

RUN = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo", "scn-healthcare-cto"], "max_turns": 4,
       "feedback_source": "none"}
NOISY_BATCHES, NOISY_SIZE, NOISY_EVALUATIONS = 50, 1000, 100
QUIET_TARGET_S, DEAD_WEBHOOK_DELAY_S = 10.0, 5.0
OUTAGE_COUNT, OUTAGE_EVALUATIONS, OUTAGE_STOP_S = 200, 2, 15.0


def _learned(client) -> str:
    run_id = client.post("/learn-loop", json=RUN).json()["run_id"]
    wait_for(lambda: client.get(f"/runs/{run_id}").json()["status"] in ENDED, timeout=600, interval=1)
    assert client.get(f"/runs/{run_id}").json()["status"] == "succeeded"
    return f"{run_id}@1"


def _time_to_succeed(client, body: dict) -> tuple[str, float]:
    started = time.monotonic()
    answer = client.post("/drafts", json=body)
    assert answer.status_code == 202, answer.text
    batch_id = answer.json()["batch_id"]
    batch = wait_for(lambda: (b := client.get(f"/draft-batches/{batch_id}").json())["status"] in ENDED and b,
                     timeout=900, interval=0.1)
    return batch["status"], time.monotonic() - started


def noisy(workdir) -> dict:
    database = FreshPostgresDatabase()
    env = {"DATABASE_URL": database.url, "API_KEYS": "alice:alice-key,bob:bob-key", "WEBHOOK_ALLOW_PRIVATE": "true"}
    server = Server(workdir, env | {"RUN_WORKER": "false", "EXECUTOR_ID": "fair-api"}, api_key="alice-key")
    workers = [WorkerProcess(workdir, env | {"EXECUTOR_ID": f"fair-worker-{n}"}) for n in range(2)]
    try:
        server.start(timeout=180)
        for worker in workers:
            worker.start(timeout=180)
        with server.client() as alice, httpx.Client(base_url=server.url, headers={"Authorization": "Bearer bob-key"},
                                                     timeout=30) as bob:
            alices, bobs = _learned(alice), _learned(bob)
            started = time.monotonic()
            batches = [alice.post("/drafts", json={"graph_id": "demo", "policy": alices,
                                                   "prospects": prospects(NOISY_SIZE, "Alice's")})
                       for _ in range(NOISY_BATCHES)]
            evaluations = [alice.post("/evaluations", json={"graph_id": "demo", "policies": [alices]})
                           for _ in range(NOISY_EVALUATIONS)]
            asked_s = time.monotonic() - started
            quiet = {"graph_id": "demo", "policy": bobs, "prospects": prospects(1, "Bob's")}
            status, seconds = _time_to_succeed(bob, quiet)
            accepted = [b.json()["batch_id"] for b in batches if b.status_code == 202]
            judged = [e.json()["evaluation_id"] for e in evaluations if e.status_code == 202]
            still = [alice.get(f"/draft-batches/{b}").json()["status"] for b in accepted]
            still += [alice.get(f"/evaluations/{e}").json()["status"] for e in judged]
            active = sum(s in ("queued", "running") for s in still)
            dead = f"http://127.0.0.1:{free_port()}/hooks"
            for batch in accepted:  # Alice's backlog goes, so that the webhook part measures webhooks alone
                alice.post(f"/draft-batches/{batch}/cancel")
            for evaluation in judged:
                alice.post(f"/evaluations/{evaluation}/cancel")
            time.sleep(5)
            _, alone_s = _time_to_succeed(bob, quiet)
            held = [bob.post("/drafts", json=quiet | {"webhook_url": dead}) for _ in range(2)]
            assert all(h.status_code == 202 for h in held)
            behind_status, behind_s = _time_to_succeed(bob, quiet)
            held_ids = [h.json()["batch_id"] for h in held]
            held_statuses = [wait_for(lambda b=b: (s := bob.get(f"/draft-batches/{b}").json()["status"]) in ENDED and s,
                                      timeout=300) for b in held_ids]
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
        database.drop()
    return {"asked_s": round(asked_s, 1),
            "batches": {"asked": NOISY_BATCHES, "size": NOISY_SIZE, "accepted": len(accepted),
                        "refused_429": sum(b.status_code == 429 for b in batches)},
            "evaluations": {"asked": NOISY_EVALUATIONS, "accepted": len(judged),
                            "refused_429": sum(e.status_code == 429 for e in evaluations)},
            "quiet": {"status": status, "seconds": round(seconds, 2), "alices_still_active": active},
            "dead_webhooks": {"alone_s": round(alone_s, 2), "behind_two_dead_s": round(behind_s, 2),
                              "status": behind_status, "dead_batches": held_statuses}}


def outage(workdir, rounds: int) -> dict:
    cluster = PrivateCluster()
    server = None
    try:
        server = Server(workdir, {"DATABASE_URL": cluster.url, "EXECUTOR_ID": "outage-bench"}).start(timeout=180)
        with server.client() as client:
            policy = _learned(client)
            found = [outage_round(client, cluster, policy, count=OUTAGE_COUNT, evaluations=OUTAGE_EVALUATIONS,
                                  stop_s=OUTAGE_STOP_S, seed=n).as_dict() for n in range(rounds)]
    finally:
        if server is not None:
            server.stop()
        cluster.remove()
    return {"rounds": found, "count": OUTAGE_COUNT, "evaluations": OUTAGE_EVALUATIONS, "stop_s": OUTAGE_STOP_S}


def measure(workdir) -> dict:
    parts = os.environ.get("FAIRNESS_PARTS", "noisy,outage").split(",")
    load = os.getloadavg()[0]
    result: dict = {"load_average_before": round(load, 2)}
    if "noisy" in parts:
        (workdir / "noisy").mkdir(parents=True, exist_ok=True)
        result["noisy"] = noisy(workdir / "noisy")
    if "outage" in parts:
        (workdir / "outage").mkdir(parents=True, exist_ok=True)
        result["outage"] = outage(workdir / "outage", int(os.environ.get("OUTAGE_ROUNDS", "10")))
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    return result
