"""The conversation's opening: what the agent is asked to do, for whom, and where to start.

`app.agent.transcript` parses these tags back, so the embedded policy sees exactly what an LLM sees.
"""

import json

from app.agent.tools import node_summary
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario


def initial_messages(graph: KnowledgeGraph, scenario: Scenario, scores: dict[str, float], max_turns: int) -> list[dict]:
    system = (
        "You write one personalised B2B sales email grounded in facts from your company's knowledge graph. "
        "Explore with get_connected_nodes and get_relevant_context, cite only nodes you have read, "
        "and finish by calling finalize_email with subject, body and the ids of the cited nodes. "
        f"Turn budget: {max_turns} tool calls."
    )
    start_nodes = [node_summary(graph, scores, node_id) for node_id in scenario.seed_nodes]
    user = (
        f"<prospect>{scenario.prospect.model_dump_json()}</prospect>\n"
        f"Goal: {scenario.goal}\n"
        f"<start_nodes>{json.dumps(start_nodes)}</start_nodes>"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
