"""The rule with no learning that every learning benchmark reports beside the untrained and trained policies.

A salesperson's sensible default, written with the embedded backend's own composer so that only the choice of facts,
tone, length and ask differs from the policy's: the graph's facts whose words best match the prospect's pains (the
number of content words a fact shares with the pains; context nodes such as the seller's company or a persona are
never quoted), a formal tone, the medium length band and a meeting ask. It reads the prospect as a draft request
gives it (name, company, role, industry, pains, goal) and nothing of the simulated world.
"""

from dataclasses import dataclass

from app.agent.prompt import seller_summary
from app.agent.text import terms
from app.agent.transcript import SeenNode
from app.backends.embedded.composer import Seller, compose, is_context
from app.knowledge_graph.graph import KnowledgeGraph

FACTS = 2
TONE, LENGTH, CTA = "formal", "medium", "meeting"


@dataclass(frozen=True)
class Written:
    subject: str
    body: str
    citations: tuple[str, ...]


def best_facts(graph: KnowledgeGraph, pains: list[str], n: int = FACTS) -> list[SeenNode]:
    """The `n` quotable nodes sharing the most content words with the pains (the graph's order on a tie); none that
    shares no word."""
    wanted = terms(" ".join(pains))
    overlap = {node.id: len(wanted & terms(f"{node.title} {node.text} {' '.join(node.tags)}"))
               for node in graph.document.nodes if not is_context(node.type)}
    ranked = sorted((node_id for node_id, shared in overlap.items() if shared), key=lambda node_id: -overlap[node_id])
    return [SeenNode(id=node.id, type=node.type, title=node.title, facts=node.text, tags=tuple(node.tags))
            for node in (graph.nodes[node_id] for node_id in ranked[:n])]


def write(graph: KnowledgeGraph, prospect: dict, goal: str) -> Written:
    """The rule's email to `prospect` (a draft request's prospect: name, company, role, industry, pains)."""
    cited = best_facts(graph, list(prospect.get("pains") or []))
    subject, body = compose(prospect, cited, TONE, LENGTH, CTA, goal=goal, seller=Seller.of(seller_summary(graph)))
    return Written(subject, body, tuple(node.id for node in cited))
