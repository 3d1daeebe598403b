"""The reward: RULER's relative judgement of a group, clamped to [0, 1] and blended with online feedback."""

import time
import zlib
from dataclasses import dataclass, field

import art
import numpy as np
from art.metrics import MetricsBuilder
from art.rewards import ruler_score_group

from app.faults import fault_point
from app.loop.feedback import Feedback
from app.loop.outcome_model import NO_ESTIMATE, Estimate, FeedbackSource
from app.loop.schemas import EmailTrajectory, RewardStats, RunConfig
from app.observability import traced

SALES_EMAIL_RUBRIC = """
- Grounding: every citation names a knowledge-graph node the agent actually read in this trajectory; uncited claims and unread citations are penalised.
- Relevance: the cited facts address the prospect's stated pains, role and industry.
- Personalisation: the email addresses the prospect by name and speaks to their company, role or industry.
- Structure and length: a specific subject, a greeting, short paragraphs, a sign-off, roughly 70-170 words.
- Call to action: one clear, low-friction ask near the end.
- Efficiency: few wasted turns (tool errors, drafts, nodes read but never used).
"""



@dataclass
class Judge:
    """A RULER judge: a litellm model string and its connection parameters."""

    model: str
    params: dict = field(default_factory=dict)
    retries: int = 2
    rubric: str = SALES_EMAIL_RUBRIC

    async def judge(self, group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        """RULER's scores, raw; None when every attempt failed."""
        for _ in range(self.retries + 1):
            judged = await ruler_score_group(group, self.model, self.params, self.rubric, swallow_exceptions=True)
            if judged is not None:
                return judged
        return None


def clamped(score: float) -> float:
    """RULER does not check the range its judge answers in."""
    return min(1.0, max(0.0, float(score)))


def blend(judge_score: float, feedback: Estimate, weight: float) -> float:
    """reward = (1 - w·c) · judge + w·c · feedback, w the run's feedback_weight and c the feedback's confidence:
    with no outcomes (c = 0) the reward is the judge's, and evidence earns feedback its weight."""
    share = weight * feedback.confidence
    return (1 - share) * judge_score + share * feedback.score


def rollout_seed(seed: int, iteration: int, scenario_id: str, index: int) -> int:
    return zlib.crc32(f"{seed}:{iteration}:{scenario_id}:{index}".encode()) * 64



def reward_stats(groups: list[art.TrajectoryGroup]) -> RewardStats:
    rewards = np.array([t.reward for g in groups for t in g.trajectories], dtype=float)
    if rewards.size == 0:
        return RewardStats()
    return RewardStats(
        mean=float(rewards.mean()),
        median=float(np.median(rewards)),
        min=float(rewards.min()),
        max=float(rewards.max()),
        std=float(rewards.std()),
        count=int(rewards.size),
    )


def has_signal(group: art.TrajectoryGroup) -> bool:
    rewards = [t.reward for t in group.trajectories]
    return len(rewards) > 1 and max(rewards) - min(rewards) > 1e-9



class ScoringFailed(Exception):
    """Scoring raised: the workflow names the run's failure `score`, whichever step was generating."""


@dataclass
class Scorer:
    """Scores each group of one iteration as generation completes it."""

    judge: Judge
    feedback: Feedback | None
    config: RunConfig
    iteration: int

    async def __call__(self, group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        try:
            scored = await score_group(group, self.judge, self.feedback, self.config, iteration=self.iteration)
            fault_point("score", self.iteration)
        except Exception as exc:
            raise ScoringFailed(str(exc)) from exc
        return scored


@traced
async def score_group(
    group: art.TrajectoryGroup,
    judge: Judge,
    feedback: Feedback | None,
    config: RunConfig,
    *,
    iteration: int,
) -> art.TrajectoryGroup | None:
    """RULER's relative judgement, clamped to [0, 1], blended with online feedback; None drops the group."""
    costs = MetricsBuilder("judge")
    started = time.monotonic()
    with costs.activate_context():
        judged = await judge.judge(group)
    if judged is None:
        return None
    # RULER rebuilds each trajectory from art.Trajectory's own fields: carry ours over, by position.
    ours = set(EmailTrajectory.model_fields) - set(art.Trajectory.model_fields)
    for scored, original in zip(judged.trajectories, group.trajectories, strict=True):
        for name in ours:
            setattr(scored, name, getattr(original, name))
    cost = (await costs.flush()).get("costs/all", 0.0)  # known when litellm prices the judge model
    for trajectory in judged.trajectories:
        trajectory.metrics["judge_latency_s"] = time.monotonic() - started
        if cost:
            trajectory.metrics["judge_cost_usd"] = cost / len(judged.trajectories)
        judge_score = clamped(trajectory.reward)
        trajectory.metrics["judge_score"] = judge_score
        estimate = NO_ESTIMATE
        if feedback is not None:
            feedback_seed = rollout_seed(config.seed, iteration, trajectory.scenario_id, trajectory.rollout)
            estimate = feedback.estimate(trajectory.scenario_id, trajectory.email, feedback_seed)
        if estimate.source != FeedbackSource.NONE:
            trajectory.metrics |= {"feedback_score": estimate.score, "open_rate": estimate.p_open,
                                   "reply_rate": estimate.p_reply, "feedback_confidence": estimate.confidence,
                                   "feedback_observed": float(estimate.source == FeedbackSource.OBSERVED)}
        trajectory.reward = blend(judge_score, estimate, config.feedback_weight)
    return judged
