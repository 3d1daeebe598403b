"""Off-policy estimates of a policy's reply rate from logged, randomised sends: inverse propensity (IPS),
self-normalised (SNIPS) and doubly robust (DR), each with a 90 % interval, and the effective sample size.

Each logged send is (the arm that wrote it, the probability that arm had of being chosen, whether it got a reply). The
policy evaluated is an arm: it would have written the email itself, so its importance weight is 1/propensity on the
sends its arm wrote and 0 elsewhere. DR's direct method is, per logged send, the outcome model's predicted reply rate
of the email the policy writes to a prospect like that send's (`app.evaluations.workflow` says which): over every
logged send, the policy's own and the others', so the correction term only carries what the prediction misses. The
prediction depends on the send's prospect alone, never on which arm wrote it, so DR stays unbiased however good or
bad the outcome model is.

A few lines of NumPy each: Open Bandit Pipeline implements the same estimators but requires torch, pandas, seaborn and
matplotlib (see the decision record); each estimator here is tested against a case computed by hand.
"""

import math

import numpy as np
from pydantic import BaseModel, Field

from app.stats.intervals import Z_90, Interval, wilson


class OffPolicy(BaseModel):
    """A policy's off-policy estimates as an evaluation reports them: a new estimator is a function here and a field."""

    n: int = Field(description="Logged sends with a known outcome on this graph, in the batches this policy had a "
                               "share of.")
    matched: int = Field(0, description="Of those, written by this policy.")
    ess: float = Field(0.0, description="Effective sample size of the importance weights.")
    ips: Interval | None = None
    snips: Interval | None = None
    dr: Interval | None = None
    reason: str | None = Field(None, description="Why there is no estimate (never a zero in its place).")


def _rate(x: float) -> float:
    return min(1.0, max(0.0, x))


def _interval(value: float, se: float, floor_n: float | None = None) -> Interval:
    """The 90 % normal interval around the value clipped to a rate (an importance-weighted mean of 0/1 replies leaves
    [0, 1] on few sends), itself clipped. Given `floor_n`, the effective sample size of such a mean, never narrower
    than the Wilson interval of as many Bernoulli draws: sends that all got a reply, or none, would otherwise claim
    certainty (a standard error of 0) and put a policy ahead on one send."""
    value = _rate(value)
    low, high = _rate(value - Z_90 * se), _rate(value + Z_90 * se)
    if floor_n:
        wilson_low, wilson_high = wilson(value, floor_n)
        low, high = min(low, wilson_low), max(high, wilson_high)
    return Interval(value=value, low=low, high=high)



def _standard_error(x: np.ndarray) -> float:
    """Of the mean of x (0 with one value: no spread to read it from)."""
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def weights(arms: np.ndarray, propensities: np.ndarray, arm: int) -> np.ndarray:
    return np.where(arms == arm, 1.0 / propensities, 0.0)


def ips(w: np.ndarray, rewards: np.ndarray) -> Interval:
    terms = w * rewards
    return _interval(float(terms.mean()), _standard_error(terms), ess(w))


def snips(w: np.ndarray, rewards: np.ndarray) -> Interval:
    total = w.sum()
    value = float((w * rewards).sum() / total)
    se = float(math.sqrt(((w * (rewards - value)) ** 2).sum()) / total)  # the delta method's standard error
    return _interval(value, se, ess(w))


def dr(w: np.ndarray, rewards: np.ndarray, predicted: float | np.ndarray) -> Interval:
    """mean of q̂ᵢ + wᵢ·(rᵢ − q̂ᵢ), q̂ᵢ the direct method's prediction for logged send i (one value: the same for all)."""
    terms = predicted + w * (rewards - predicted)
    # from one logged send no spread gives a standard error: the Wilson interval of one draw stands in
    return _interval(float(terms.mean()), _standard_error(terms), ess(w) if len(terms) < 2 else None)


def ess(w: np.ndarray) -> float:
    squares = float((w**2).sum())
    return float(w.sum() ** 2 / squares) if squares else 0.0


def off_policy(arms: list[int], propensities: list[float], rewards: list[float], arm: int,
               predicted: float | list[float] | None) -> OffPolicy:
    """The three estimates of `arm`'s reply rate, or none with the reason (no sends, none of them by this arm).
    `predicted`: DR's direct method, per logged send (or one value for every send); None: no DR estimate."""
    n = len(arms)
    if n == 0:
        return OffPolicy(n=0, reason="no logged sends older than the reply window")
    a, p, r = np.asarray(arms), np.asarray(propensities, dtype=float), np.asarray(rewards, dtype=float)
    w = weights(a, p, arm)
    matched = int((a == arm).sum())
    if matched == 0:
        return OffPolicy(n=n, reason="none of the logged sends was written by this policy")
    q = None if predicted is None else np.broadcast_to(np.asarray(predicted, dtype=float), r.shape)
    return OffPolicy(n=n, matched=matched, ess=ess(w), ips=ips(w, r), snips=snips(w, r),
                     dr=None if q is None else dr(w, r, q))


def mean_interval(values: list[float]) -> Interval | None:
    if not values:
        return None
    x = np.asarray(values, dtype=float)
    return _interval(float(x.mean()), _standard_error(x))
