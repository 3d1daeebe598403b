"""The reward: RULER's relative judgement of a group, clamped to [0, 1] and blended with online feedback."""

import json
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

import art
import litellm
import numpy as np
from art.metrics import MetricsBuilder
from art.rewards import ruler_score_group
from pydantic import ValidationError

from app.kit.faults import fault_point
from app.kit.observability import traced
from app.loop.feedback import Feedback
from app.loop.outcome_model import NO_ESTIMATE, Estimate, FeedbackSource
from app.loop.schemas import RewardStats, RunConfig
from app.loop.trajectory import EmailTrajectory

SALES_EMAIL_RUBRIC = """
Grade as a sales manager grades a rep's cold email before it goes out:
- Pains answered: each of the prospect's stated pains is answered by a cited fact (a product, feature, integration or customer result) that actually speaks to it; describing the pain is not answering it.
- Proof: the answers carry figures (a percentage, a time saved, an amount), not just claims.
- Seller: the email says who writes and, in one clause, what the company does.
- Each product or feature is introduced by what it is before what it does; no product name opens a sentence bare.
- Pains are referred to inside sentences, never echoed as headings ("Regarding X:") or repeated.
- One clear, grammatical ask near the end that asks for what the goal names.
- Grounding: every citation names a knowledge-graph node the agent read in this trajectory, and every cited fact is used in the text.
- No filler: every sentence carries a fact, a pain or the ask; correct grammar, possessives and articles.
- Concise: a specific subject, a greeting, a sign-off, about 70-125 words, short sentences; written to the reader by name.
- Efficiency: few wasted turns (tool errors, drafts, nodes read but never used).
"""



class JudgeError(StrEnum):
    """Why a judge's answer could not be used."""

    COUNT_MISMATCH = "count_mismatch"  # not one score per trajectory
    NOT_JSON = "not_json"  # not the JSON object RULER asked for
    UNAVAILABLE = "unavailable"  # no answer: connection, timeout, rate limit, server error
    OTHER = "other"


# A retry is not the identical request: it adds what the previous answer got wrong to the rubric.
RETRY_HINTS = {
    JudgeError.COUNT_MISMATCH: "Give exactly one score for each trajectory, with its trajectory id, and no others.",
    JudgeError.NOT_JSON: "Answer with the JSON object only: no text, no code fence around it.",
}
HALVED_ON = (JudgeError.COUNT_MISMATCH, JudgeError.NOT_JSON)  # answers a smaller group may get right
EXPLANATION_CHARS = 400  # a bounded answer's explanation: enough to say why, too short to run on to the token limit
TOKENS_PER_CHAR = 0.25  # a rough, generous English/JSON ratio: the check is for a prompt far over the window


def bounded_answer(trajectories: list[art.Trajectory]) -> dict:
    """RULER's answer format (`art.rewards.ruler.Response`), bounded to the group it is sent: exactly one score
    per trajectory RULER shows the judge (one when they are all identical, as RULER does), by its id, in [0, 1],
    with a short explanation. A server that decodes by grammar then cannot miscount or write on until its token
    limit, the two ways a small judge fails; RULER's own format leaves the list's length open."""
    identical = len({json.dumps(t.messages(), sort_keys=True, default=str) for t in trajectories}) == 1
    ids = ["1"] if identical else [str(n) for n in range(1, len(trajectories) + 1)]
    score = {
        "type": "object",
        "properties": {
            "trajectory_id": {"type": "string", "enum": ids},
            "explanation": {"type": "string", "maxLength": EXPLANATION_CHARS},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["trajectory_id", "explanation", "score"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {"scores": {"type": "array", "items": score, "minItems": len(ids), "maxItems": len(ids)}},
        "required": ["scores"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "Response", "schema": schema, "strict": True}}


def judge_error(exc: Exception) -> JudgeError:
    if isinstance(exc, ValueError) and "Expected" in str(exc) and "score" in str(exc):
        return JudgeError.COUNT_MISMATCH
    if isinstance(exc, (ValidationError, json.JSONDecodeError)):
        return JudgeError.NOT_JSON
    if type(exc).__module__.split(".")[0] in ("litellm", "openai", "httpx"):
        return JudgeError.UNAVAILABLE
    return JudgeError.OTHER


@dataclass
class JudgeStats:
    """One iteration's judging, for its metrics and, when every group was dropped, the run's failure message."""

    groups: int = 0
    judged: int = 0
    retried: int = 0
    dropped: int = 0
    split: int = 0  # groups judged in parts, their prompt too long for the judge's context window
    halved: int = 0  # parts judged in halves after every attempt at the whole got a miscounted or unreadable answer
    out_of_range: int = 0  # scores outside [0, 1], clamped
    errors: Counter = field(default_factory=Counter)
    last_error: str | None = None

    def metrics(self) -> dict[str, float]:
        return {"judge/groups": float(self.groups), "judge/judged": float(self.judged), "judge/retried": float(self.retried),
                "judge/dropped": float(self.dropped), "judge/split": float(self.split), "judge/halved": float(self.halved),
                "judge/out_of_range": float(self.out_of_range)} | {
            f"judge/errors/{kind.value}": float(self.errors[kind]) for kind in JudgeError}

    def failure(self) -> str:
        kinds = ", ".join(f"{kind.value} {n}×" for kind, n in self.errors.most_common())
        return f"the judge failed ({kinds or 'no answer'}); last error: {self.last_error}"


@dataclass
class Judge:
    """A RULER judge: a litellm model string and its connection parameters."""

    model: str
    params: dict = field(default_factory=dict)
    retries: int = 2
    rubric: str = SALES_EMAIL_RUBRIC
    context_tokens: int | None = None  # None: what litellm knows of the model, else unchecked

    @property
    def bounds_answers(self) -> bool:
        """A judge at a base URL is a server of our own (llama.cpp, vLLM, Ollama, the embedded one): it is sent
        the group's `bounded_answer`. A hosted judge gets RULER's request unchanged, as its provider expects."""
        return "api_base" in self.params

    def _params(self, group: art.TrajectoryGroup) -> dict:
        if not self.bounds_answers:
            return self.params
        # The OpenAI client merges `extra_body` over the request it builds, so this replaces RULER's format.
        extra_body = self.params.get("extra_body", {}) | {"response_format": bounded_answer(list(group.trajectories))}
        return self.params | {"extra_body": extra_body}

    def context_window(self) -> int | None:
        if self.context_tokens is not None:
            return self.context_tokens
        try:
            return litellm.get_model_info(self.model).get("max_input_tokens")
        except Exception:  # litellm raises for a model it does not know: then there is nothing to check against
            return None

    def fits(self, trajectories: list[art.Trajectory]) -> bool:
        window = self.context_window()
        if window is None:
            return True
        chars = len(self.rubric) + sum(len(json.dumps(t.messages(), default=str)) for t in trajectories)
        return chars * TOKENS_PER_CHAR <= window * 0.9  # room for RULER's instructions and the answer

    async def judge(self, group: art.TrajectoryGroup, stats: JudgeStats | None = None) -> art.TrajectoryGroup | None:
        """RULER's scores, raw; None when every attempt failed. A group whose prompt would not fit the judge's
        context window is judged in parts that do (halves, and so on; each part relative to itself), and so is a
        part whose every answer miscounted its trajectories or was not the JSON asked for: fewer trajectories
        are fewer scores to get right (a weak judge's typical failure). A judge that cannot be reached is not
        asked again in parts."""
        stats = stats if stats is not None else JudgeStats()
        stats.groups += 1
        trajectories = list(group.trajectories)
        if len(trajectories) > 1 and not self.fits(trajectories):
            stats.split += 1
        judged = await self._in_parts(trajectories, stats)
        stats.judged += judged is not None
        stats.dropped += judged is None
        return judged

    async def _in_parts(self, trajectories: list[art.Trajectory], stats: JudgeStats) -> art.TrajectoryGroup | None:
        if len(trajectories) == 1 or self.fits(trajectories):
            judged, failed_as = await self._attempts(art.TrajectoryGroup(trajectories), stats)
            if judged is not None or len(trajectories) == 1 or failed_as not in HALVED_ON:
                return judged
            stats.halved += 1
        half = len(trajectories) // 2
        judged: list[art.Trajectory] = []
        for part in (trajectories[:half], trajectories[half:]):
            if (scored := await self._in_parts(part, stats)) is None:
                return None
            judged += scored.trajectories
        return art.TrajectoryGroup(judged)

    async def _attempts(self, group: art.TrajectoryGroup,
                        stats: JudgeStats) -> tuple[art.TrajectoryGroup | None, JudgeError | None]:
        """The judged group, or None and how the last attempt failed."""
        rubric, kind, params = self.rubric, None, self._params(group)
        for attempt in range(self.retries + 1):
            stats.retried += attempt > 0
            try:
                judged = await ruler_score_group(group, self.model, params, rubric, swallow_exceptions=False)
            except Exception as exc:  # any failure of the judge drops the group, never the run
                kind = judge_error(exc)
                stats.errors[kind] += 1
                stats.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                rubric = self.rubric + ("\n" + RETRY_HINTS[kind] if kind in RETRY_HINTS else "")
                continue
            stats.out_of_range += sum(not 0 <= t.reward <= 1 for t in judged.trajectories)
            return judged, None
        return None, kind


def clamped(score: float) -> float:
    """RULER does not check the range its judge answers in."""
    return min(1.0, max(0.0, float(score)))


def blend(judge_score: float, feedback: Estimate, weight: float) -> float:
    """reward = (1 − w) · judge + w · (b + c · (f − b)): w the run's feedback_weight, f the feedback, c its confidence,
    b the population's feedback. With no outcomes the reward is the judge's; with outcomes, evidence moves an email
    from the population's rates toward its own, so an email sent often at the usual rates scores as one never sent.
    Evidence does not move weight between the judge and the feedback: judge scores sit far above feedback scores,
    so that would mark an email down for having been sent, the more the more it was sent."""
    if feedback.source == FeedbackSource.NONE:
        return judge_score
    toward = feedback.baseline + feedback.confidence * (feedback.score - feedback.baseline)
    return (1 - weight) * judge_score + weight * toward


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
    stats: JudgeStats = field(default_factory=JudgeStats)

    async def __call__(self, group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        try:
            scored = await score_group(group, self.judge, self.feedback, self.config, iteration=self.iteration,
                                       stats=self.stats)
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
    stats: JudgeStats | None = None,
) -> art.TrajectoryGroup | None:
    """RULER's relative judgement, clamped to [0, 1], blended with online feedback; None drops the group."""
    costs = MetricsBuilder("judge")
    started = time.monotonic()
    with costs.activate_context():
        judged = await judge.judge(group, stats)
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
                                   "positive_rate": estimate.p_positive, "negative_rate": estimate.p_negative,
                                   "feedback_confidence": estimate.confidence,
                                   "feedback_observed": float(estimate.source == FeedbackSource.OBSERVED)}
        trajectory.reward = blend(judge_score, estimate, config.feedback_weight)
    return judged
