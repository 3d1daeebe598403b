"""Scale: synthetic graphs of 1k, 10k and 100k nodes; iteration time and database growth per iteration.

Reweighting and persistence should cost in proportion to the nodes an iteration touches, not to
the size of the graph: scores are stored only for nodes that moved, changes only per iteration.
"""

import json

import numpy as np
import psycopg

from tests.support import FreshPostgresDatabase, Server, wait_for_status

TABLES = ("runs", "iterations", "trajectories", "node_scores", "node_score_changes", "events",
          "webhook_deliveries", "policy_checkpoints")


def synthetic_graph(nodes: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    vocab = [f"term{i}" for i in range(2000)]
    doc_nodes = []
    for i in range(nodes):
        words = rng.choice(vocab, 8, replace=False)
        doc_nodes.append({"id": f"n{i}", "type": f"type{i % 8}", "title": " ".join(words[:3]),
                          "text": f"{' '.join(words[:5])}. {' '.join(words[5:])}.", "tags": list(words[:2])})
    edges = {(i, int(j)) for i in range(nodes) for j in rng.integers(0, nodes, 3) if i != j}
    scenarios = [{"id": f"s{s}", "goal": "Book a call.", "seed_nodes": [f"n{int(rng.integers(nodes))}" for _ in range(2)],
                  "prospect": {"name": f"Pat {s}", "role": str(rng.choice(vocab)), "company": f"Co {s}",
                               "industry": str(rng.choice(vocab)), "pains": [" ".join(rng.choice(vocab, 2)) for _ in range(3)]}}
                 for s in range(4)]
    return {"id": f"synthetic-{nodes}", "name": f"{nodes} nodes", "nodes": doc_nodes,
            "edges": [{"source": f"n{a}", "target": f"n{b}", "relation": "related"} for a, b in sorted(edges)],
            "scenarios": scenarios}


def _app_bytes(url: str) -> int:
    with psycopg.connect(url) as conn:
        return sum(conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0] for t in TABLES)


def measure(workdir, sizes=(1_000, 10_000, 100_000), iterations: int = 3) -> list[dict]:
    database = FreshPostgresDatabase()
    server = Server(workdir, {"DATABASE_URL": database.url, "MAX_GRAPH_BYTES": str(64 * 1_048_576)})
    results = []
    try:
        server.start()
        with server.client() as client:
            for size in sizes:
                doc = synthetic_graph(size)
                uploaded = client.post("/graphs", content=json.dumps(doc), headers={"content-type": "application/json"}, timeout=600)
                assert uploaded.status_code == 201, uploaded.text
                before = _app_bytes(database.url)
                run_id = client.post("/learn-loop", json={"graph_id": doc["id"], "iterations": iterations,
                                                          "rollouts_per_group": 4}).json()["run_id"]
                run = wait_for_status(client, run_id, timeout=1200)
                assert run["status"] == "succeeded", run
                after = _app_bytes(database.url)
                recorded = client.get(f"/runs/{run_id}/iterations").json()["data"][1:]
                wall = [(_t(i["finished_at"]) - _t(i["started_at"])) for i in recorded]
                steps = [sum(v for k, v in i["metrics"].items() if k in ("duration/generate_and_score_s", "duration/train_s", "duration/email_s")) for i in recorded]
                results.append({
                    "nodes": size, "edges": len(doc["edges"]), "iterations": iterations,
                    "iteration_s": float(np.mean(wall)),
                    "reweight_ms": 1000 * float(np.mean([i["metrics"]["duration/reweight_s"] for i in recorded])),
                    "publish_and_overhead_ms": 1000 * float(np.mean([w - s for w, s in zip(wall, steps)])),
                    "nodes_changed_per_iteration": float(np.mean([len(i["node_scores_changed"]) for i in recorded])),
                    "db_growth_per_iteration_kb": (after - before) / iterations / 1024,
                })
    finally:
        server.stop()
        database.drop()
    return results


def _t(value: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
