"""Generated graphs in no way like the demo: random vocabulary, ids and structure, and no simulated readers
(`feedback_source` is `outcomes` there, with nothing sent), so a run on one is rewarded by the judge alone. The
learning tests and the learning benchmark use them to show that nothing learns from the demo's words."""

import json

import numpy as np

from app.knowledge_graph.schemas import GraphDocument


def synthetic_document(seed: int) -> GraphDocument:
    """40 nodes of random words in 5 types, about 3 edges each, 4 scenarios whose pains are random word pairs."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}x" for i in range(120)]
    nodes = []
    for i in range(40):
        words = rng.choice(vocab, 12, replace=False)
        nodes.append({"id": f"n{i}", "type": f"t{i % 5}", "title": " ".join(words[:3]),
                      "text": f"{' '.join(words[:6])}. {' '.join(words[6:])}.", "tags": list(words[:3])})
    edges = [{"source": f"n{i}", "target": f"n{j}", "relation": "r"}
             for i in range(40) for j in rng.choice(40, 3, replace=False) if i != j]
    edges = list({(e["source"], e["target"]): e for e in edges}.values())
    scenarios = []
    for s in range(4):
        pains = [" ".join(rng.choice(vocab, 2, replace=False)) for _ in range(3)]
        scenarios.append({"id": f"s{s}", "goal": "book a call", "seed_nodes": [f"n{s}", f"n{s + 10}"],
                          "prospect": {"name": f"P{s} Q", "role": str(rng.choice(vocab)), "company": f"C{s}",
                                       "industry": str(rng.choice(vocab)), "pains": pains}})
    return GraphDocument.model_validate_json(json.dumps(
        {"id": f"synthetic-{seed}", "name": "synthetic", "nodes": nodes, "edges": edges, "scenarios": scenarios}))
