"""Intervals of rates and means: the one interval type, the Wilson score interval, and the difference of two
estimates read with a fixed-sample or an always-valid (sequential) interval.

The always-valid margin is an asymptotic confidence sequence (Waudby-Smith et al. 2023, eq. 9, as GrowthBook's
sequential testing uses): it holds at every look at once, so looking as often as one likes keeps the one-sided 5 %
false-promotion rate, for an interval about 1.7 times as wide as one look's."""

import math

from pydantic import BaseModel, Field

Z_90 = 1.644854  # an Interval's half-width in standard errors: the two-sided 90 % normal quantile
Z_95 = 1.959964  # the two-sided 95 % normal quantile
# The confidence sequence is narrowest at this many sends of both policies, and within 10 % of that from a quarter to
# four times as many: the hundreds to few thousands of sends at which a team's evaluations decide.
SEQUENTIAL_TUNED_AT = 1_000
ALPHA = 0.10  # two-sided, as the 90 % intervals


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
