"""What real outcomes say about an email before it is sent: its positive-reply and negative-reply rates per delivered
send, with a confidence.

Fitted from the sent emails' mature outcomes as logistic regressions over the emails' traits (`app.loop.features`),
each trait's weight under a Gaussian prior worth `prior_strength` pseudo-sends at the population's rate. Traits that
always travel together share the credit for their emails' rates instead of each claiming all of it, and where
evidence is thin every weight is near zero and the prediction is near the population's rate.

A reply counts by what it meant, on the interest scale (setting REPLY_INTEREST, `app.outcomes.meaning`): a positive
reply by its value over the scale's highest (a meeting 1, an interested reply 0.5 at the defaults), a negative one by
its value's magnitude over the lowest's (an unsubscribe or a complaint 1, a not-interested 1/3); out-of-office,
auto-replies and bounces not at all, and a bounce is no send. The feedback score is then the expected interest of a
send over the scale's highest value, floored at 0: `P(positive) − harm_ratio · P(negative)`, where `harm_ratio` is the
lowest value's magnitude over the highest (1.5 at the defaults). Opens weigh nothing in it (machine opens are left out
of everything; human opens are fitted and shown as `open_rate`, for a person to read).
"""

import math
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

import numpy as np


class FeedbackSource(StrEnum):
    OBSERVED = "observed"  # this very email was sent and its outcomes are mature
    PREDICTED = "predicted"  # the model's estimate from emails like it
    NONE = "none"  # no outcomes to go on: the reward is the judge's


@dataclass(frozen=True)
class SentEmail:
    """One sent email's traits and its mature outcomes over distinct recipients: `delivered` those whose outcome is
    known, `positive` and `negative` the sums of their replies' weights on the interest scale (each in [0, 1] per
    recipient)."""

    features: list[str]
    content_hash: str
    delivered: int
    opens: int
    positive: float
    negative: float = 0.0


def feedback_score(p_positive: float, p_negative: float, harm_ratio: float) -> float:
    """The expected interest of a send over the scale's highest value, in [0, 1]: P(positive) − harm_ratio ·
    P(negative), floored at 0 (opens weigh nothing)."""
    return min(1.0, max(0.0, p_positive - harm_ratio * p_negative))


@dataclass(frozen=True)
class Estimate:
    score: float  # the feedback term of the reward, in [0, 1]
    p_open: float  # human opens: shown, never scored
    p_positive: float  # interest-weighted positive replies per delivered send
    p_negative: float  # interest-weighted negative replies (an unsubscribe or complaint the worst) per delivered send
    confidence: float  # in [0, 1]: how far the evidence moves the reward from the baseline toward this score
    source: FeedbackSource
    baseline: float = 0.0  # the score of an email the evidence says nothing about: the population's (moot at confidence 1)

    @classmethod
    def of_rates(cls, p_open: float, p_positive: float, p_negative: float, harm_ratio: float, confidence: float,
                 source: FeedbackSource, baseline: float = 0.0) -> "Estimate":
        return cls(feedback_score(p_positive, p_negative, harm_ratio), p_open, p_positive, p_negative, confidence,
                   source, baseline)


NO_ESTIMATE = Estimate(0.0, 0.0, 0.0, 0.0, 0.0, FeedbackSource.NONE)
NEWTON_STEPS = 50


def _sigmoid(x):
    """Without overflow for any log-odds, of a number or an array: a posterior draw for a trait of a population that
    never replied can be far out (its prior is wide where the rate is near 0), and so can a Newton step."""
    return np.exp(-np.logaddexp(0, -x))


@dataclass(frozen=True)
class TraitRegression:
    """logit P = intercept + Σ weight[trait] over the email's traits; a trait never sent weighs nothing."""

    intercept: float
    weights: dict[str, float]
    covariance: np.ndarray  # the posterior's, by Laplace's approximation: intercept first, then the traits in order
    prior_variance: float  # of each coefficient
    population: float  # the rate over every send (Beta(1, 1) smoothed), where the prior centres an email

    def probability(self, features: list[str]) -> float:
        return float(_sigmoid(self.intercept + sum(self.weights.get(trait, 0.0) for trait in features)))

    def _logit_variances(self, features: list[str]) -> tuple[float, float]:
        """(posterior, prior) variance of this email's log-odds: a trait never sent keeps its prior's."""
        known = [i + 1 for i, trait in enumerate(self.weights) if trait in set(features)]
        unknown = len(set(features)) - len(known)
        rows = [0, *known]
        posterior = float(self.covariance[np.ix_(rows, rows)].sum()) + unknown * self.prior_variance
        return posterior, (len(rows) + unknown) * self.prior_variance

    def certainty(self, features: list[str]) -> float:
        """The share of the prior's uncertainty about this email's log-odds that the evidence removed, in [0, 1]:
        1 − posterior variance ÷ prior variance. Near 0 for traits never sent, or only ever sent together with
        traits this email lacks; near 1 for a combination the sends pinned down."""
        posterior, prior = self._logit_variances(features)
        return max(0.0, 1 - posterior / prior)

    def traits_posterior(self, traits: list[str]) -> tuple[float, float]:
        """(mean, standard deviation) of the sum of some traits' weights: the Laplace posterior's, with the prior's
        for each trait never sent."""
        index = {trait: i + 1 for i, trait in enumerate(self.weights)}
        known = [index[trait] for trait in traits if trait in index]
        unknown = len(traits) - len(known)
        mean = sum(self.weights[trait] for trait in traits if trait in index)
        variance = float(self.covariance[np.ix_(known, known)].sum()) + unknown * self.prior_variance
        return mean, math.sqrt(variance)

    def draw(self, features: list[str], rng: np.random.Generator) -> float:
        """A probability as plausible as the posterior says: its log-odds drawn from the Laplace posterior."""
        mean = self.intercept + sum(self.weights.get(trait, 0.0) for trait in features)
        return float(_sigmoid(rng.normal(mean, math.sqrt(self._logit_variances(features)[0]))))

    @classmethod
    def fit(cls, traits: list[str], design: np.ndarray, trials: np.ndarray, successes: np.ndarray,
            prior_strength: float) -> "TraitRegression":
        """The posterior mode, by Newton's method. Every coefficient has a Gaussian prior of precision
        prior_strength · p(1 − p), the information of prior_strength sends at the population's rate p (Beta(1, 1)
        smoothed): the intercept centred on the population's log-odds, each trait weight on zero. So a trait seen
        in n sends moves the prediction about n / (n + prior_strength) of the way to what its emails showed."""
        population = (successes.sum() + 1) / (trials.sum() + 2)
        x = np.hstack([np.ones((design.shape[0], 1)), design])
        n, s = trials, successes
        precision = np.full(x.shape[1], prior_strength * population * (1 - population))
        centre = np.zeros(x.shape[1])
        centre[0] = math.log(population / (1 - population))
        beta = centre.copy()

        def objective(b: np.ndarray) -> float:  # the log posterior, up to a constant
            eta = x @ b
            return float(s @ eta - n @ np.logaddexp(0, eta) - precision @ (b - centre) ** 2 / 2)

        for _ in range(NEWTON_STEPS):
            p = _sigmoid(x @ beta)
            gradient = x.T @ (s - n * p) - precision * (beta - centre)
            hessian = (x.T * (n * p * (1 - p))) @ x + np.diag(precision)
            step = np.linalg.solve(hessian, gradient)
            # A full step from far off (rare outcomes, traits sent together) can overshoot past where exp overflows:
            # halve it until the posterior does not fall, so every step climbs.
            current, scale = objective(beta), 1.0
            while objective(beta + scale * step) < current and scale > 1e-6:
                scale /= 2
            beta += scale * step
            if np.abs(scale * step).max() < 1e-9:
                break
        p = _sigmoid(x @ beta)
        hessian = (x.T * (n * p * (1 - p))) @ x + np.diag(precision)
        return cls(float(beta[0]), dict(zip(traits, beta[1:].tolist(), strict=True)), np.linalg.inv(hessian),
                   float(1 / precision[0]), float(population))


@dataclass
class OutcomeModel:
    prior_strength: float
    harm_ratio: float = 1.0  # the interest scale's lowest value's magnitude over its highest
    delivered: int = 0
    opens: TraitRegression | None = None
    positive: TraitRegression | None = None
    negative: TraitRegression | None = None
    # content hash: (delivered, opens, positive, negative)
    observed: dict[str, tuple[int, int, float, float]] = field(default_factory=dict)

    @classmethod
    def fit(cls, sent: list[SentEmail], prior_strength: float, harm_ratio: float = 1.0) -> "OutcomeModel":
        """The model of these sends. The same sends give the same model, and a run's steps each fit what has arrived
        so far, usually the same: the last few fits are kept (a fitted model is never changed)."""
        rows = tuple((tuple(e.features), e.content_hash, e.delivered, e.opens, e.positive, e.negative) for e in sent)
        return _fitted(rows, prior_strength, harm_ratio)

    @classmethod
    def _fit(cls, sent: list[SentEmail], prior_strength: float, harm_ratio: float) -> "OutcomeModel":
        model = cls(prior_strength, harm_ratio)
        sent = [email for email in sent if email.delivered > 0]
        if not sent:
            return model
        traits = sorted({trait for email in sent for trait in email.features})
        column = {trait: j for j, trait in enumerate(traits)}
        design = np.zeros((len(sent), len(traits)))
        for i, email in enumerate(sent):
            design[i, [column[trait] for trait in email.features]] = 1.0
        delivered = np.array([e.delivered for e in sent], dtype=float)
        opens = np.array([min(e.opens, e.delivered) for e in sent], dtype=float)
        positive = np.array([min(e.positive, e.delivered) for e in sent], dtype=float)
        negative = np.array([min(e.negative, e.delivered) for e in sent], dtype=float)
        model.delivered = int(delivered.sum())
        # Emails with the same traits pooled into one row (their counts summed: the same likelihood), so a fit costs
        # what the distinct trait sets cost, not every send: a team's weeks repeat a few hundred of them.
        rows, row_of = np.unique(design, axis=0, return_inverse=True)
        row_of = row_of.reshape(-1)

        def pooled(counts: np.ndarray) -> np.ndarray:
            return np.bincount(row_of, weights=counts, minlength=len(rows))

        model.opens = TraitRegression.fit(traits, rows, pooled(delivered), pooled(opens), prior_strength)
        model.positive = TraitRegression.fit(traits, rows, pooled(delivered), pooled(positive), prior_strength)
        model.negative = TraitRegression.fit(traits, rows, pooled(delivered), pooled(negative), prior_strength)
        for email, o, p, n in zip(sent, opens, positive, negative, strict=True):
            before = model.observed.get(email.content_hash, (0, 0, 0.0, 0.0))
            model.observed[email.content_hash] = (before[0] + email.delivered, before[1] + int(o), before[2] + float(p),
                                                  before[3] + float(n))
        return model

    @property
    def fitted(self) -> bool:
        """Whether any sent email is known to have been delivered: before that, the model predicts nothing, not a
        zero."""
        return self.positive is not None

    def _estimate(self, p_open: float, p_positive: float, p_negative: float, confidence: float, source: FeedbackSource,
                  baseline: float = 0.0) -> Estimate:
        return Estimate.of_rates(p_open, p_positive, p_negative, self.harm_ratio, confidence, source, baseline)

    def estimate(self, features: list[str], content_hash: str) -> Estimate:
        """An email sent before: its own rates, shrunk toward the prediction by prior_strength pseudo-sends, with
        confidence m / (m + prior_strength) for its m deliveries. Any other: the prediction, with confidence
        n / (n + prior_strength) for the n deliveries behind the model."""
        if self.opens is None or self.positive is None or self.negative is None:
            return NO_ESTIMATE
        regressions = (self.opens, self.positive, self.negative)
        predicted = [r.probability(features) for r in regressions]
        baseline = feedback_score(self.positive.population, self.negative.population, self.harm_ratio)
        sent = self.observed.get(content_hash)
        if sent is None:
            return self._estimate(*predicted, self.positive.certainty(features), FeedbackSource.PREDICTED, baseline)
        delivered, *counts = sent
        k = self.prior_strength
        return self._estimate(*((count + k * p) / (delivered + k) for count, p in zip(counts, predicted, strict=True)),
                              delivered / (delivered + k), FeedbackSource.OBSERVED, baseline)

    def trait_draws(self, trait_sets: list[list[str]], rng: np.random.Generator) -> np.ndarray:
        """What each set of traits adds to the positive-reply log-odds, drawn from its posterior (Thompson sampling):
        near its mean for traits the sends pinned down, as wide as the prior for ones never sent. Only for a model
        fitted on sends."""
        posterior = np.array([self.positive.traits_posterior(traits) for traits in trait_sets]).reshape(-1, 2)
        return rng.normal(posterior[:, 0], posterior[:, 1])

    def draw(self, features: list[str], content_hash: str, rng: np.random.Generator) -> Estimate:
        """Rates drawn from the model's posterior (Thompson sampling), at full confidence: an email sent before draws
        from Beta(its own counts + prior_strength pseudo-sends at the prediction), any other from the regressions'
        posteriors, so an email whose traits were never sent can look as good as the evidence allows."""
        if self.opens is None or self.positive is None or self.negative is None:
            return NO_ESTIMATE
        regressions = (self.opens, self.positive, self.negative)
        sent = self.observed.get(content_hash)
        if sent is None:
            return self._estimate(*(r.draw(features, rng) for r in regressions), 1.0, FeedbackSource.PREDICTED)
        delivered, *counts = sent
        k = self.prior_strength
        # a prediction that rounds to 0 or 1 (a population that never replied) would leave Beta a parameter of 0
        predicted = [min(1 - 1e-9, max(1e-9, r.probability(features))) for r in regressions]
        return self._estimate(*(float(rng.beta(count + k * p, delivered - count + k * (1 - p)))
                                for count, p in zip(counts, predicted, strict=True)), 1.0, FeedbackSource.OBSERVED)


@lru_cache(maxsize=4)
def _fitted(rows: tuple, prior_strength: float, harm_ratio: float) -> OutcomeModel:
    sent = [SentEmail(list(features), *rest) for features, *rest in rows]
    return OutcomeModel._fit(sent, prior_strength, harm_ratio)
