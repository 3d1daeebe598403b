"""Replacing, deleting and reading whole graphs; deleting and exporting runs (in process)."""

import asyncio
import gc
import json
import sqlite3
from pathlib import Path

import pytest
from dbos import DBOS

from app.backends.embedded.models import PolicyCheckpoint
from app.backends.specs import model_name
from app.engine.executor import current
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.main import create_app
from app.runs import workflow
from tests.standins import Receiver
from tests.support import connect, finished, lifespan

SCENARIO = demo_document().scenarios[0].id
BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [SCENARIO], "max_turns": 2}
RUN_TABLES = ("iterations", "trajectories", "node_scores", "node_score_changes", "idempotency_keys",
              "events", "webhook_deliveries", "webhook_attempts")
SUBJECT_TABLES = ("events", "webhook_deliveries", "webhook_attempts")  # no run_id: by subject, or by event


@pytest.fixture(scope="module")
async def env(tmp_path_factory):
    path = tmp_path_factory.mktemp("lifecycle") / "db.sqlite"
    # ART's folders in a directory of their own: another test's service, on another database, clears the folders of
    # runs it does not know from a directory it shares (its housekeeping of deleted runs' files)
    settings = Settings(_env_file=None, database_url=f"sqlite:///{path}", environment="test",
                        art_path=str(tmp_path_factory.mktemp("art")), webhook_allow_private=True,
                        webhook_retry_schedule=[0.2, 0.2])
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        yield client, path, settings




async def test_start_up_keeps_what_it_built_out_of_full_collections(tmp_path):
    """A full collection walking the modules, schemas and graph a service loads paused requests 100-470 ms."""
    gc.unfreeze()
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test")
    async with lifespan(create_app(settings)):
        assert gc.get_freeze_count() > 10_000


def small_graph(graph_id: str, name: str = "Small") -> dict:
    demo = demo_document().model_dump()
    return demo | {"id": graph_id, "name": name}


async def test_get_graph_returns_the_whole_document(env):
    client, _, _ = env
    demo = (await client.get("/graphs/demo")).json()
    assert demo == json.loads(demo_document().model_dump_json()) | {"nodes": demo["nodes"]}
    assert sorted(n["id"] for n in demo["nodes"]) == sorted(n.id for n in demo_document().nodes)
    assert demo["edges"] and demo["scenarios"]
    assert (await client.get("/graphs/nope")).status_code == 404


async def test_replace_and_delete_a_graph(env):
    client, _, _ = env
    assert (await client.post("/graphs", json=small_graph("mine"))).status_code == 201
    document = small_graph("mine", "Renamed")
    document["nodes"][0]["title"] = "A new title"
    replaced = await client.put("/graphs/mine", json=document)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["name"] == "Renamed"
    got = (await client.get("/graphs/mine")).json()
    assert got["name"] == "Renamed"
    assert {n["id"]: n["title"] for n in got["nodes"]}[document["nodes"][0]["id"]] == "A new title"
    # same validation as an upload; the id must be the path's
    broken = small_graph("mine") | {"edges": [{"source": "ghost", "target": "ghost", "relation": "x"}]}
    assert (await client.put("/graphs/mine", json=broken)).status_code == 422
    assert (await client.put("/graphs/mine", json=small_graph("other"))).status_code == 422
    assert (await client.put("/graphs/nope", json=small_graph("nope"))).status_code == 404
    # the demo is shared: nobody replaces or deletes it
    assert (await client.put("/graphs/demo", json=demo_document().model_dump())).status_code == 409
    assert (await client.delete("/graphs/demo")).status_code == 409
    assert (await client.get("/graphs/demo")).status_code == 200
    assert (await client.delete("/graphs/mine")).status_code == 204
    assert (await client.get("/graphs/mine")).status_code == 404
    assert (await client.delete("/graphs/mine")).status_code == 404
    assert "mine" not in [g["id"] for g in (await client.get("/graphs")).json()["data"]]


async def test_a_graph_in_use_is_refused_and_a_finished_run_survives_a_replacement(env):
    client, path, _ = env
    assert (await client.post("/graphs", json=small_graph("busy"))).status_code == 201
    created = await client.post("/learn-loop", json=BODY | {"graph_id": "busy"})
    assert created.status_code == 202
    run_id = created.json()["run_id"]
    # queued or running: no replacement, no deletion, and the run itself cannot be deleted
    assert (await client.put("/graphs/busy", json=small_graph("busy", "Changed"))).status_code == 409
    assert (await client.delete("/graphs/busy")).status_code == 409
    assert (await client.delete(f"/runs/{run_id}")).status_code == 409
    assert (await finished(client, run_id))["status"] == "succeeded"
    # finished: the graph may be replaced (here without its first node); the run's views still work
    document = small_graph("busy", "Changed")
    gone = document["nodes"][0]["id"]
    document["edges"] = [e for e in document["edges"] if gone not in (e["source"], e["target"])]
    document["nodes"] = document["nodes"][1:]
    for scenario in document["scenarios"]:
        scenario["seed_nodes"] = [n for n in scenario["seed_nodes"] if n != gone] or [document["nodes"][0]["id"]]
    assert (await client.put("/graphs/busy", json=document)).status_code == 200
    scores = (await client.get(f"/runs/{run_id}/node-scores")).json()["scores"]
    assert gone not in scores and set(scores) == {n["id"] for n in document["nodes"]}
    assert (await client.get(f"/runs/{run_id}/iterations/1")).status_code == 200
    # a run keeps the graph it started with: a failed run on a since-replaced graph is not resumed
    with sqlite3.connect(path, timeout=60) as db:  # the app may be writing (the default waits 5 s)
        db.execute("UPDATE runs SET status = 'failed' WHERE id = ?", (run_id,))
    refused = await client.post(f"/runs/{run_id}/resume")
    assert refused.status_code == 409 and "replaced" in refused.json()["detail"]
    with sqlite3.connect(path, timeout=60) as db:  # the app may be writing (the default waits 5 s)
        db.execute("UPDATE runs SET status = 'succeeded' WHERE id = ?", (run_id,))
    # a finished run still refers to the graph: deleting it is refused until the run is deleted
    assert (await client.delete("/graphs/busy")).status_code == 409
    assert (await client.delete(f"/runs/{run_id}")).status_code == 204
    assert (await client.delete("/graphs/busy")).status_code == 204


async def test_export_is_json_lines_with_the_run_first(env):
    client, _, _ = env
    run_id = (await client.post("/learn-loop", json=BODY)).json()["run_id"]
    await finished(client, run_id)
    response = await client.get(f"/runs/{run_id}/export")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert lines[0]["type"] == "run" and lines[0]["run_id"] == run_id and lines[0]["config"]["iterations"] == 1
    assert [line["iteration"] for line in lines[1:]] == [0, 1]
    assert all(line["type"] == "iteration" for line in lines[1:])
    assert lines[2]["trajectories"] and lines[2]["rewards"]["count"] == 2
    assert (await client.get("/runs/run_nope/export")).status_code == 404


async def test_run_reads_answer_304_while_nothing_changed_and_a_new_tag_once_it_did(env):
    client, _, _ = env
    run_id = (await client.post("/learn-loop", json=BODY)).json()["run_id"]
    early = (await client.get(f"/runs/{run_id}")).headers["etag"]
    await finished(client, run_id)
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/iterations", f"/runs/{run_id}/iterations/1", "/runs?limit=5"):
        first = await client.get(path)
        tag = first.headers["etag"]
        assert first.status_code == 200 and tag.startswith('W/"') and first.headers["cache-control"] == "private, no-cache"
        assert tag != early  # the run finished since: every read of it has a new version
        again = await client.get(path, headers={"If-None-Match": tag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == tag
        listed = await client.get(path, headers={"If-None-Match": f'W/"other", {tag.removeprefix("W/")}'})
        assert listed.status_code == 304  # any tag of a list; weak comparison
        stale = await client.get(path, headers={"If-None-Match": early})
        assert stale.status_code == 200 and stale.json() == first.json()
    assert (await client.get("/runs/run_nope", headers={"If-None-Match": early})).status_code == 404
    # A new run changes the list's version (and no other run's); once it moves on, its own view has a new one too.
    listed = await client.get("/runs?limit=5")
    view = await client.get(f"/runs/{run_id}")
    newer = (await client.post("/learn-loop", json=BODY)).json()["run_id"]
    relisted = await client.get("/runs?limit=5", headers={"If-None-Match": listed.headers["etag"]})
    assert relisted.status_code == 200 and relisted.json()["data"][0]["run_id"] == newer
    assert (await client.get(f"/runs/{run_id}", headers={"If-None-Match": view.headers["etag"]})).status_code == 304
    queued = await client.get(f"/runs/{newer}")
    await finished(client, newer)
    done = await client.get(f"/runs/{newer}", headers={"If-None-Match": queued.headers["etag"]})
    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    missing = await client.get(f"/runs/{run_id}/iterations/7", headers={"If-None-Match": "*"})
    assert missing.status_code == 404  # "*" is any version at all: no 304 for what is not there


async def test_delete_run_removes_everything_it_owns(env):
    client, path, settings = env
    receiver = Receiver()
    try:
        created = await client.post("/learn-loop", json=BODY | {"webhook_url": receiver.url}, headers={"Idempotency-Key": "k1"})
        run_id = created.json()["run_id"]
        await finished(client, run_id)
        for _ in range(200):
            deliveries = (await client.get(f"/runs/{run_id}/webhook-deliveries")).json()["data"]
            if deliveries and all(d["status"] == "delivered" for d in deliveries):
                break
            await asyncio.sleep(0.1)
    finally:
        receiver.close()
    other = (await client.post("/learn-loop", json=BODY)).json()["run_id"]
    await finished(client, other)

    def counts(run: str, event_ids: list[str]) -> dict:
        with sqlite3.connect(path, timeout=60) as db:  # the app may be writing (the default waits 5 s)
            found = {table: db.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", (run,)).fetchone()[0]
                     for table in RUN_TABLES if table not in SUBJECT_TABLES}
            for table in ("events", "webhook_deliveries"):  # a run's by subject
                found[table] = db.execute(f"SELECT count(*) FROM {table} WHERE subject_kind = 'run' AND subject_id = ?",
                                          (run,)).fetchone()[0]
            marks = ",".join("?" * len(event_ids))
            found["webhook_attempts"] = db.execute(
                f"SELECT count(*) FROM webhook_attempts WHERE event_id IN ({marks})", event_ids).fetchone()[0]
            found["runs"] = db.execute("SELECT count(*) FROM runs WHERE id = ?", (run,)).fetchone()[0]
            found["policy_checkpoints"] = db.execute(
                "SELECT count(*) FROM policy_checkpoints WHERE model_name = ?", (f"{settings.art_model_name}-{run}",)
            ).fetchone()[0]
        return found

    def event_ids(run: str) -> list[str]:
        with sqlite3.connect(path, timeout=60) as db:  # the app may be writing (the default waits 5 s)
            return [row[0] for row in db.execute("SELECT id FROM events WHERE subject_kind = 'run' AND subject_id = ?",
                                                 (run,))]

    ids, other_ids = event_ids(run_id), event_ids(other)
    before = counts(run_id, ids)
    assert all(before[t] for t in ("runs", "iterations", "trajectories", "events", "webhook_deliveries",
                                   "webhook_attempts", "idempotency_keys", "policy_checkpoints")), before
    other_before = counts(other, other_ids)
    art_folder = Path(settings.art_path) / settings.art_project / "models" / model_name(settings, run_id)
    assert (art_folder / "history.jsonl").exists()  # ART logged the run's training there
    assert (await client.delete(f"/runs/{run_id}")).status_code == 204
    assert set(counts(run_id, ids).values()) == {0}, counts(run_id, ids)
    assert not art_folder.exists()
    assert counts(other, other_ids) == other_before  # another run is untouched
    assert (await client.get(f"/runs/{run_id}")).status_code == 404
    assert (await client.delete(f"/runs/{run_id}")).status_code == 404


async def test_a_run_deleted_as_its_workflow_lets_go_leaves_nothing_behind(env):
    """Deleted the moment it succeeded, while its workflow still lets go of it: the workflow ends cleanly,
    and what a step in flight wrote for nobody (a policy checkpoint, ART's log folder) goes too."""
    client, path, settings = env
    run_id = (await client.post("/learn-loop", json=BODY)).json()["run_id"]
    while (await client.get(f"/runs/{run_id}")).json()["status"] != "succeeded":
        await asyncio.sleep(0.01)
    assert (await client.delete(f"/runs/{run_id}")).status_code == 204
    for _ in range(600):
        status = (await DBOS.get_workflow_status_async(run_id)).status
        if status != "PENDING":
            break
        await asyncio.sleep(0.05)
    assert status == "SUCCESS"

    name = model_name(settings, run_id)
    folder = Path(settings.art_path) / settings.art_project / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "history.jsonl").write_text("{}\n")
    async with current().services.db.transaction() as session:  # as a train step in flight would write it
        session.add(PolicyCheckpoint(model_name=name, step=3, data=b"x", metrics={}))
    await workflow.let_go(run_id)
    with sqlite3.connect(path, timeout=60) as db:  # the app may be writing (the default waits 5 s)
        assert db.execute("SELECT count(*) FROM policy_checkpoints WHERE model_name = ?", (name,)).fetchone()[0] == 0
    assert not folder.exists()


async def test_readiness_reports_the_model_server_down(env):
    """A worker's model server that keeps dying is not ready, and says why (it was never restarted and /readyz said ready)."""
    client, _, _ = env
    services, executor = current().services, current()
    assert executor.embedded.problem in services.health  # the worker's model server is checked
    assert (await client.get("/readyz")).json() == {"status": "ready"}
    services.health.append(lambda: "the embedded model server exited 5 times in a minute; it is restarted in 8 s")
    try:
        answer = await client.get("/readyz")
    finally:
        services.health.pop()
    assert answer.status_code == 503 and "restarted in 8 s" in answer.json()["detail"]
