"""A draft batch runs durably on the workers: kill -9 the service mid-batch, start it again, and every prospect is
drafted exactly once (one email, one ref each), on SQLite and PostgreSQL."""

import pytest

from tests.support import (
    FreshPostgresDatabase,
    Server,
    process_gone,
    require_postgres,
    run_workers,
    wait_for,
    wait_for_status,
)

pytestmark = pytest.mark.slow

RUN = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo", "scn-healthcare-cto"], "max_turns": 4,
       "feedback_source": "none"}
PROSPECTS = [{"name": f"Prospect {n}", "company": f"Company {n}", "role": "CFO" if n % 2 else "CTO",
              "industry": "saas" if n % 2 else "healthcare",
              "pains": ["cloud invoices surprise us" if n % 2 else "PHI in analytics tools"]} for n in range(300)]


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/data/codreamer.sqlite"
        return
    require_postgres()
    database = FreshPostgresDatabase()
    yield database.url
    database.drop()


def test_a_batch_killed_mid_way_drafts_every_prospect_exactly_once(tmp_path, database_url):
    env = {"DATABASE_URL": database_url, "EXECUTOR_ID": "draft-crash-worker"}
    server = Server(tmp_path, env).start()
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json=RUN).json()["run_id"]
            assert wait_for_status(client, run_id, timeout=240)["status"] == "succeeded"
            assert client.put("/graphs/demo/deployment", json={"policy": run_id}).status_code == 200
            batch_id = client.post("/drafts", json={"graph_id": "demo", "prospects": PROSPECTS}).json()["batch_id"]
            wait_for(lambda: client.get(f"/draft-batches/{batch_id}").json()["completed"] > 0, timeout=240, interval=0.05)
        workers = run_workers(server.process.pid)
        server.kill()
        assert workers and wait_for(lambda: all(process_gone(w) for w in workers), timeout=30)
        server = Server(tmp_path, env).start()
        with server.client() as client:
            assert client.get(f"/draft-batches/{batch_id}").json()["completed"] < len(PROSPECTS)  # killed mid-batch
            batch = wait_for(lambda: (b := client.get(f"/draft-batches/{batch_id}").json())["status"] == "succeeded" and b,
                             timeout=300)
            assert batch["completed"] == len(PROSPECTS)
            drafts = client.get(f"/draft-batches/{batch_id}/drafts", params={"limit": 1000}).json()["data"]
            assert [d["prospect"]["name"] for d in drafts] == [p["name"] for p in PROSPECTS]
            assert all(d["email"] for d in drafts)
            refs = [o["ref"] for o in client.get(f"/draft-batches/{batch_id}/outcomes").json()["data"]]
            assert sorted(refs) == sorted(d["email"]["ref"] for d in drafts) and len(set(refs)) == len(PROSPECTS)
    finally:
        server.stop()
