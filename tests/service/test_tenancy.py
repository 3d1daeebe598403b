"""Tenants: each API key's tenant sees only its own runs, graphs and idempotency keys; secrets stay secret."""

import hashlib

import pytest

from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.main import create_app
from tests.support import connect, lifespan

BOB_KEY = "bob-secret-key"
KEYS = f"alice:alice-key,bob:sha256:{hashlib.sha256(BOB_KEY.encode()).hexdigest()},lonely-key"
BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 2}


@pytest.fixture(scope="module")
async def clients(tmp_path_factory):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path_factory.mktemp('tenants')}/db.sqlite",
                        environment="test", api_keys=KEYS, secret_key="test-secret-key-for-tenants", webhook_allow_private=True)
    app = create_app(settings)
    async with lifespan(app), connect(app) as alice, connect(app) as bob:
        alice.headers["Authorization"] = "Bearer alice-key"
        bob.headers["Authorization"] = f"Bearer {BOB_KEY}"
        yield alice, bob


async def test_another_tenant_sees_nothing(clients):
    alice, bob = clients
    created = await alice.post("/learn-loop", json=BODY, headers={"Idempotency-Key": "same-key"})
    assert created.status_code == 202
    run_id = created.json()["run_id"]
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/iterations", f"/runs/{run_id}/events",
                 f"/runs/{run_id}/node-scores", f"/runs/{run_id}/webhook-deliveries"):
        assert (await bob.get(path)).status_code == 404, path
        assert (await alice.get(path)).status_code == 200, path
    assert (await bob.post(f"/runs/{run_id}/cancel")).status_code == 404
    assert run_id not in [r["run_id"] for r in (await bob.get("/runs")).json()["data"]]
    assert run_id in [r["run_id"] for r in (await alice.get("/runs")).json()["data"]]
    # The same Idempotency-Key in another tenant is another key: a new run, not alice's.
    theirs = await bob.post("/learn-loop", json=BODY, headers={"Idempotency-Key": "same-key"})
    assert theirs.status_code == 202 and theirs.json()["run_id"] != run_id


async def test_graphs_belong_to_their_tenant_and_the_demo_is_shared(clients):
    alice, bob = clients
    document = demo_document().model_dump() | {"id": "alice-graph", "name": "Alice's graph"}
    assert (await alice.post("/graphs", json=document)).status_code == 201
    assert (await bob.get("/graphs/alice-graph/scenarios")).status_code == 404
    assert "alice-graph" not in [g["id"] for g in (await bob.get("/graphs")).json()["data"]]
    assert (await bob.post("/learn-loop", json=BODY | {"graph_id": "alice-graph"})).status_code == 422
    assert (await bob.post("/graphs", json=document)).status_code == 409  # graph ids are one namespace
    assert "demo" in [g["id"] for g in (await bob.get("/graphs")).json()["data"]]


async def test_webhook_secrets_are_shown_once_and_urls_redacted(clients):
    alice, _ = clients
    refused = await alice.post("/learn-loop", json=BODY | {"webhook_url": "http://user:s3cr3t@127.0.0.1:9/hooks"})
    assert refused.status_code == 422 and "credentials" in refused.text and "s3cr3t" not in refused.json()["detail"][0]["msg"]
    body = BODY | {"webhook_url": "http://127.0.0.1:9/hooks?token=abc"}
    first = await alice.post("/learn-loop", json=body, headers={"Idempotency-Key": "with-secret"})
    replay = await alice.post("/learn-loop", json=body, headers={"Idempotency-Key": "with-secret"})
    assert first.json()["webhook_secret"].startswith("whsec_")
    assert replay.status_code == 200 and replay.json()["webhook_secret"] is None
    assert "shown once" in replay.json()["webhook_secret_note"]
    run = (await alice.get(f"/runs/{first.json()['run_id']}")).json()
    assert run["config"]["webhook_url"] == "http://127.0.0.1:9/hooks?***"
    assert "abc" not in str(run)
