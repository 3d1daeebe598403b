"""Online feedback for scoring: the outcome model's estimate of each candidate from the emails that were sent.

The loop holds no truth about readers: the demo's readers live in `app.simulation`, reached only through the demo's
simulated provider (`app.outcomes.simulated`), whose sends come back as outcomes like any provider's; the oracle of the
benchmarks (`feedback_source: oracle`) is a `Feedback` of that provider's too.
"""


from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.agent.schemas import Email
from app.loop.features import content_hash, email_features
from app.loop.outcome_model import NO_ESTIMATE, Estimate, OutcomeModel


class Feedback(Protocol):
    """What scoring asks of online feedback: an estimate for one email (the seed makes a simulation repeatable)."""

    def estimate(self, scenario_id: str, email: Email | None, seed: int) -> Estimate: ...


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
