"""The contract's API behaviour against a real `codreamer serve`: auth, validation, idempotency, cancel, graphs."""

import time

import httpx
import pytest

from app.knowledge_graph.service import demo_document
from tests.support import Server, events, wait_for, wait_for_status

pytestmark = pytest.mark.slow
KEY = "test-key-2"
SCENARIO = demo_document().scenarios[0].id


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("api")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "API_KEYS": f"test-key-1, {KEY}"}, api_key=KEY)
    yield server.start()
    server.stop()


@pytest.fixture
def client(server):
    with server.client() as client:
        yield client


def test_auth(server, client):
    with httpx.Client(base_url=server.url) as anonymous:
        for path in ("/runs", "/graphs", "/runs/x/events"):
            response = anonymous.get(path)
            assert response.status_code == 401 and "Bearer" in response.json()["detail"]
        assert anonymous.post("/learn-loop", json={}).status_code == 401
        assert anonymous.get("/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert anonymous.get("/runs", headers={"Authorization": "Basic dGVzdA=="}).status_code == 401
        assert anonymous.get("/runs", headers={"Authorization": "Bearer test-key-1"}).status_code == 200
        for path in ("/healthz", "/readyz", "/docs", "/openapi.json"):
            assert anonymous.get(path).status_code == 200, path
    assert client.get("/runs").status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"iterations": 0}, "iterations"), ({"iterations": 201}, "iterations"), ({"iterations": "many"}, "iterations"),
        ({"rollouts_per_group": 1}, "rollouts_per_group"), ({"rollouts_per_group": 65}, "rollouts_per_group"),
        ({"max_turns": 0}, "max_turns"), ({"max_turns": 33}, "max_turns"),
        ({"learning_rate": 0}, "learning_rate"), ({"learning_rate": -1e-5}, "learning_rate"),
        ({"feedback_weight": -0.1}, "feedback_weight"), ({"feedback_weight": 1.5}, "feedback_weight"),
        ({"top_fraction": 0}, "top_fraction"), ({"top_fraction": 1.01}, "top_fraction"),
        ({"seed": "x"}, "seed"), ({"seed": 1e40}, "seed"), ({"seed": 2**80}, "seed"), ({"iterations": -5}, "iterations"),
        ({"iterations": 10**30}, "iterations"), ({"learning_rate": 1e308}, "learning_rate"), ({"max_turns": 2.5}, "max_turns"),
        ({"webhook_url": "ftp://example.com/x"}, "webhook_url"), ({"webhook_url": "not a url"}, "webhook_url"),
        ({"webhook_url": "https://user:pass@example.com/hooks"}, "webhook_url"), ({"webhook_url": "https://user@example.com/x"}, "webhook_url"),
        ({"backend": "gpu"}, "backend"), ({"graph_id": "nope"}, "graph_id"),
        ({"scenario_ids": []}, "scenario_ids"), ({"scenario_ids": ["nope"]}, "scenario_ids"),
        ({"scenario_ids": [SCENARIO, SCENARIO]}, "scenario_ids"), ({"target_scenario_id": "nope"}, "target_scenario_id"),
        ({"colour": "blue"}, "colour"), ({"iterations": None}, "iterations"),
    ],
)
def test_each_malformed_field_is_a_422_naming_it(client, body, field):
    response = client.post("/learn-loop", json=body)
    assert response.status_code == 422, response.text
    assert any(field in [str(p) for p in error["loc"]] for error in response.json()["detail"]), response.text


def test_malformed_bodies_are_4xx(client):
    for content in (b"{not json", b"[1, 2]", b'"text"', '{"seed": "\u00e9\u6f22"}'.encode()):
        response = client.post("/learn-loop", content=content, headers={"content-type": "application/json"})
        assert response.status_code == 422, content
    huge = b'{"scenario_ids": [' + b'"x",' * 400_000 + b'"x"]}'
    assert client.post("/learn-loop", content=huge, headers={"content-type": "application/json"}).status_code == 413
    deep = b'{"a": ' * 5000 + b"1" + b"}" * 5000
    response = client.post("/learn-loop", content=deep, headers={"content-type": "application/json"})
    assert response.status_code in (400, 422) and response.json()["detail"]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/hook", "http://localhost:8080/hook", "http://10.1.2.3/", "http://169.254.169.254/latest",
    "http://[::1]/", "http://100.64.0.1/", "http://224.0.0.1/", "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::1]/", "http://192.0.0.192/", "http://[::ffff:127.0.0.1]/", "http://2130706433/",
    "http://0.0.0.0/", "https://192.168.1.10/",
])
def test_webhook_urls_that_reach_inside_are_refused(client, url):
    response = client.post("/learn-loop", json={"webhook_url": url})
    assert response.status_code == 422, (url, response.text)
    assert "WEBHOOK_ALLOW_PRIVATE" in response.json()["detail"][0]["msg"]


def test_idempotency(client):
    body = {"iterations": 1, "scenario_ids": [SCENARIO], "rollouts_per_group": 2}
    first = client.post("/learn-loop", json=body, headers={"Idempotency-Key": "order-42"})
    again = client.post("/learn-loop", json=body, headers={"Idempotency-Key": "order-42"})
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["run_id"] == first.json()["run_id"]
    other = client.post("/learn-loop", json=body | {"seed": 9}, headers={"Idempotency-Key": "order-42"})
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["detail"]
    fresh = client.post("/learn-loop", json=body, headers={"Idempotency-Key": "order-43"})
    assert fresh.json()["run_id"] != first.json()["run_id"]
    wait_for_status(client, first.json()["run_id"])
    wait_for_status(client, fresh.json()["run_id"])


def test_cancel(client):
    run_id = client.post("/learn-loop", json={"iterations": 200, "scenario_ids": [SCENARIO], "rollouts_per_group": 2}).json()["run_id"]
    wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] >= 1, timeout=60)
    cancelled = client.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    recorded = len(client.get(f"/runs/{run_id}/iterations").json()["data"])
    time.sleep(3)  # several steps' worth: nothing more may be recorded
    assert len(client.get(f"/runs/{run_id}/iterations").json()["data"]) == recorded
    run = client.get(f"/runs/{run_id}").json()
    assert run["status"] == "cancelled" and run["final_email"] is None and run["finished_at"]
    assert events(client, run_id)[-1]["type"] == "run.cancelled"
    assert client.post(f"/runs/{run_id}/cancel").status_code == 409
    assert client.post("/runs/run_unknown/cancel").status_code == 404


def test_unknown_ids_are_404(client):
    for path in ("/runs/nope", "/runs/nope/iterations", "/runs/nope/iterations/0", "/runs/nope/events",
                 "/runs/nope/node-scores", "/runs/nope/webhook-deliveries", "/graphs/nope/nodes", "/graphs/nope/scenarios",
                 "/graphs/demo/nodes/nope"):
        response = client.get(path)
        assert response.status_code == 404 and "not found" in response.json()["detail"], path
    assert client.get("/runs/nope/iterations/x").status_code == 422


def test_listing_runs_pages_newest_first(client):
    ids = [client.post("/learn-loop", json={"iterations": 1, "scenario_ids": [SCENARIO], "rollouts_per_group": 2}).json()["run_id"] for _ in range(3)]
    page = client.get("/runs", params={"limit": 2}).json()
    assert [r["run_id"] for r in page["data"]] == ids[::-1][:2] and page["has_more"]
    rest = client.get("/runs", params={"limit": 2, "after": page["data"][-1]["run_id"]}).json()
    assert rest["data"][0]["run_id"] == ids[0]
    for run_id in ids:
        wait_for_status(client, run_id)
    succeeded = client.get("/runs", params={"status": "succeeded", "limit": 100}).json()["data"]
    assert set(ids) <= {r["run_id"] for r in succeeded} and {r["status"] for r in succeeded} == {"succeeded"}
    assert client.get("/runs", params={"limit": 0}).status_code == 422
    assert client.get("/runs", params={"status": "sleeping"}).status_code == 422
    page = client.get(f"/runs/{ids[0]}/events", params={"after": 1, "limit": 2}).json()
    assert [e["seq"] for e in page["data"]] == [2, 3] and page["has_more"]


def small_graph(graph_id: str, **changes) -> dict:
    doc = {
        "id": graph_id, "name": "Tiny",
        "nodes": [{"id": f"n{i}", "type": "fact" if i % 2 else "product", "title": f"Node {i}", "text": f"Fact number {i} about uptime."}
                  for i in range(5)],
        "edges": [{"source": "n0", "target": f"n{i}", "relation": "has"} for i in range(1, 5)],
        "scenarios": [{"id": "s1", "goal": "Book a call", "seed_nodes": ["n0"],
                       "prospect": {"name": "Ada L", "role": "CTO", "company": "Acme", "industry": "retail", "pains": ["uptime"]}}],
    }
    return doc | changes


def test_graphs(client):
    listed = client.get("/graphs").json()["data"]
    assert {"id": "demo", "name": demo_document().name, "nodes": len(demo_document().nodes),
            "edges": len(demo_document().edges), "scenarios": len(demo_document().scenarios)} in listed
    created = client.post("/graphs", json=small_graph("tiny"))
    assert created.status_code == 201 and created.json()["nodes"] == 5
    assert client.post("/graphs", json=small_graph("tiny")).status_code == 409
    bad = client.post("/graphs", json=small_graph("tiny2", edges=[{"source": "n0", "target": "ghost", "relation": "r"}]))
    assert bad.status_code == 422 and "ghost" in bad.text
    assert client.get("/graphs/tiny2/nodes").status_code == 404  # nothing was written
    page = client.get("/graphs/tiny/nodes", params={"limit": 2}).json()
    assert [n["id"] for n in page["data"]] == ["n0", "n1"] and page["has_more"]
    assert [n["id"] for n in client.get("/graphs/tiny/nodes", params={"after": "n3"}).json()["data"]] == ["n4"]
    assert {n["type"] for n in client.get("/graphs/tiny/nodes", params={"type": "fact"}).json()["data"]} == {"fact"}
    node = client.get("/graphs/tiny/nodes/n0").json()
    assert node["text"].startswith("Fact") and {"id": "n1", "relation": "has", "direction": "out"} in node["neighbors"]
    assert client.get("/graphs/tiny/nodes/n2").json()["neighbors"] == [{"id": "n0", "relation": "has", "direction": "in"}]
    assert client.get("/graphs/tiny/scenarios").json()["data"][0]["id"] == "s1"

    run_id = client.post("/learn-loop", json={"graph_id": "tiny", "iterations": 2, "rollouts_per_group": 2}).json()["run_id"]
    run = wait_for_status(client, run_id)
    assert run["status"] == "succeeded", run
    assert set(run["final_email"]["citations"]) <= {f"n{i}" for i in range(5)}
    detail = client.get(f"/runs/{run_id}/iterations/1").json()
    assert all(t["feedback_score"] is None for t in detail["trajectories"])  # uploaded graphs: judge only


def test_unicode_in_every_string_field_round_trips(client):
    text = "Ünïcödé — 漢字 — עברית — 🚀 — \u200b"
    doc = small_graph("unicode-graph")
    for node in doc["nodes"]:
        node |= {"type": f"тип {text}"[:64], "title": f"{text} {node['id']}", "text": f"{text}. Fact.", "tags": [text[:60], "ok"]}
    doc["edges"][0]["relation"] = "связь 🚀"
    doc["scenarios"][0] |= {"goal": text, "prospect": {"name": "Zoë Ångström", "role": "CTO 🚀", "company": "Ünï AG",
                                                       "industry": "漢字", "pains": [text]}}
    doc["name"] = text
    assert client.post("/graphs", json=doc).status_code == 201
    node = client.get("/graphs/unicode-graph/nodes/n1").json()
    assert node["title"] == f"{text} n1" and node["tags"][0] == text[:60]
    scenario = client.get("/graphs/unicode-graph/scenarios").json()["data"][0]
    assert scenario["prospect"]["name"] == "Zoë Ångström"
    run_id = client.post("/learn-loop", json={"graph_id": "unicode-graph", "iterations": 1, "rollouts_per_group": 2}).json()["run_id"]
    assert wait_for_status(client, run_id)["status"] == "succeeded"


def test_strings_a_database_cannot_hold_and_non_ascii_ids_are_422(client):
    nul = small_graph("nul-graph")
    nul["nodes"][0]["text"] = "a\x00b"
    response = client.post("/graphs", json=nul)
    assert response.status_code == 422 and "text" in str(response.json()["detail"][0]["loc"])
    emoji_id = small_graph("🚀-graph")
    assert client.post("/graphs", json=emoji_id).status_code == 422


def test_unknown_query_parameters_are_422(client):
    response = client.get("/runs", params={"limit": 5, "stauts": "running"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", "stauts"]


def test_authentication_comes_before_parsing(server):
    with httpx.Client(base_url=server.url) as anonymous:
        response = anonymous.post("/learn-loop", content=b"\x00 not json", headers={"content-type": "application/json"})
        assert response.status_code == 401
