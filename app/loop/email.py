"""The published email: the policy's most likely rollout for the target scenario, judged alone."""

from collections.abc import Mapping

import art

from app.agent.schemas import ScenarioContext
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.loop.generation import Policy
from app.loop.reward import Judge, clamped
from app.loop.rollout import rollout
from app.loop.schemas import EmailTrajectory, RunConfig
from app.observability import traced


@traced
async def write_email(
    policy: Policy, graph: KnowledgeGraph, scenario: Scenario, scores: Mapping[str, float], config: RunConfig,
    context: ScenarioContext | None = None,
) -> EmailTrajectory:
    """The published email for a scenario: the current policy's most likely rollout."""
    return await rollout(
        policy.client, policy.model_name, graph, scenario, scores, max_turns=config.max_turns, greedy=True, logprobs=False,
        context=context,
    )


@traced
async def judge_email(trajectory: EmailTrajectory, judge: Judge) -> float | None:
    """The run's judge's score of one rollout's email, judged alone, in [0, 1]; None when the judge keeps failing."""
    if trajectory.email is None:
        return None
    judged = await judge.judge(art.TrajectoryGroup([trajectory]))
    return None if judged is None else clamped(judged.trajectories[0].reward)


def best_trajectory(groups: list[art.TrajectoryGroup], scenario_id: str) -> EmailTrajectory | None:
    """The highest-reward rollout of a scenario that wrote an email (the first of equals)."""
    ranked = sorted((t for g in groups for t in g.trajectories if t.scenario_id == scenario_id and t.email),
                    key=lambda t: -t.reward)
    return ranked[0] if ranked else None
