"""When an evaluation puts a policy ahead of the champion: the 90 % interval of the difference between their
off-policy estimates lies above zero. The estimate is the doubly robust one where the outcome model could predict,
else SNIPS; each one's standard error is read back from its own 90 % interval, and the two count as independent (each
rests on the sends its own policy wrote). Two intervals that merely overlap can still put a difference ahead: asking
them to part would need about twice the sends. When the difference is not yet clear, the message says how many
sends of each a decision needs at the rates observed, beside how many each has: a power calculation for two
proportions (`app.stats.intervals.sends_to_decide`). At cold email's few per cent that is thousands: 3 % against 2 %
needs about 3,000 sends of each. Whatever the intervals say, the challenger's replies must come from a minimum
number of distinct verified recipients (`app.outcomes.verification`; setting PROMOTION_MIN_RECIPIENTS).

Those intervals are fixed-sample ones; a deployment that asks for `sequential` evidence reads the always-valid
interval of the difference instead (`app.stats.intervals.always_valid_margin`).

The estimates are of the positive-reply rate per send (a reply the interest scale puts above 0). The
unsubscribe-and-complaint rate per send is a guardrail, as experimentation platforms guard their launches: a
challenger whose estimate of it (SNIPS) exceeds the champion's by more than the margin (setting
UNSUBSCRIBE_GUARDRAIL) is not ahead, whatever its replies."""

from dataclasses import dataclass

from app.policies.schemas import EvaluationResult, PolicyEvaluation
from app.stats.intervals import POWER, Interval, compared, sends_to_decide


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


def _unsubscribe_rate(evaluation: PolicyEvaluation) -> float | None:
    off = evaluation.unsubscribes
    estimate = off and (off.snips or off.ips)
    return estimate.value if estimate else None


def guardrail_breach(mine: PolicyEvaluation, theirs: PolicyEvaluation, margin: float) -> str | None:
    """Why the challenger's unsubscribe-and-complaint rate bars it, or None when it does not (or is not known)."""
    rates = _unsubscribe_rate(mine), _unsubscribe_rate(theirs)
    if None in rates or rates[0] - rates[1] <= margin:
        return None
    return (f"its unsubscribe-and-complaint rate {rates[0]:.4f} per send is {rates[0] - rates[1]:+.4f} over the "
            f"champion's {rates[1]:.4f}, beyond the guardrail's margin {margin:g} (UNSUBSCRIBE_GUARDRAIL): not "
            "promoted, whatever its replies")


def verdict(result: EvaluationResult, challenger: str, champion: str, *, min_recipients: int, guardrail: float,
            sequential: bool = False) -> Verdict:
    """Ahead only when the difference clears zero, the challenger's replies come from at least `min_recipients`
    distinct verified recipients (PROMOTION_MIN_RECIPIENTS: a handful of people cannot make a champion) and its
    unsubscribe-and-complaint rate stays within the `guardrail`."""
    found = {p.policy: p for p in result.policies}
    if challenger not in found or champion not in found:
        return Verdict(False, f"no evaluation compares {challenger!r} with the champion {champion!r}: "
                              "POST /evaluations with both")
    if breach := guardrail_breach(found[challenger], found[champion], guardrail):
        return Verdict(False, f"{challenger!r} against the champion {champion!r}: {breach}")
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
        recipients = found[challenger].verified_recipients
        if recipients < min_recipients:
            return Verdict(False, f"{shown}: {said}, ahead, but its replies come from {recipients} distinct verified "
                                  f"recipients and a promotion needs at least {min_recipients} "
                                  "(PROMOTION_MIN_RECIPIENTS)", **estimates)
        return Verdict(True, f"{shown}: {said}, ahead, on replies from {recipients} distinct verified recipients",
                       **estimates)
    state = ", not ahead" if difference <= 0 else " holds zero"
    return Verdict(False, f"{shown}: {said}{state}; {_sends_to_decide(mine, theirs, sends, sequential)}", **estimates)


def _sends_to_decide(mine: Interval, theirs: Interval, sends: list[int], sequential: bool) -> str:
    """How many sends of each a decision needs at the observed rates, and how many each has."""
    rates = f"at the observed rates ({mine.value:.3f} against {theirs.value:.3f})"
    has = f"the evaluation has {sends[0]:,} of the challenger's and {sends[1]:,} of the champion's"
    needed = sends_to_decide(mine.value, theirs.value, sequential=sequential)
    if needed is None:
        return f"{rates} no number of sends tells the two apart; {has}"
    interval = "the always-valid interval" if sequential else "the 90 % interval"
    return (f"{rates} a decision needs about {needed:,} sends of each ({POWER * 100:.0f} % power for {interval} of the "
            f"difference, a sample size for two proportions); {has}")

