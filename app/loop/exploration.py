"""Exploration that lets outcomes teach: a fact that neither the judge nor the graph favours, but that real replies
would reward, must get tried, or the replies never come.

Where a run learns from what is sent (`outcomes`, `simulated`), each rollout sees every node's KG score multiplied
by exp(exploration · w̃), w̃ drawn from the outcome model's posterior of what citing that node adds to the reply
log-odds (`OutcomeModel.trait_draws`): Thompson sampling on the node choice. A node no sent email ever cited draws
from the prior, as wide as it is for every such node (about ×1.75 at one standard deviation with the default
`OUTCOME_PRIOR_SENDS` of 20 and a population reply rate near 0.2), so an untried reachable fact gets a measured
chance in each rollout; one whose sends got replies draws above 1, one whose sends got none below, and as sends
accumulate the draws narrow to what they showed. The scores a rollout saw are in its conversation (the tools'
listings), so GRPO replays exactly the choice the policy made; the rollout records which cited nodes no sent email
had cited (`explored_citations`), and once such an email is sent the outcome model credits its `cites:` traits.
The published (greedy) email sees the KG scores alone.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.loop.features import CITES
from app.loop.outcome_model import OutcomeModel


@dataclass(frozen=True)
class Exploration:
    model: OutcomeModel
    node_ids: tuple[str, ...]
    scale: float  # the run's `exploration`: how many log-units of KG score per unit of drawn reply log-odds

    def shown_scores(self, scores: Mapping[str, float], seed: int) -> dict[str, float]:
        """One rollout's view of the KG scores: each node's score times exp(scale · its drawn weight)."""
        draws = self.model.trait_draws([f"{CITES}{node}" for node in self.node_ids], np.random.default_rng(seed))
        return {node: scores[node] * math.exp(self.scale * float(w)) for node, w in zip(self.node_ids, draws, strict=True)}

    def unsent(self, citations: list[str]) -> list[str]:
        """The cited nodes that no sent email had cited: what this email, once sent, will teach the outcome model."""
        known = set(self.model.replies.weights) if self.model.replies is not None else set()
        return [node for node in citations if f"{CITES}{node}" not in known]
