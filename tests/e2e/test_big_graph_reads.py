"""A whole large graph is read without holding up anyone else: `GET /graphs/{id}` renders from the stored rows a page
at a time, its encoding in a worker thread, on a live server over real HTTP."""

import json
import select
import socket

import httpx
import pytest

from app.knowledge_graph.schemas import GraphDocument
from app.knowledge_graph.service import demo_document
from tests.support import Server

pytestmark = pytest.mark.slow

NODES = 30_000


def big_graph() -> dict:
    nodes = [{"id": f"n{i:06d}", "type": "fact", "title": f"Fact {i}", "text": (f"Fact number {i}, said plainly. " * 4).strip(),
              "tags": ["bulk"]} for i in range(NODES)]
    edges = [{"source": f"n{i:06d}", "target": f"n{i + 1:06d}", "relation": "next"} for i in range(NODES - 1)]
    scenarios = [{"id": "s1", "goal": "Book a call.", "seed_nodes": ["n000000"],
                  "prospect": {"name": "Dana Li", "role": "CTO", "company": "Fjord", "industry": "banking", "pains": ["x"]}}]
    return {"id": "big", "name": "A big graph", "nodes": nodes, "edges": edges, "scenarios": scenarios}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("big-graph")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/db.sqlite", "API_KEYS": "alice:alice-key,bob:bob-key"},
                    api_key="alice-key").start()
    try:
        with server.client() as alice:
            assert alice.post("/graphs", json=big_graph(), timeout=300).status_code == 201
        yield server
    finally:
        server.stop()


def test_the_whole_document_reads_back_as_uploaded(server):
    with server.client() as alice:
        demo = alice.get("/graphs/demo").json()
        document = alice.get("/graphs/big", timeout=300).json()
    for read, uploaded in ((demo, demo_document().model_dump()), (document, GraphDocument.model_validate(big_graph()).model_dump())):  # with its defaults
        assert read == uploaded | {"nodes": sorted(uploaded["nodes"], key=lambda n: n["id"])}


def test_another_tenants_reads_answer_while_a_big_graph_is_read(server):
    """An ordering, not a timing: bob's reads, each sent after alice's big read was sent, keep answering before
    alice's answer has come back (her socket has nothing to read yet). On a loop held by the render they could not."""
    alice = socket.create_connection(("127.0.0.1", server.port))
    answered_meanwhile = 0
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer bob-key"}, timeout=300) as bob:
            bob.get("/healthz")  # bob's connection is open before alice's request goes out
            alice.sendall(b"GET /graphs/big HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice-key\r\n"
                          b"Connection: close\r\n\r\n")
            while not select.select([alice], [], [], 0)[0]:
                assert bob.get("/runs").status_code == 200 and bob.get("/healthz").status_code == 200
                if not select.select([alice], [], [], 0)[0]:
                    answered_meanwhile += 1
        head = alice.recv(64)
    finally:
        alice.close()
    assert head.startswith(b"HTTP/1.1 200")
    assert answered_meanwhile >= 10, answered_meanwhile


@pytest.mark.parametrize("graph_id", [".", ".."])
def test_a_graph_id_of_only_dots_is_refused(server, graph_id):
    document = json.loads(json.dumps(demo_document().model_dump()))
    with server.client() as alice:
        answer = alice.post("/graphs", json=document | {"id": graph_id})
    assert answer.status_code == 422 and "dots" in answer.text
