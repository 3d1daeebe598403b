"""Drills shared by the end-to-end tests and the benchmarks (`bench/fairness.py`): a database stopped under a draft
batch and evaluations, and a noisy tenant beside a quiet one. Each takes a running service's client."""

import time
from dataclasses import asdict, dataclass

import httpx

from tests.support import PrivateCluster, wait_for

ENDED = ("succeeded", "failed", "cancelled")


def prospects(n: int, name: str = "Prospect") -> list[dict]:
    return [{"name": f"{name} {i}", "company": f"Company {i}", "role": "CFO" if i % 2 else "CTO",
             "industry": "saas" if i % 2 else "healthcare",
             "pains": ["cloud invoices surprise us" if i % 2 else "PHI in analytics tools"]} for i in range(n)]


def writer_failing_for(name: str):
    """The drafts workflow's writer, failing for the prospect named `name`; the others are written as ever."""
    from app.drafts import workflow

    write_for = workflow.write_for

    async def failing(author, graph, prospect, seed, **options):
        if prospect["name"] == name:
            raise workflow.DraftingFailed(f"{name} cannot be written to")
        return await write_for(author, graph, prospect, seed, **options)

    return failing


def _get(client: httpx.Client, path: str) -> dict | None:
    """The answer, or None while the service cannot answer (its database is away)."""
    try:
        answer = client.get(path)
    except httpx.HTTPError:
        return None
    return answer.json() if answer.status_code == 200 else None


def ended(client: httpx.Client, path: str, timeout: float) -> dict:
    return wait_for(lambda: (found := _get(client, path)) is not None and found["status"] in ENDED and found,
                    timeout=timeout, interval=0.5)


@dataclass
class OutageRound:
    batch_status: str
    prospects: int
    completed: int
    emails: int  # drafts holding an email
    distinct_refs: int  # refs of the batch's emails: one per prospect, drafted exactly once
    drafted_before_stop: int
    evaluations: list[str]  # their statuses
    stopped_s: float
    recovered_s: float  # from the database's return to the batch's and evaluations' end

    @property
    def exactly_once(self) -> bool:
        drafted = (self.completed, self.emails, self.distinct_refs)
        return self.batch_status == "succeeded" and drafted == (self.prospects,) * 3

    def as_dict(self) -> dict:
        return asdict(self) | {"exactly_once": self.exactly_once}


def outage_round(client: httpx.Client, cluster: PrivateCluster, policy: str, *, count: int, evaluations: int,
                 stop_s: float, seed: int = 0, timeout: float = 600) -> OutageRound:
    """A batch of `count` prospects and `evaluations` evaluations; once the batch has drafted some, the database is
    stopped for `stop_s` seconds and started again; then everything is left to end on its own (nothing resumed)."""
    created = client.post("/drafts", json={"graph_id": "demo", "policy": policy, "prospects": prospects(count),
                                           "seed": seed})
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch_id"]
    evaluation_ids = []
    for _ in range(evaluations):
        answer = client.post("/evaluations", json={"graph_id": "demo", "policies": [policy]})
        assert answer.status_code == 202, answer.text
        evaluation_ids.append(answer.json()["evaluation_id"])
    before = wait_for(lambda: (b := _get(client, f"/draft-batches/{batch_id}")) and b["completed"] > 0
                      and b["completed"], timeout=timeout, interval=0.1)
    stopped = time.monotonic()
    cluster.stop()
    time.sleep(stop_s)
    cluster.start()
    back = time.monotonic()
    batch = ended(client, f"/draft-batches/{batch_id}", timeout)
    statuses = [ended(client, f"/evaluations/{e}", timeout)["status"] for e in evaluation_ids]
    recovered = time.monotonic() - back
    drafts = client.get(f"/draft-batches/{batch_id}/drafts", params={"limit": 1000}).json()["data"]
    refs = {o["ref"] for o in client.get(f"/draft-batches/{batch_id}/outcomes").json()["data"]}
    return OutageRound(batch_status=batch["status"], prospects=count, completed=batch["completed"],
                       emails=sum(1 for d in drafts if d["email"]), distinct_refs=len(refs), drafted_before_stop=before,
                       evaluations=statuses, stopped_s=round(back - stopped, 1), recovered_s=round(recovered, 1))
