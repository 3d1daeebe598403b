"""The published email: the policy's most likely rollout for the target scenario, judged alone.

One rollout that writes no email must not fail a run: the greedy attempt is followed by a few
sampled ones, then by the iteration's best email. Where real outcomes teach the loop, only what is
sent is learnt from, so the email to send is drawn (Thompson sampling) among the greedy one and the
iteration's candidates.
"""

import asyncio
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import art
import numpy as np

from app.agent.schemas import Email, ScenarioContext
from app.kit.observability import traced
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.loop.feedback import OutcomeFeedback
from app.loop.generation import Policy
from app.loop.outcome_model import FeedbackSource
from app.loop.reward import Judge, blend, clamped
from app.loop.rollout import rollout
from app.loop.schemas import EndReason, RunConfig
from app.loop.trajectory import EmailTrajectory

SAMPLED_ATTEMPTS = 3  # after a greedy rollout that wrote no email


@dataclass
class Written:
    """The email to publish (None when no attempt wrote one), its judge's score, and every attempt."""

    email: EmailTrajectory | None
    score: float | None
    attempts: list[EmailTrajectory]
    sampled: bool = False

    @property
    def source(self) -> str | None:
        """Which attempt wrote the email: `greedy` or `sampled` (None: none did)."""
        return None if self.email is None else "sampled" if self.sampled else "greedy"

    def failure(self, scenario_id: str, max_turns: int) -> str:
        """What the model did, for a run that fails here: each way the attempts ended, counted."""
        ends = Counter(t.end_reason for t in self.attempts)
        said = {EndReason.OUT_OF_TURNS: "ran out of turns", EndReason.CUT_BY_LENGTH: "was cut at the token limit",
                EndReason.CONTEXT_FULL: "outgrew the model's context window"}
        parts = [f"{said.get(reason, reason.value)} {_times(n)}" for reason, n in ends.items() if reason is not None]
        texts = sum(t.corrections for t in self.attempts)
        if texts:
            parts.append(f"answered in text instead of calling a tool {_times(texts)}")
        return (f"the policy wrote no email for {scenario_id} in {len(self.attempts)} attempts of at most {max_turns} turns "
                f"({', '.join(parts)})")


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


@traced
async def write_email(
    policy: Policy, graph: KnowledgeGraph, scenario: Scenario, scores: Mapping[str, float], config: RunConfig,
    judge: Judge, context: ScenarioContext | None = None, *, seed: int,
) -> Written:
    """The published email for a scenario: the current policy's most likely rollout; when that writes none,
    the best-judged of SAMPLED_ATTEMPTS sampled rollouts that did."""

    def attempt(greedy: bool, index: int = 0):
        return rollout(policy.client, policy.model_name, graph, scenario, scores, max_turns=config.max_turns, greedy=greedy,
                       seed=None if greedy else seed + 1000 * (index + 1), logprobs=False, context=context,
                       max_tokens=config.max_tokens_per_turn)

    greedy = await attempt(True)
    if greedy.email is not None:
        return Written(greedy, await judge_email(greedy, judge), [greedy])
    sampled = await asyncio.gather(*(attempt(False, i) for i in range(SAMPLED_ATTEMPTS)))
    judged = [(await judge_email(t, judge), t) for t in sampled if t.email is not None]
    best = max(judged, key=lambda st: -1.0 if st[0] is None else st[0], default=(None, None))
    return Written(best[1], best[0], [greedy, *sampled], sampled=True)


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


def choose_by_outcomes(candidates: list[tuple[Email, float]], feedback: OutcomeFeedback, scenario_id: str,
                       weight: float, rng: np.random.Generator) -> int:
    """Which (email, judge score) to send, by its index: the highest reward (1 − w)·judge + w·feedback, w the run's
    feedback_weight, with the feedback drawn from the outcome model's posterior. An email whose traits were never
    sent wins as often as it could plausibly get more replies; as sends pin the rates down, the draws settle on
    the best. With no outcomes yet, the first."""
    draws = [feedback.draw(scenario_id, email, rng) for email, _ in candidates]
    if all(draw.source == FeedbackSource.NONE for draw in draws):
        return 0
    return int(np.argmax([blend(judge, draw, weight) for (_, judge), draw in zip(candidates, draws, strict=True)]))
