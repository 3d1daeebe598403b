import collections

import pytest
from pydantic import ValidationError

from app.knowledge_graph.schemas import GraphDocument
from app.knowledge_graph.service import DEMO_DIR, demo_document


def small(**changes):
    doc = {
        "id": "g", "name": "G",
        "nodes": [{"id": "a", "type": "t", "title": "A", "text": "Alpha."}, {"id": "b", "type": "t", "title": "B", "text": "Beta."}],
        "edges": [{"source": "a", "target": "b", "relation": "r"}],
        "scenarios": [{"id": "s", "goal": "g", "seed_nodes": ["a"],
                       "prospect": {"name": "N", "role": "R", "company": "C", "industry": "I", "pains": ["p"]}}],
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("changes", "culprit"),
    [
        ({"nodes": [{"id": "a", "type": "t", "title": "A", "text": "x"}] * 2}, "duplicate node id 'a'"),
        ({"edges": [{"source": "a", "target": "zz", "relation": "r"}]}, "edges[0].target names unknown node 'zz'"),
        ({"edges": [{"source": "a", "target": "b", "relation": "r"}] * 2}, "edges[1] duplicates"),
        ({"scenarios": [{"id": "s", "goal": "g", "seed_nodes": ["nope"],
                         "prospect": {"name": "N", "role": "R", "company": "C", "industry": "I"}}]}, "seed node 'nope'"),
    ],
)
def test_validation_names_the_culprit(changes, culprit):
    with pytest.raises(ValidationError, match=culprit.replace("[", r"\[").replace("]", r"\]")):
        GraphDocument.model_validate(small(**changes))


def test_unknown_fields_and_bad_ids_are_rejected():
    with pytest.raises(ValidationError, match="extra"):
        GraphDocument.model_validate(small(colour="red"))
    with pytest.raises(ValidationError, match="nodes.0.id"):
        GraphDocument.model_validate(small(nodes=[{"id": "has space", "type": "t", "title": "A", "text": "x"}]))


def test_demo_graph_is_rich_enough():
    doc = demo_document()
    types = collections.Counter(n.type for n in doc.nodes)
    assert len(doc.nodes) >= 60 and len(types) >= 6 and len(doc.edges) >= 100
    assert len(doc.scenarios) >= 8
    assert len({s.prospect.industry for s in doc.scenarios}) >= 4
    assert len({s.prospect.role for s in doc.scenarios}) >= 4
    assert any(ch.isdigit() for n in doc.nodes if n.type == "case_study" for ch in n.text)


def test_the_demo_ships_no_reader_s_truth():
    """The readers' traits live in the world (app.simulation), drawn per seed: nothing the service loads holds them."""
    assert sorted(p.name for p in DEMO_DIR.iterdir() if p.suffix == ".json") == ["graph.json"]
    visible = (DEMO_DIR / "graph.json").read_text()
    for key in ("interests", "dislikes", "preferences", "hidden"):
        assert key not in visible
    assert demo_document().scenarios

