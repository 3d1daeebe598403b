"""When an evaluation puts a policy ahead of the champion: the 90 % interval of the difference between their
off-policy estimates lies above zero. The estimate is the doubly robust one where the outcome model could predict,
else SNIPS; each one's standard error is read back from its own 90 % interval, and the two count as independent (each
rests on the sends its own policy wrote). Two intervals that merely overlap can still put a difference ahead: asking
them to part would need about twice the sends. When the difference is not yet clear, the message says how many more
sends of each would make it so at the difference seen so far (standard errors shrink with the square root of the
sends).

Those intervals are fixed-sample ones: evaluating every week and promoting on the first that clears zero promotes an
equal challenger more often than one look would. A deployment that asks for `sequential` evidence reads an
always-valid interval of the difference instead (an asymptotic confidence sequence, Waudby-Smith et al. 2023, eq. 9,
as GrowthBook's sequential testing uses): it holds at every look at once, so looking as often as one likes keeps the
one-sided 5 % false-promotion rate, for an interval about 1.7 times as wide."""

import math
from dataclasses import dataclass

from app.loop.schemas import Z_90
from app.policies.schemas import EvaluationResult, Interval, PolicyEvaluation


# The confidence sequence is narrowest at this many sends of both policies, and within 10 % of that from a quarter to
# four times as many: the hundreds to few thousands of sends at which a team's evaluations decide.
SEQUENTIAL_TUNED_AT = 1_000
ALPHA = 0.10  # two-sided, as the 90 % intervals


@dataclass(frozen=True)
class Verdict:
    ahead: bool
    message: str
    sequential: bool = False  # read with an always-valid interval of the difference
    estimator: str | None = None  # the estimates compared, when both had one (a promotion's event quotes them)
    challenger: Interval | None = None
    champion: Interval | None = None


def _estimate(evaluation: PolicyEvaluation) -> tuple[str, Interval] | None:
    off = evaluation.off_policy
    if off.dr is not None:
        return "DR", off.dr
    if off.snips is not None:
        return "SNIPS", off.snips
    return None


def _said(name: str, interval: Interval) -> str:
    return f"{name} {interval.value:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def verdict(result: EvaluationResult, challenger: str, champion: str, *, sequential: bool = False) -> Verdict:
    found = {p.policy: p for p in result.policies}
    if challenger not in found or champion not in found:
        return Verdict(False, f"no evaluation compares {challenger!r} with the champion {champion!r}: "
                              "POST /evaluations with both")
    estimates = {policy: _estimate(found[policy]) for policy in (challenger, champion)}
    for policy, estimate in estimates.items():
        if estimate is None:
            return Verdict(False, f"the evaluation has no off-policy estimate of {policy!r}: "
                                  f"{found[policy].off_policy.reason}; send its drafts and evaluate again")
    (name, mine), (_, theirs) = estimates[challenger], estimates[champion]
    shown = f"{challenger!r} {_said(name, mine)} against the champion {champion!r} {_said(name, theirs)}"
    sends = [found[p].off_policy.matched for p in (challenger, champion)]
    estimates = {"estimator": name, "challenger": mine, "champion": theirs, "sequential": sequential}
    difference, margin = compared(mine, theirs, sends=sum(sends) if sequential else None)
    said = (f"the difference {difference:+.3f} [{difference - margin:+.3f}, {difference + margin:+.3f}]"
            + (" (always-valid)" if sequential else ""))
    if difference - margin > 0:
        return Verdict(True, f"{shown}: {said}, ahead", **estimates)
    if difference <= 0:
        return Verdict(False, f"{shown}: {said}, not ahead", **estimates)
    more = max(math.ceil(n * (margin / difference) ** 2) - n for n in sends)
    return Verdict(False, f"{shown}: {said} holds zero; about {max(more, 1)} more sends of each would clear it at this "
                          "difference", **estimates)


def compared(mine: Interval, theirs: Interval, *, sends: int | None = None) -> tuple[float, float]:
    """The difference between two independent estimates and the half-width of its 90 % interval: the fixed-sample
    one, or, given the `sends` both rest on, the always-valid one."""
    standard_error = math.hypot(_standard_error(mine), _standard_error(theirs))
    if sends is None:
        return mine.value - theirs.value, Z_90 * standard_error
    return mine.value - theirs.value, always_valid_margin(standard_error, sends)


def always_valid_margin(standard_error: float, sends: int, tuned_at: int = SEQUENTIAL_TUNED_AT,
                        alpha: float = ALPHA) -> float:
    """Half-width of the two-sided 1 − alpha confidence sequence of an estimate with this standard error from `sends`
    observations: √(2(nρ² + 1) / (nρ²) · ln(√(nρ² + 1) / alpha)) standard errors, ρ² tuned to be narrowest at
    `tuned_at` (about 2.76 there at alpha 0.1, against 1.645 for one look)."""
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / tuned_at
    x = max(sends, 1) * rho2
    return standard_error * math.sqrt(2 * (x + 1) / x * math.log(math.sqrt(x + 1) / alpha))


def _standard_error(interval: Interval) -> float:
    """From a 90 % interval clipped to [0, 1]: its wider half, the side clipping left whole (or the Wilson bound's,
    where that reaches further)."""
    return max(interval.high - interval.value, interval.value - interval.low) / Z_90
