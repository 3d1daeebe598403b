"""The loop's steps as plain async functions with explicit inputs and outputs.

The durable workflow (`app.runs.workflow`) composes them and persists between them; none of
them keeps state of its own. Each reads the knobs it uses from the run's `RunConfig`.
"""

import asyncio
import math
import re
import statistics
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import art
import numpy as np
from art.metrics import MetricsBuilder
from art.rewards import ruler_score_group
from openai import AsyncOpenAI

from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.backends.retry import retrying
from app.loop.feedback import FeedbackSimulator
from app.agent.schemas import Email
from app.loop.rollout import rollout
from app.loop.schemas import EmailTrajectory, RewardStats, RunConfig, TrainingOutcome
from app.observability import traced

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

SALES_EMAIL_RUBRIC = """
- Grounding: every citation names a knowledge-graph node the agent actually read in this trajectory; uncited claims and unread citations are penalised.
- Relevance: the cited facts address the prospect's stated pains, role and industry.
- Personalisation: the email addresses the prospect by name and speaks to their company, role or industry.
- Structure and length: a specific subject, a greeting, short paragraphs, a sign-off, roughly 70-170 words.
- Call to action: one clear, low-friction ask near the end.
- Efficiency: few wasted turns (tool errors, drafts, nodes read but never used).
"""


@dataclass
class Policy:
    """Where rollouts get their completions: the model's OpenAI-compatible endpoint."""

    model: art.Model
    client: AsyncOpenAI

    @classmethod
    def of(cls, model: art.Model, max_retries: int = 3, timeout: float = 120.0) -> "Policy":
        """The OpenAI client retries timeouts, connection errors, 429 and 5xx with exponential backoff and jitter."""
        client = AsyncOpenAI(
            base_url=model.inference_base_url, api_key=model.inference_api_key, max_retries=max_retries, timeout=timeout
        )
        return cls(model, client)

    @property
    def model_name(self) -> str:
        """The latest checkpoint, by ART's naming convention for the backend."""
        return self.model.get_inference_name()

    @property
    def logprobs(self) -> bool:
        return self.model.trainable


@dataclass
class Judge:
    """A RULER judge: a litellm model string and its connection parameters."""

    model: str
    params: dict = field(default_factory=dict)
    retries: int = 2
    rubric: str = SALES_EMAIL_RUBRIC


@dataclass
class Generation:
    groups: list[art.TrajectoryGroup]  # of EmailTrajectory
    metrics: dict[str, float]


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


@traced
async def generate(
    policy: Policy,
    graph: KnowledgeGraph,
    scenarios: list[Scenario],
    scores: Mapping[str, Mapping[str, float]],
    config: RunConfig,
    *,
    iteration: int,
    contexts: Mapping[str, Mapping] | None = None,
    concurrency: int,
    score: Callable[[art.TrajectoryGroup], Awaitable[art.TrajectoryGroup | None]],
    max_exception_fraction: float = 0.25,
) -> Generation:
    """K rollouts per scenario, each with its scenario's node scores (and context, when learning in context);
    each group is scored as soon as it is complete."""
    started = time.monotonic()
    limit = asyncio.Semaphore(concurrency)
    counts = {"exceptions": 0, "dropped_groups": 0}
    rollouts_per_group = config.rollouts_per_group

    async def one(scenario: Scenario, index: int) -> EmailTrajectory:
        async with limit:
            return await rollout(
                policy.client, policy.model_name, graph, scenario, scores[scenario.id], max_turns=config.max_turns,
                seed=rollout_seed(config.seed, iteration, scenario.id, index), logprobs=policy.logprobs, rollout_index=index,
                context=(contexts or {}).get(scenario.id),
            )

    async def after_each(group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        counts["exceptions"] += len(group.exceptions)
        group.trajectories.sort(key=lambda t: t.rollout)  # completion order is not reproducible
        scored = await score(group) if len(group.trajectories) > 1 else None
        counts["dropped_groups"] += scored is None
        return scored

    groups = await art.gather_trajectory_groups(
        (art.TrajectoryGroup(one(s, k) for k in range(rollouts_per_group)) for s in scenarios),
        pbar_desc=None,
        max_exceptions=max(1, int(max_exception_fraction * rollouts_per_group * len(scenarios))),
        after_each=after_each,
    )
    trajectories = [t for g in groups for t in g.trajectories]
    metrics = {
        "rollouts": float(rollouts_per_group * len(scenarios)),
        "rollout_exceptions": float(counts["exceptions"]),
        "exception_rate": counts["exceptions"] / (rollouts_per_group * len(scenarios)),
        "dropped_groups": float(counts["dropped_groups"]),
        "finalized_fraction": float(np.mean([t.email is not None for t in trajectories])) if trajectories else 0.0,
        "mean_turns": float(np.mean([t.turns for t in trajectories])) if trajectories else 0.0,
        "zero_variance_fraction": float(np.mean([not has_signal(g) for g in groups])) if groups else 0.0,
        "judge/latency_s": float(np.mean([t.metrics.get("judge_latency_s", 0.0) for t in trajectories])) if trajectories else 0.0,
        "judge/cost_usd": float(sum(t.metrics.get("judge_cost_usd", 0.0) for t in trajectories)),
        "duration/generate_and_score_s": time.monotonic() - started,
    }
    return Generation(groups, metrics)


@traced
async def score_group(
    group: art.TrajectoryGroup,
    judge: Judge,
    feedback: FeedbackSimulator | None,
    config: RunConfig,
    *,
    iteration: int,
) -> art.TrajectoryGroup | None:
    """RULER's relative judgement, clamped to [0, 1], blended with online feedback; None drops the group.

    reward = (1 - feedback_weight) · judge + feedback_weight · feedback, where feedback is
    0.4 · open rate + 0.6 · reply rate (judge alone when the graph has no feedback channel).
    """
    judged = None
    costs = MetricsBuilder("judge")
    started = time.monotonic()
    with costs.activate_context():
        for _ in range(judge.retries + 1):
            judged = await ruler_score_group(group, judge.model, judge.params, judge.rubric, swallow_exceptions=True)
            if judged is not None:
                break
    if judged is None:
        return None
    # RULER rebuilds each trajectory from art.Trajectory's own fields: carry ours over, by position.
    for scored, original in zip(judged.trajectories, group.trajectories, strict=True):
        scored.scenario_id, scored.rollout, scored.turns, scored.email = (
            original.scenario_id, original.rollout, original.turns, original.email)
    cost = (await costs.flush()).get("costs/all", 0.0)  # known when litellm prices the judge model
    for trajectory in judged.trajectories:
        trajectory.metrics["judge_latency_s"] = time.monotonic() - started
        if cost:
            trajectory.metrics["judge_cost_usd"] = cost / len(judged.trajectories)
        judge_score = min(1.0, max(0.0, float(trajectory.reward)))
        trajectory.metrics["judge_score"] = judge_score
        reward = judge_score
        if feedback is not None:
            feedback_seed = rollout_seed(config.seed, iteration, trajectory.scenario_id, trajectory.rollout)
            feedback_score, open_rate, reply_rate = feedback.observe(trajectory.scenario_id, trajectory.email, feedback_seed)
            trajectory.metrics |= {"feedback_score": feedback_score, "open_rate": open_rate, "reply_rate": reply_rate}
            reward = (1 - config.feedback_weight) * judge_score + config.feedback_weight * feedback_score
        trajectory.reward = reward
    return judged


@traced
async def train(
    backend: art.Backend | None,
    model: art.Model,
    groups: list[art.TrajectoryGroup],
    config: RunConfig,
    *,
    step_before: int,
    retries: int,
) -> TrainingOutcome:
    """One GRPO step through `backend.train` on the groups that carry signal, exactly once.

    A model already past `step_before` was trained by an attempt whose result was lost (a crash,
    or a retry after the job finished): that step counts, and no second one is taken.
    """
    if not model.trainable or backend is None:
        return TrainingOutcome(step=0, skipped=True, reason="this backend serves a fixed model; nothing to train")
    if not config.train_policy:
        return TrainingOutcome(step=step_before, skipped=True, reason="policy training disabled (train_policy=false)")
    useful = [g for g in groups if has_signal(g)]
    if not useful:
        return TrainingOutcome(step=step_before, skipped=True, reason="no group has reward variance")
    kwargs = (config.train_options or {}) | ({} if config.learning_rate is None else {"learning_rate": config.learning_rate})
    started = time.monotonic()
    async for attempt in retrying(retries):
        with attempt:
            current = await model.get_step()
            if current > step_before:
                return TrainingOutcome(step=current, skipped=False, reason="recovered: trained before a restart or retry")
            result = await backend.train(model, useful, **kwargs)
    await model.log(useful, metrics=result.metrics, step=result.step, split="train")
    metrics = {k: float(v) for k, v in result.metrics.items()} | {"duration/train_s": time.monotonic() - started}
    return TrainingOutcome(step=result.step, skipped=False, metrics=metrics)


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


@traced
async def write_email(
    policy: Policy, graph: KnowledgeGraph, scenario: Scenario, scores: Mapping[str, float], config: RunConfig,
    context: Mapping | None = None,
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
    for _ in range(judge.retries + 1):
        judged = await ruler_score_group(
            art.TrajectoryGroup([trajectory]), judge.model, judge.params, judge.rubric, swallow_exceptions=True
        )
        if judged is not None:
            return min(1.0, max(0.0, float(judged.trajectories[0].reward)))
    return None


def best_trajectory(groups: list[art.TrajectoryGroup], scenario_id: str) -> EmailTrajectory | None:
    """The highest-reward rollout of a scenario that wrote an email (the first of equals)."""
    ranked = sorted((t for g in groups for t in g.trajectories if t.scenario_id == scenario_id and t.email),
                    key=lambda t: -t.reward)
    return ranked[0] if ranked else None


def best_email(groups: list[art.TrajectoryGroup], scenario_id: str) -> Email | None:
    """The best email an iteration wrote for a scenario: the fallback when the greedy rollout wrote none."""
    best = best_trajectory(groups, scenario_id)
    return best.email if best else None


# ---------------------------------------------------------------- in-context learning

PLAYBOOK_SIZE = 4  # lessons per scenario in a prompt: a short list an LLM reads, not a log
LESSON_CHARS = 240  # each lesson at most this long
LESSON_GAP = 0.1  # a criterion separates best from worst when their scores differ by a tenth of the scale
_EXPLANATION = "RULER explanation: "
_CRITERION = re.compile(r"^\s*([A-Za-z][A-Za-z _/-]*?)\s*[:=]?\s+(-?\d+(?:\.\d+)?)\s*$")


def explanation(trajectory: art.Trajectory) -> str:
    """The judge's explanation of its score, which RULER logs into the trajectory."""
    return next((line.removeprefix(_EXPLANATION) for line in reversed(trajectory.logs) if line.startswith(_EXPLANATION)), "")


def criteria(text: str) -> dict[str, float]:
    """`criterion score` pairs, when the whole explanation is a list of them ("relevance 0.80, tone 0.5")."""
    pairs = {}
    for part in re.split(r"[,;\n]", text):
        if not part.strip():
            continue
        match = _CRITERION.match(part)
        if not match:
            return {}
        pairs[match.group(1).strip()] = float(match.group(2))
    return pairs


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LESSON_CHARS else text[: LESSON_CHARS - 1].rstrip() + "…"


def lessons(group: art.TrajectoryGroup, iteration: int) -> list[str]:
    """What separated the group's best email from its worst, in the judge's words.

    A judge that scores by criterion ("grounding 1.00, relevance 0.40, …") gives one lesson per
    criterion on which the best email beat the worst by at least LESSON_GAP, the widest gaps first;
    any other judge's explanations of the best and the worst email are quoted, clipped.
    """
    ranked = sorted((t for t in group.trajectories if t.email is not None), key=lambda t: (-t.reward, t.rollout))
    if len(ranked) < 2 or ranked[0].reward - ranked[-1].reward < 1e-9:
        return []
    best, worst = ranked[0], ranked[-1]
    best_text, worst_text = explanation(best), explanation(worst)
    best_parts, worst_parts = criteria(best_text), criteria(worst_text)
    if best_parts and worst_parts:
        gaps = sorted(((best_parts[k] - worst_parts[k], k) for k in best_parts.keys() & worst_parts.keys()), key=lambda gk: (-gk[0], gk[1]))
        return [_clip(f"{k}: {best_parts[k]:.2f} in the best email vs {worst_parts[k]:.2f} in the worst "
                      f"(iteration {iteration}); raise it.") for gap, k in gaps if gap >= LESSON_GAP]
    found = []
    if best_text:
        found.append(_clip(f"What worked (iteration {iteration}, reward {best.reward:.2f}): {best_text}"))
    if worst_text:
        found.append(_clip(f"What fell short (iteration {iteration}, reward {worst.reward:.2f}): {worst_text}"))
    return found


def _lesson_key(lesson: str) -> str:
    return lesson.split(":", 1)[0].split(" (iteration", 1)[0]


@traced
def distil(
    previous: Mapping[str, Mapping] | None, groups: list[art.TrajectoryGroup], config: RunConfig, *, iteration: int
) -> dict[str, dict] | None:
    """In-context learning: per scenario, the best email so far and a short playbook, for the next prompts.

    The exemplar is replaced when this iteration wrote an email with a higher reward. The playbook
    keeps at most PLAYBOOK_SIZE lessons, newest first; a new lesson replaces an older one about the
    same criterion. None when the run does not learn in context.
    """
    if not config.in_context:
        return None
    context = {sid: {"exemplar": c.get("exemplar"), "playbook": list(c.get("playbook") or [])} for sid, c in (previous or {}).items()}
    for group in groups:
        if not group.trajectories:
            continue
        scenario_id = group.trajectories[0].scenario_id
        entry = context.setdefault(scenario_id, {"exemplar": None, "playbook": []})
        best = best_trajectory([group], scenario_id)
        if best is not None and (entry["exemplar"] is None or best.reward > entry["exemplar"]["reward"]):
            entry["exemplar"] = best.email.model_dump() | {"reward": float(best.reward), "iteration": iteration}
        new = lessons(group, iteration)
        keys = {_lesson_key(lesson) for lesson in new}
        entry["playbook"] = (new + [lesson for lesson in entry["playbook"] if _lesson_key(lesson) not in keys])[:PLAYBOOK_SIZE]
    return dict(sorted(context.items()))
