"""Intervals of rates and means: the one interval type, the Wilson score interval, the difference of two
estimates read with a fixed-sample or an always-valid (sequential) interval, and the sends a decision between two
rates needs.

The always-valid margin is an asymptotic confidence sequence (Waudby-Smith et al. 2023, eq. 9, as GrowthBook's
sequential testing uses): it holds at every look at once, so looking as often as one likes keeps the one-sided 5 %
false-promotion rate, for an interval about 1.7 times as wide as one look's."""

import math
from statistics import NormalDist

from pydantic import BaseModel, Field

Z_90 = 1.644854  # an Interval's half-width in standard errors: the two-sided 90 % normal quantile
Z_95 = 1.959964  # the two-sided 95 % normal quantile
# The confidence sequence is narrowest at this many sends of both policies, and within 10 % of that from a quarter to
# four times as many: the hundreds to few thousands of sends at which a team's evaluations decide.
SEQUENTIAL_TUNED_AT = 1_000
ALPHA = 0.10  # two-sided, as the 90 % intervals
POWER = 0.80  # the chance that a decision's sends show a difference as large as the one assumed: the usual convention


class Interval(BaseModel):
    """An estimate with its 90 % interval (an evaluation's, and the promotion events that quote it)."""

    value: float
    low: float = Field(description="The 90 % interval's lower end.")
    high: float


def wilson(rate: float, n: float, z: float = Z_90) -> tuple[float, float]:
    """The Wilson score interval of a Bernoulli rate measured on n draws: honest at 0 of 3 or 3 of 3, where the
    normal approximation is not."""
    z2 = z**2 / n
    centre = (rate + z2 / 2) / (1 + z2)
    half = z * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n)) / (1 + z2)
    return max(0.0, centre - half), min(1.0, centre + half)


def standard_error(interval: Interval) -> float:
    """From a 90 % interval clipped to [0, 1]: its wider half, the side clipping left whole (or the Wilson bound's,
    where that reaches further)."""
    return max(interval.high - interval.value, interval.value - interval.low) / Z_90


def compared(mine: Interval, theirs: Interval, *, sends: int | None = None) -> tuple[float, float]:
    """The difference between two independent estimates and the half-width of its 90 % interval: the fixed-sample
    one, or, given the `sends` both rest on, the always-valid one."""
    error = math.hypot(standard_error(mine), standard_error(theirs))
    if sends is None:
        return mine.value - theirs.value, Z_90 * error
    return mine.value - theirs.value, always_valid_margin(error, sends)


def always_valid_margin(standard_error: float, sends: int, tuned_at: int = SEQUENTIAL_TUNED_AT,
                        alpha: float = ALPHA) -> float:
    """Half-width of the two-sided 1 − alpha confidence sequence of an estimate with this standard error from `sends`
    observations: √(2(nρ² + 1) / (nρ²) · ln(√(nρ² + 1) / alpha)) standard errors, ρ² tuned to be narrowest at
    `tuned_at` (about 2.76 there at alpha 0.1, against 1.645 for one look)."""
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / tuned_at
    x = max(sends, 1) * rho2
    return standard_error * math.sqrt(2 * (x + 1) / x * math.log(math.sqrt(x + 1) / alpha))


def sends_to_decide(rate: float, other: float, *, power: float = POWER, sequential: bool = False) -> int | None:
    """Sends of each of two policies after which the gate's test (the 90 % interval of the difference above zero: a
    one-sided 5 % test) tells these two positive-reply rates apart with probability `power`, were they the true ones:
    the sample size of two proportions without continuity correction (Fleiss, Statistical Methods for Rates and
    Proportions, 3rd ed., ch. 4), n = (z_a·√(2·p̄(1 − p̄)) + z_b·√(p1(1 − p1) + p2(1 − p2)))² / (p1 − p2)², with
    p̄ their mean, z_a = 1.645 and z_b the `power` quantile (0.842 at 80 %). A `sequential` gate's always-valid
    interval is wider the more sends it rests on: z_a is then its width at the 2n sends of both, n found by fixed-point
    iteration. None for equal rates: no number of sends tells them apart."""
    p1, p2 = (min(max(r, 0.0), 1.0) for r in (rate, other))
    if p1 == p2:
        return None
    mean = (p1 + p2) / 2
    null, alternative = math.sqrt(2 * mean * (1 - mean)), math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    z_b = NormalDist().inv_cdf(power)

    def needed(z_a: float) -> int:
        return math.ceil(((z_a * null + z_b * alternative) / (p1 - p2)) ** 2)

    n = needed(Z_90)
    if sequential:
        for _ in range(100):  # the width changes slowly with n: a few steps settle it
            n, before = needed(always_valid_margin(1.0, 2 * n)), n
            if n == before:
                break
    return n

