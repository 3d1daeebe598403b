"""Emails: what the embedded backend publishes and whether its judge can tell a good one, through the service's own
workflow (`app.lifecycle.local`, as `codreamer run`), K=4, 10 iterations.

- The demo as `codreamer run --iterations 10` runs it (every scenario, simulated outcomes, exploration), seeds 0-2:
  the mean reward of iterations 8-10 against iteration 1, and the published emails' judge scores (the baseline,
  iteration 0, against iterations 8-10; how many reach 0.95).
- The same run with each other demo scenario as the target (seed 0): its published email at iteration 10.
- An unseen graph (`bench/unseen_graph.json`, a fleet-telematics vendor written for this benchmark and never shown
  to the policy during development), each of its three prospects as the target: every published email written to
  the reader (at least two "you").
- Spearman between the judge's score and the simulator's true reply probability (P(open) · P(reply | open), from
  the demo's hidden preferences, read only here) over the first 200 candidate emails of the demo run, seed 0
  (iterations 1-5, 10 scenarios × 4 rollouts).
- A table of 20 published emails beside their judge scores: the demo's 10 targets at iteration 10, and the unseen
  graph's published emails at iterations 0, 5 and 10 of each prospect, and 3 more of its first prospect.
"""

import asyncio
import os
import re
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

UNSEEN = Path(__file__).with_name("unseen_graph.json")
ITERATIONS = 10
LATE = slice(7, 10)  # iterations 8-10 of the curves (which start at iteration 1)
SEEDS = (0, 1, 2)
CANDIDATES = 200
YOU = re.compile(r"\byou(?:r|rs)?\b", re.I)
UNSEEN_TABLE_ITERATIONS = {0: (0, 2, 5, 7, 10), 1: (0, 5, 10), 2: (0, 10)}  # by the unseen scenario's position: 10 emails


def _run(args: tuple[str, str | None, int]) -> dict:
    """One 10-iteration run: per iteration its mean reward, published email and, on the demo, its candidates."""
    graph, target, seed = args
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401
    from app.kit.settings import Settings
    from app.knowledge_graph.schemas import GraphDocument
    from app.lifecycle.local import add_graph, local_service, run_to_end
    from app.runs import repository
    from app.runs.schemas import LearnLoopRequest

    document = GraphDocument.model_validate_json(UNSEEN.read_text()) if graph == "unseen" else None

    async def run():
        request = LearnLoopRequest(graph_id=document.id if document else "demo", iterations=ITERATIONS, seed=seed,
                                   **({"target_scenario_id": target} if target else {}))
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with local_service(Path(data_dir), Settings(_env_file=None)) as process:
                if document:
                    await add_graph(process, document)
                finished = await run_to_end(process, request)
                async with process.api.db.read() as session:
                    records = [await repository.iteration_detail(session, finished["run_id"], i) for i in range(ITERATIONS + 1)]
        return finished, records

    finished, records = asyncio.run(run())
    assert finished["status"] == "succeeded", finished
    return {
        "graph": graph, "target": finished["config"]["target_scenario_id"], "seed": seed,
        "rewards": [r["rewards"]["mean"] for r in records[1:]],
        "published": [{"iteration": r["iteration"], "score": r["email"]["score"], "subject": r["email"]["subject"],
                       "body": r["email"]["body"], "citations": r["email"]["citations"]} for r in records],
        "candidates": [{"scenario_id": t["scenario_id"], "judge": t["judge_score"], "email": t["email"]}
                       for r in records[1:] for t in r["trajectories"] if t["email"]] if graph == "demo" and seed == 0 else [],
    }


def _true_reply(candidates: list[dict]) -> list[float]:
    from app.agent.schemas import Email
    from app.knowledge_graph.service import demo_graph
    from app.loop.feedback import create_feedback, reply_probabilities

    simulator = create_feedback(demo_graph())
    found = []
    for c in candidates:
        p_open, p_reply = reply_probabilities(Email.model_validate(c["email"]), simulator.prospects[c["scenario_id"]],
                                              simulator.preferences[c["scenario_id"]])
        found.append(p_open * p_reply)
    return found


def measure(workers: int = 2) -> dict:
    from app.knowledge_graph.schemas import GraphDocument
    from app.knowledge_graph.service import demo_document
    from app.outcomes.service import spearman

    load_before, started = os.getloadavg()[0], time.monotonic()
    demo_targets = [s.id for s in demo_document().scenarios]
    unseen_targets = [s.id for s in GraphDocument.model_validate_json(UNSEEN.read_text()).scenarios]
    jobs = ([("demo", None, seed) for seed in SEEDS] + [("demo", target, 0) for target in demo_targets[1:]]
            + [("unseen", target, 0) for target in unseen_targets])
    with ProcessPoolExecutor(workers) as pool:
        runs = list(pool.map(_run, jobs))
    default = [r for r in runs if r["graph"] == "demo" and r["target"] == demo_targets[0]]

    def learning(run: dict) -> dict:
        scores = [p["score"] for p in run["published"]]
        late = float(np.mean(run["rewards"][LATE]))
        return {"seed": run["seed"], "first": run["rewards"][0], "late": late, "ratio": late / run["rewards"][0],
                "published_scores": scores, "share_at_095": float(np.mean([s >= 0.95 for s in scores])),
                "baseline": scores[0], "late_published": float(np.mean(scores[8:]))}

    candidates = next(r for r in default if r["seed"] == 0)["candidates"][:CANDIDATES]
    judged, true = [c["judge"] for c in candidates], _true_reply(candidates)
    unseen = [r for r in runs if r["graph"] == "unseen"]
    table = [{"graph": "demo", "target": r["target"], **r["published"][-1]}
             for r in [next(r for r in default if r["seed"] == 0)] + [r for r in runs if r["graph"] == "demo" and r["seed"] == 0
                                                                        and r["target"] != demo_targets[0]]]
    for position, run in enumerate(unseen):
        table += [{"graph": "unseen", "target": run["target"], **run["published"][i]} for i in UNSEEN_TABLE_ITERATIONS[position]]
    return {
        "iterations": ITERATIONS, "seconds": round(time.monotonic() - started, 1),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "demo": [learning(r) for r in sorted(default, key=lambda r: r["seed"])],
        "spearman": {"candidates": len(candidates), "rho": spearman(judged, true),
                     "judge": [round(x, 4) for x in judged], "true_reply": [round(x, 4) for x in true]},
        "unseen": {"graph": UNSEEN.name, "runs": [{"target": r["target"], "published_scores": [p["score"] for p in r["published"]],
                                                    "you_counts": [len(YOU.findall(p["body"])) for p in r["published"]]}
                                                   for r in unseen]},
        "table": table,
        "share_table_at_095": float(np.mean([e["score"] >= 0.95 for e in table])),
    }
