"""When an evaluation puts a policy ahead of the champion: its off-policy estimate's 90 % interval lies wholly above
the champion's. The estimate is the doubly robust one where the outcome model could predict, else SNIPS. When the
intervals overlap, the message says how many more sends of each would separate them at the difference seen so far
(interval widths shrink with the square root of the sends)."""

import math
from dataclasses import dataclass

from app.policies.schemas import EvaluationResult, Interval, PolicyEvaluation


@dataclass(frozen=True)
class Verdict:
    ahead: bool
    message: str
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


def verdict(result: EvaluationResult, challenger: str, champion: str) -> Verdict:
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
    estimates = {"estimator": name, "challenger": mine, "champion": theirs}
    if mine.low > theirs.high:
        return Verdict(True, f"{shown}: ahead", **estimates)
    difference = mine.value - theirs.value
    if difference <= 0:
        return Verdict(False, f"{shown}: not ahead", **estimates)
    widths = (mine.high - mine.low + theirs.high - theirs.low) / 2
    sends = [found[p].off_policy.matched for p in (challenger, champion)]
    more = max(math.ceil(n * (widths / difference) ** 2) - n for n in sends)
    return Verdict(False, f"{shown}: the intervals overlap; about {max(more, 1)} more sends of each would separate "
                          "them at this difference", **estimates)
