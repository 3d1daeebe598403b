"""Live events over Server-Sent Events: `GET /runs/{id}/events` with `Accept: text/event-stream`."""

import json
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from app.knowledge_graph.service import demo_document
from tests.support import FreshPostgresDatabase, Server, events, require_postgres, wait_for_status

KEY = "stream-key"
SCENARIO = demo_document().scenarios[0].id
SSE = {"Accept": "text/event-stream"}


def read_sse(response: httpx.Response, stop_after: int | None = None) -> tuple[list[dict], bool]:
    """The events of a stream as {id, event, data}, and whether the server ended it (False: we left after `stop_after`)."""
    received, fields = [], {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                received.append({"id": fields.get("id"), "event": fields.get("event"), "data": json.loads(fields["data"])})
                if stop_after is not None and len(received) == stop_after:
                    return received, False
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    return received, True


@pytest.fixture(scope="module", params=["sqlite", "postgresql-api-and-worker"])
def server(request, tmp_path_factory):
    """SQLite: one `codreamer serve`. PostgreSQL: an API-only server and a separate `codreamer worker`."""
    workdir = tmp_path_factory.mktemp("stream")
    database = worker = None
    env = {"API_KEYS": KEY, "EXECUTOR_ID": f"stream-{uuid.uuid4().hex[:6]}"}
    if request.param == "sqlite":
        env["DATABASE_URL"] = f"sqlite:///{workdir}/data/codreamer.sqlite"
    else:
        require_postgres()
        database = FreshPostgresDatabase()
        env |= {"DATABASE_URL": database.url, "RUN_WORKER": "false"}
    server = Server(workdir, env, api_key=KEY).start()
    if database:
        worker = subprocess.Popen([sys.executable, "-m", "app", "worker"], cwd=workdir,
                                  env=server.env | {"EXECUTOR_ID": "stream-worker"},
                                  stdout=(workdir / "worker.log").open("ab"), stderr=subprocess.STDOUT)
    yield server
    if worker:
        worker.terminate()
        worker.wait(timeout=30)
    server.stop()
    if database:
        database.drop()


@pytest.mark.slow
def test_stream_resumes_after_a_disconnect_without_gaps_or_duplicates(server):
    with server.client() as client:
        created = client.post("/learn-loop", json={"iterations": 3, "rollouts_per_group": 2, "scenario_ids": [SCENARIO]})
        assert created.status_code == 202, created.text
        run_id = created.json()["run_id"]
        url = f"/runs/{run_id}/events"

        with client.stream("GET", url, headers=SSE) as response:  # opened while the run is queued
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            first, ended = read_sse(response, stop_after=2)
        assert not ended and [e["id"] for e in first] == ["1", "2"]

        with client.stream("GET", url, headers=SSE | {"Last-Event-ID": first[-1]["id"]}) as response:
            assert response.status_code == 200
            rest, ended = read_sse(response)
        assert ended, "the server closes the stream after the terminal event"

        run = wait_for_status(client, run_id)
        assert run["status"] == "succeeded", run
        logged = events(client, run_id)
        streamed = first + rest
        assert [(e["id"], e["event"], e["data"]) for e in streamed] == [(str(e["seq"]), e["type"], e["data"]) for e in logged]
        assert [e["event"] for e in streamed] == ["run.started"] + ["iteration.completed"] * 4 + ["run.succeeded"]

        # ?after= resumes too; Last-Event-ID wins over it
        with client.stream("GET", url, params={"after": 4}, headers=SSE) as response:
            assert [e["id"] for e in read_sse(response)[0]] == ["5", "6"]
        with client.stream("GET", url, params={"after": 1}, headers=SSE | {"Last-Event-ID": "5"}) as response:
            assert [e["id"] for e in read_sse(response)[0]] == ["6"]
        # after the terminal event of a finished run: 204, which tells EventSource to stop reconnecting
        assert client.get(url, headers=SSE | {"Last-Event-ID": "6"}).status_code == 204


@pytest.mark.slow
def test_negotiation_errors_and_auth_over_http(server):
    with server.client() as client:
        run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [SCENARIO]}).json()["run_id"]
        wait_for_status(client, run_id)
        url = f"/runs/{run_id}/events"
        page = client.get(url, headers={"Accept": "application/json"})
        assert page.headers["content-type"] == "application/json" and len(page.json()["data"]) == 4
        assert client.get(url).json() == page.json()
        assert client.get(url, params={"limit": 2}, headers={"Last-Event-ID": "1"}).json()["data"][0]["seq"] == 2

        unknown = client.get("/runs/run_nope/events", headers=SSE)
        assert unknown.status_code == 404 and unknown.json() == {"detail": "run 'run_nope' not found"}
        assert client.get(url, headers=SSE | {"Last-Event-ID": "x"}).status_code == 422
        assert client.get(url, headers=SSE, params={"after": -1}).status_code == 422
    refused = httpx.get(server.url + url, headers=SSE, timeout=10)
    assert refused.status_code == 401


@pytest.mark.slow
def test_a_cancelled_run_ends_its_stream(server):
    with server.client() as client:
        run_id = client.post("/learn-loop", json={"iterations": 50, "rollouts_per_group": 2, "scenario_ids": [SCENARIO]}).json()["run_id"]
        started = time.monotonic()
        with client.stream("GET", f"/runs/{run_id}/events", headers=SSE) as response:
            received = []
            for line in response.iter_lines():
                if line.startswith("event: "):
                    received.append(line.removeprefix("event: "))
                    if received == ["run.started"]:
                        assert client.post(f"/runs/{run_id}/cancel").status_code == 202
        assert received[0] == "run.started" and received[-1] == "run.cancelled"
        assert time.monotonic() - started < 60
