"""Graph credit: the nodes that the better emails of a scenario cited gain score for that scenario.

Node scores are the run's memory of what worked; see docs/architecture/learning.md, "KG reweighting".
"""

import math
import statistics
from collections.abc import Mapping

import art

from app.kit.observability import traced
from app.loop.schemas import RunConfig

# Node scores are multiplicative preferences, so credit moves them in log-space, symmetrically
# around the neutral 1.0: at most 5× more (or less) likely to be listed first than an unscored node.
MIN_NODE_SCORE, MAX_NODE_SCORE = 1 / 5, 5.0
# At most a factor 5^(1/4) ≈ 1.5 per iteration: it takes four iterations of consistent credit to
# go from neutral to a bound, so one lucky group cannot pin a node there.
LOG_STEP_CAP = math.log(MAX_NODE_SCORE) / 4
# Advantages are in units of the group's spread, as GRPO's are: an email one standard deviation better
# than its group's average earns the full step, closer ones proportionally less.
REWEIGHT_RATE = LOG_STEP_CAP
# Citing emails whose rewards differ by less than this have nothing to tell apart.
MIN_REWARD_SPREAD = 1e-6


@traced
def reweight(
    scores: Mapping[str, Mapping[str, float]], groups: list[art.TrajectoryGroup], config: RunConfig
) -> dict[str, dict[str, float]]:
    """Per scenario, signed group-relative credit for the nodes its emails cited; returns the changed scores.

    `scores` maps a scenario id to its node scores (a missing node is at 1.0). See `node_credit`
    for the credit and `apply_credit` for how it moves a score; scenarios never share credit, so
    what one prospect responded to does not steer another's rollouts.
    """
    if not config.reweight_graph:
        return {}
    by_scenario: dict[str, list[art.TrajectoryGroup]] = {}
    for group in groups:  # a group is one scenario's rollouts
        if group.trajectories:
            by_scenario.setdefault(group.trajectories[0].scenario_id, []).append(group)
    changed: dict[str, dict[str, float]] = {}
    for scenario_id, scenario_groups in by_scenario.items():
        credit = node_credit(scenario_groups, config.top_fraction)
        moved = apply_credit(scores.get(scenario_id, {}), credit)
        if moved:
            changed[scenario_id] = moved
    return changed


def node_credit(groups: list[art.TrajectoryGroup], top_fraction: float) -> dict[str, float]:
    """A node's credit: the mean advantage of the credited emails that cite it.

    Within each group (one scenario's rollouts), only emails that cite something are compared:
    an email that cites nothing says nothing about any node, and counting it would lower the
    baseline until every citation earned credit. An email's advantage is its reward minus the
    mean reward of the group's citing emails, divided by their standard deviation: standardised
    as GRPO standardises its advantages, so how far apart a judge spreads its scores does not
    set how fast the graph learns. The credited emails are the `top_fraction` best and
    the `top_fraction` worst of them (at the default 0.5, every citing email): the clearest
    evidence for and against what they cited. A group with fewer than two citing emails has no
    comparison and gives no credit, nor does one whose citing emails all scored the same.
    """
    advantages: dict[str, list[float]] = {}
    for group in groups:
        citing = [t for t in group.trajectories if t.email is not None and t.email.citations]
        if len(citing) < 2:
            continue
        rewards = [t.reward for t in citing]
        baseline, spread = sum(rewards) / len(rewards), statistics.pstdev(rewards)
        if spread < MIN_REWARD_SPREAD:
            continue
        ranked = sorted(citing, key=lambda t: (-t.reward, t.rollout))
        share = math.ceil(top_fraction * len(citing))
        credited = sorted(set(range(share)) | set(range(len(ranked) - share, len(ranked))))
        for trajectory in (ranked[i] for i in credited):
            for node_id in trajectory.email.citations:
                advantages.setdefault(node_id, []).append((trajectory.reward - baseline) / spread)
    return {node_id: sum(values) / len(values) for node_id, values in advantages.items()}


def apply_credit(
    scores: Mapping[str, float], credit: Mapping[str, float], *,
    rate: float = REWEIGHT_RATE, step_cap: float = LOG_STEP_CAP,
    low: float = MIN_NODE_SCORE, high: float = MAX_NODE_SCORE,
) -> dict[str, float]:
    """log score += clip(rate · credit, ±step_cap), then the score is kept in [low, high]; returns what moved."""
    changed = {}
    for node_id, value in credit.items():
        old = scores.get(node_id, 1.0)
        step = max(-step_cap, min(step_cap, rate * value))
        new = min(high, max(low, math.exp(math.log(old) + step)))
        if abs(new - old) > 1e-12:
            changed[node_id] = new
    return changed
