"""What real outcomes say about an email before it is sent: P(open) and P(reply | delivered), with a confidence.

Fitted from the sent emails' mature outcomes (machine opens, bounces and auto-replies left out). Each
trait of an email (`app.loop.features`) has its own rate, shrunk toward the population's by
`prior_strength` pseudo-sends; a prediction adds the traits' log-odds deviations from the population.
Where evidence is thin every deviation is near zero and the prediction is the population's rate.
"""

import math
from dataclasses import dataclass, field
from enum import StrEnum


class FeedbackSource(StrEnum):
    OBSERVED = "observed"  # this very email was sent and its outcomes are mature
    PREDICTED = "predicted"  # the model's estimate from emails like it
    NONE = "none"  # no outcomes to go on: the reward is the judge's


@dataclass(frozen=True)
class SentEmail:
    """One sent email's traits and its mature outcomes, counted in distinct recipients."""

    features: list[str]
    content_hash: str
    delivered: int
    opens: int
    replies: int


@dataclass(frozen=True)
class Estimate:
    score: float  # the feedback term of the reward, in [0, 1]
    p_open: float
    p_reply: float
    confidence: float  # in [0, 1]: how much of the feedback weight this estimate carries
    source: FeedbackSource

    @classmethod
    def of_rates(cls, p_open: float, p_reply: float, confidence: float, source: FeedbackSource) -> "Estimate":
        """Opens count, replies count more: score = 0.4 · P(open) + 0.6 · P(reply | delivered)."""
        return cls(0.4 * p_open + 0.6 * p_reply, p_open, p_reply, confidence, source)


NO_ESTIMATE = Estimate(0.0, 0.0, 0.0, 0.0, FeedbackSource.NONE)


def _logit(p: float) -> float:
    p = min(1 - 1e-6, max(1e-6, p))
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@dataclass
class _Tally:
    delivered: int = 0
    opens: int = 0
    replies: int = 0


@dataclass
class OutcomeModel:
    prior_strength: float
    population: _Tally = field(default_factory=_Tally)
    traits: dict[str, _Tally] = field(default_factory=dict)
    observed: dict[str, _Tally] = field(default_factory=dict)

    @classmethod
    def fit(cls, sent: list[SentEmail], prior_strength: float) -> "OutcomeModel":
        model = cls(prior_strength)
        for email in sent:
            if email.delivered <= 0:
                continue
            for tally in (model.population, model.observed.setdefault(email.content_hash, _Tally()),
                          *(model.traits.setdefault(trait, _Tally()) for trait in email.features)):
                tally.delivered += email.delivered
                tally.opens += min(email.opens, email.delivered)
                tally.replies += min(email.replies, email.delivered)
        return model

    def _rates(self, tally: _Tally, toward: tuple[float, float]) -> tuple[float, float]:
        k = self.prior_strength
        return ((tally.opens + k * toward[0]) / (tally.delivered + k), (tally.replies + k * toward[1]) / (tally.delivered + k))

    def estimate(self, features: list[str], content_hash: str) -> Estimate:
        """Observed rates for an email sent before, else the prediction; confidence n / (n + prior_strength)."""
        n = self.population.delivered
        if n == 0:
            return NO_ESTIMATE
        base = ((self.population.opens + 1) / (n + 2), (self.population.replies + 1) / (n + 2))  # Beta(1, 1) prior
        sent = self.observed.get(content_hash)
        if sent is not None:
            p_open, p_reply = self._rates(sent, base)
            return Estimate.of_rates(p_open, p_reply, sent.delivered / (sent.delivered + self.prior_strength),
                                     FeedbackSource.OBSERVED)
        open_logit, reply_logit = _logit(base[0]), _logit(base[1])
        for trait in features:
            tally = self.traits.get(trait)
            if tally is not None:
                p_open, p_reply = self._rates(tally, base)
                open_logit += _logit(p_open) - _logit(base[0])
                reply_logit += _logit(p_reply) - _logit(base[1])
        return Estimate.of_rates(_sigmoid(open_logit), _sigmoid(reply_logit), n / (n + self.prior_strength),
                                 FeedbackSource.PREDICTED)
