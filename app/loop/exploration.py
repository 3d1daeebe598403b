"""Exploration that lets outcomes teach: a fact that neither the judge nor the graph favours, but that real replies
would reward, must get tried, or the replies never come.

Where a run learns from what is sent (`outcomes`, `simulated`), once something was sent, each rollout draws, for every node within its reach
(its start nodes, their neighbours and the nodes listed as having worked before), what citing that node adds to the
reply log-odds for this scenario's segment (the node's weight over every send plus the segment's departure from
it) from the outcome model's posterior (`OutcomeModel.trait_draws`), and acts on the node whose draw is
highest, as Thompson sampling acts on the arm its sample rates best: that node, the focus, is listed among the
rollout's start nodes with its KG score times exp(exploration · its draw), the draw read as nats of preference (the
unit of the policy's log-score feature), at most LIFT. A node no sent email cited draws from the prior, as wide as
every such node, so each untried node within reach is the focus of about one rollout in as many as there are
untried nodes within reach; one whose sends got replies draws high and is the focus often, lifted far, one whose
sends got none rarely. The prompt and the tools' listings carry what the rollout saw, so GRPO replays exactly the
choice the policy made; the rollout records its focus and the cited nodes no sent email had cited
(`explored_citations`), whose `cites:` traits the outcome model credits once the email is sent. The published
(greedy) email sees the KG scores alone.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.knowledge_graph.graph import KnowledgeGraph, NodeScores
from app.knowledge_graph.schemas import Scenario
from app.loop.credit import MAX_NODE_SCORE, MIN_NODE_SCORE
from app.loop.features import CITES, in_segment, segment
from app.loop.outcome_model import OutcomeModel

# The most a focus is lifted: from the lowest score KG credit gives a node to the highest (×25), so a fact the
# graph learnt to avoid can still be tried when its draw says replies would reward it.
LIFT = MAX_NODE_SCORE / MIN_NODE_SCORE


@dataclass(frozen=True)
class Exploration:
    model: OutcomeModel
    graph: KnowledgeGraph
    scale: float  # the run's `exploration`: nats of preference per nat of drawn reply log-odds

    def reach(self, scenario: Scenario, scores: Mapping[str, float]) -> list[str]:
        """What a rollout can read without searching: its start nodes, their neighbours, and the nodes its prompt lists
        as having worked before (score above 1)."""
        near = set(scenario.seed_nodes) | {n.id for seed in scenario.seed_nodes for n in self.graph.neighbors(seed)}
        return sorted(near | {node for node, score in scores.items() if score > 1.0})

    def focus(self, scenario: Scenario, scores: Mapping[str, float], seed) -> tuple[str, float]:
        """The node within reach whose drawn reply weight is the highest, and that weight."""
        reach = self.reach(scenario, scores)
        reader = segment(scenario.prospect.role, scenario.prospect.industry)
        draws = self.model.trait_draws([[f"{CITES}{node}", in_segment(reader, f"{CITES}{node}")] for node in reach],
                                       np.random.default_rng(seed))
        best = int(np.argmax(draws))
        return reach[best], float(draws[best])

    def shown_scores(self, scenario: Scenario, scores: Mapping[str, float], seed) -> tuple[NodeScores, str]:
        """One rollout's view of the KG scores, and its focus."""
        focus, weight = self.focus(scenario, scores, seed)
        shown = NodeScores(scores)
        shown[focus] = scores[focus] * min(LIFT, math.exp(self.scale * max(0.0, weight)))
        return shown, focus

    def unsent(self, citations: list[str]) -> list[str]:
        """The cited nodes that no sent email had cited: what this email, once sent, will teach the outcome model."""
        return [node for node in citations if f"{CITES}{node}" not in self.model.positive.weights]
