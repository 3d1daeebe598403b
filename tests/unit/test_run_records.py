"""What a run records: the node scores a webhook carries (whole up to a limit, then the top and the
changes), and a trajectory as the store keeps it."""

import art

from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import GraphDocument
from app.runs.transitions import FULL_SCORES_MAX_NODES, TRUNCATED_TOP, webhook_scores


def graph_of(size: int) -> KnowledgeGraph:
    nodes = [{"id": f"n{i}", "type": "t", "title": "T", "text": "x"} for i in range(size)]
    scenario = {"id": "s", "goal": "g", "seed_nodes": ["n0"],
                "prospect": {"name": "N", "role": "R", "company": "C", "industry": "I", "pains": ["p"]}}
    return KnowledgeGraph(GraphDocument.model_validate({"id": "g", "name": "g", "nodes": nodes, "edges": [], "scenarios": [scenario]}))


def test_webhook_node_scores_are_whole_up_to_the_limit_then_top_plus_changes():
    small = graph_of(FULL_SCORES_MAX_NODES)
    assert webhook_scores(small, {"n1": 2.0}, {"n1": 2.0}) == {"node_scores": small.initial_scores | {"n1": 2.0}}

    large = graph_of(FULL_SCORES_MAX_NODES + 1)
    moved = {f"n{i}": 1.0 + i / 10_000 for i in range(1, 700)}
    changed = {"n1": moved["n1"]}  # the lowest moved score: outside the top 500
    scores = webhook_scores(large, moved, changed)
    assert scores["truncated"] is True
    assert len(scores["node_scores"]) == TRUNCATED_TOP + 1 == 501
    top = sorted(moved, key=lambda n: -moved[n])[:TRUNCATED_TOP]
    assert set(scores["node_scores"]) == set(top) | {"n1"}
    few = webhook_scores(large, {"n5": 3.0}, {"n5": 3.0})["node_scores"]  # padded with unmoved nodes at 1.0
    assert len(few) == TRUNCATED_TOP and few["n5"] == 3.0 and sorted(set(few.values())) == [1.0, 3.0]


def test_a_trajectory_survives_storage_with_its_email(tmp_path):
    from app.agent.schemas import Email
    from app.loop.trajectory import EmailTrajectory

    original = EmailTrajectory(messages_and_choices=[{"role": "user", "content": "hi"}], scenario_id="s", rollout=3, turns=2,
                               email=Email(subject="S", body="B", citations=["a"]), reward=0.5)
    restored = EmailTrajectory.from_json(original.to_json())
    assert (restored.scenario_id, restored.rollout, restored.turns, restored.email, restored.reward) == ("s", 3, 2, original.email, 0.5)
    assert isinstance(art.TrajectoryGroup([restored]).trajectories[0], EmailTrajectory)
