"""The rule with no learning that the learning benchmarks report beside the policies (bench/heuristic.py)."""

from app.agent.text import terms
from app.backends.embedded.composer import angle_of, is_context
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import GraphDocument
from app.knowledge_graph.service import demo_graph
from bench import heuristic


def graph() -> KnowledgeGraph:
    nodes = [
        {"id": "acme", "type": "company", "title": "Acme", "text": "Acme is a billing company. It fixes invoice errors.",
         "tags": []},
        {"id": "ledger", "type": "product", "title": "Ledger", "text": "Ledger catches invoice errors before month-end close.",
         "tags": ["billing"]},
        {"id": "story", "type": "case study", "title": "Northwind",
         "text": "Northwind cut invoice errors by 80% and closed the month two days sooner.", "tags": []},
        {"id": "soc2", "type": "compliance", "title": "SOC 2", "text": "Acme is SOC 2 Type II certified.", "tags": []},
    ]
    scenario = {"id": "s", "prospect": {"name": "Ana Ruiz", "role": "CFO", "company": "Bodega", "industry": "wine",
                                        "pains": ["invoice errors"]}, "goal": "Book a call.", "seed_nodes": ["ledger"]}
    return KnowledgeGraph(GraphDocument.model_validate({"id": "g", "name": "g", "nodes": nodes, "edges": [],
                                                        "scenarios": [scenario]}))


def test_the_rule_cites_the_facts_sharing_most_words_with_the_pains_and_never_a_context_node():
    cited = heuristic.best_facts(graph(), ["invoice errors at month-end close"])
    # Ledger shares invoice, error, month, end, close; the story invoice, error, month; the company node is context
    assert [n.id for n in cited] == ["ledger", "story"]
    assert heuristic.best_facts(graph(), ["nothing in common here"]) == []


def test_the_rule_writes_formal_medium_length_emails_with_a_meeting_ask_on_the_demo():
    demo = demo_graph()
    for scenario in demo.scenarios.values():
        prospect = scenario.prospect.model_dump()
        written = heuristic.write(demo, prospect, scenario.goal)
        assert len(written.citations) == heuristic.FACTS
        assert not any(is_context(demo.nodes[c].type) for c in written.citations)
        pains = terms(" ".join(prospect["pains"]))
        assert all(pains & terms(demo.nodes[c].text + demo.nodes[c].title + " ".join(demo.nodes[c].tags))
                   for c in written.citations)
        angle = angle_of(written.body, prospect, scenario.goal)
        assert angle.get("tone") == "formal" and angle.get("cta") == "meeting", (scenario.id, angle)
        assert written == heuristic.write(demo, prospect, scenario.goal)  # a rule: the same prospect, the same email
