"""Online feedback for scoring: the outcome model's estimate (real or simulated sends), or the demo's oracle.

The simulator's prospects have hidden preferences, only for the demo graph's scenarios, read from a
file that neither the policy nor the judge can see; the simulator only sees the email a prospect
would receive. As a provider (`app.outcomes.simulated`) it answers only for emails that are sent;
as the oracle (`feedback_source: oracle`, for benchmarks) it rates every candidate at once.
"""

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.agent.schemas import Email
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.service import hidden_preferences
from app.loop.features import content_hash, email_features, perceived_cta, perceived_length, perceived_tone
from app.loop.outcome_model import NO_ESTIMATE, Estimate, FeedbackSource, OutcomeModel

SENDS = 50  # simulated recipients per email


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def reply_probabilities(email: Email, prospect: dict, preferences: dict) -> tuple[float, float]:
    """(P(open), P(reply | open)) for one prospect."""
    subject = email.subject.lower()
    personal_subject = str(prospect["name"]).split(" ")[0].lower() in subject or str(prospect["company"]).lower() in subject
    tone_match = perceived_tone(email.body) == preferences["tone"]
    open_logit = -0.6 + 0.8 * personal_subject + 0.7 * tone_match - 0.5 * (len(email.subject.split()) > 10)
    interest = min(1.5, sum(preferences["interests"].get(c, 0.0) for c in email.citations))
    disliked = any(c in preferences["dislikes"] for c in email.citations)
    cta = perceived_cta(email.body)
    reply_logit = (
        -2.0
        + 1.5 * interest
        - 1.0 * disliked
        + 0.8 * (cta == preferences["cta"])
        - 1.0 * (cta == "none")
        + 0.6 * (perceived_length(email.body) == preferences["length"])
    )
    return _sigmoid(open_logit), _sigmoid(reply_logit)


class Feedback(Protocol):
    """What scoring asks of online feedback: an estimate for one email (the seed makes a simulation repeatable)."""

    def estimate(self, scenario_id: str, email: Email | None, seed: int) -> Estimate: ...


class FeedbackSimulator:
    def __init__(self, preferences: dict[str, dict], prospects: dict[str, dict]):
        self.preferences = preferences
        self.prospects = prospects

    def observe(self, scenario_id: str, email: Email | None, seed: int) -> tuple[float, float, float]:
        """(feedback score, open rate, reply rate) from sending the email to SENDS look-alike prospects."""
        if email is None:
            return 0.0, 0.0, 0.0
        p_open, p_reply = reply_probabilities(email, self.prospects[scenario_id], self.preferences[scenario_id])
        rng = np.random.default_rng(seed)
        opens = int(rng.binomial(SENDS, p_open))
        replies = int(rng.binomial(opens, p_reply))
        score = 0.4 * opens / SENDS + 0.6 * (replies / opens if opens else 0.0)
        return score, opens / SENDS, replies / SENDS

    def estimate(self, scenario_id: str, email: Email | None, seed: int) -> Estimate:
        """The oracle: every candidate sent at once to look-alikes, full confidence (a benchmark's upper bound)."""
        score, open_rate, reply_rate = self.observe(scenario_id, email, seed)
        return Estimate(score, open_rate, reply_rate, 0.0, 1.0, FeedbackSource.OBSERVED)


@dataclass
class OutcomeFeedback:
    """The outcome model's estimate of each candidate, from the traits it shares with emails that were sent."""

    model: OutcomeModel
    prospects: dict[str, tuple[str, str, str]]  # scenario id: (prospect's name, company, segment)

    def estimate(self, scenario_id: str, email: Email | None, seed: int) -> Estimate:
        if email is None:
            return NO_ESTIMATE
        return self.model.estimate(email_features(email, *self.prospects[scenario_id]), content_hash(email))

    def draw(self, scenario_id: str, email: Email, rng: np.random.Generator) -> Estimate:
        return self.model.draw(email_features(email, *self.prospects[scenario_id]), content_hash(email), rng)


def create_feedback(graph: KnowledgeGraph) -> FeedbackSimulator | None:
    """Only graphs with hidden preferences (the demo) get simulated online feedback."""
    preferences = hidden_preferences(graph.id)
    if preferences is None or not set(graph.scenarios) <= set(preferences):
        return None
    return FeedbackSimulator(preferences, {s.id: s.prospect.model_dump() for s in graph.scenarios.values()})
