"""Read-only, indexed view of a graph document: what the agent's tools query during rollouts."""

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from app.knowledge_graph.schemas import GraphDocument, Node, Scenario, Sender


class NodeScores(dict):
    """A run's node scores: only the nodes that moved are stored; every other node is at 1.0."""

    def __missing__(self, node_id: str) -> float:
        return 1.0


class ScenarioScores(dict):
    """A run's node scores per scenario id, each holding only the nodes that moved.

    The entry "" holds run-wide scores, kept by runs from before scores were per scenario: they
    apply to every scenario of the run, under its own scores.
    """

    def of(self, scenario_id: str) -> NodeScores:
        """One scenario's scores: what its rollouts and its published email see."""
        return NodeScores(self.get("", {}) | self.get(scenario_id, {}))

    def mean(self, scenario_ids: Iterable[str]) -> dict[str, float]:
        """Each moved node's geometric mean score over the scenarios (a node listed nowhere is at 1.0).

        The run's single score map: the mean of log-scores, the quantity credit moves, so a node
        promoted for one prospect and demoted as much for another averages back to 1.0.
        """
        maps = [self.of(s) for s in dict.fromkeys(scenario_ids)]
        if len(maps) == 1:
            return dict(maps[0])
        nodes = sorted(set().union(*maps))
        return {n: math.exp(sum(math.log(m[n]) for m in maps) / len(maps)) for n in nodes}


@dataclass(frozen=True, slots=True)
class Neighbor:
    id: str
    relation: str
    direction: str  # "out" when the edge leaves the node, "in" when it arrives


class KnowledgeGraph:
    def __init__(self, document: GraphDocument):
        self.document = document
        self.id = document.id
        self.nodes: dict[str, Node] = {node.id: node for node in document.nodes}
        self.scenarios: dict[str, Scenario] = {s.id: s for s in document.scenarios}
        self._neighbors: dict[str, list[Neighbor]] = {node_id: [] for node_id in self.nodes}
        for edge in document.edges:
            self._neighbors[edge.source].append(Neighbor(edge.target, edge.relation, "out"))
            self._neighbors[edge.target].append(Neighbor(edge.source, edge.relation, "in"))
        self.sender: Sender | None = document.sender  # who signs the emails written on it

    def signed_by(self, sender: Sender | None) -> "KnowledgeGraph":
        """The same graph, its emails signed by `sender` (a batch's or a run's); itself when `sender` is None."""
        if sender is None:
            return self
        signed = copy.copy(self)
        signed.sender = sender
        return signed

    def neighbors(self, node_id: str) -> list[Neighbor]:
        return self._neighbors[node_id]

    @cached_property
    def seller(self) -> Node | None:
        """The company the emails are written for: of the nodes whose type names a company, the one with the most
        edges (the first in the document on a tie), as the vendor's own node is the hub of a vendor's graph.
        None when no node's type names a company."""
        companies = [node for node in self.document.nodes if "company" in node.type.lower()]
        return max(companies, key=lambda node: len(self._neighbors[node.id]), default=None)

    @cached_property
    def initial_scores(self) -> dict[str, float]:
        """Every node at 1.0, materialised: for the API's full score maps."""
        return {node_id: 1.0 for node_id in self.nodes}
