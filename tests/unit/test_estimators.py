"""Off-policy estimators against cases computed by hand, the evidence rule, and the traffic split's draws."""

import math

import numpy as np
import pytest

from app.drafts.service import choose_arm
from app.policies.evidence import verdict
from app.policies.schemas import EvaluationResult
from app.stats import estimators
from app.stats.intervals import Z_90, always_valid_margin, sends_to_decide, wilson

# Six logged sends: (arm that wrote it, its propensity, replied). The evaluated arm is 1.
ARMS = [1, 0, 1, 0, 0, 1]
PROPENSITIES = [0.25, 0.75, 0.25, 0.75, 0.75, 0.5]
REPLIES = [1, 0, 0, 1, 0, 1]


def test_ips_snips_dr_and_ess_match_the_hand_computed_case():
    # weights: 4, 0, 4, 0, 0, 2 → weighted replies 4 + 2 = 6
    estimate = estimators.off_policy(ARMS, PROPENSITIES, REPLIES, arm=1, predicted=0.3)
    assert estimate.n == 6 and estimate.matched == 3
    assert estimate.ips.value == pytest.approx(6 / 6)                     # (4·1 + 4·0 + 2·1) / 6
    assert estimate.snips.value == pytest.approx(6 / 10)                  # 6 / (4 + 4 + 2)
    # DR: 0.3 + w·(r − 0.3) per send → 3.1, 0.3, −0.9, 0.3, 0.3, 1.7; mean 4.8 / 6
    assert estimate.dr.value == pytest.approx(4.8 / 6)
    assert estimate.ess == pytest.approx(10**2 / (16 + 16 + 4))           # (Σw)² / Σw²


def test_intervals_are_90_percent_normal_ones_clipped_to_rates():
    w = estimators.weights(np.asarray(ARMS), np.asarray(PROPENSITIES), 1)
    terms = [4, 0, 0, 0, 0, 2]
    mean = sum(terms) / 6
    sd = math.sqrt(sum((t - mean) ** 2 for t in terms) / 5)
    ips = estimators.ips(w, np.asarray(REPLIES, dtype=float))
    assert ips.low == pytest.approx(max(0.0, mean - 1.644854 * sd / math.sqrt(6)))
    assert ips.high == 1.0  # clipped: a rate
    # SNIPS' delta-method standard error: sqrt(Σ w²(r − v)²) / Σw with v = 0.6
    se = math.sqrt(16 * 0.4**2 + 16 * 0.6**2 + 4 * 0.4**2) / 10
    snips = estimators.off_policy(ARMS, PROPENSITIES, REPLIES, arm=1, predicted=None).snips
    assert (snips.low, snips.high) == pytest.approx((0.6 - 1.644854 * se, min(1.0, 0.6 + 1.644854 * se)))


def test_sends_that_all_replied_or_none_still_have_the_binomial_uncertainty_of_their_count():
    one_each = estimators.off_policy([1, 0], [0.5, 0.5], [1, 0], arm=1, predicted=None)
    # one reply on one send: the Wilson interval of 1 of 1, whose low end is 1 / (1 + z²), not 1.0 [1.0, 1.0]
    assert one_each.snips.value == 1.0 and one_each.snips.low == pytest.approx(1 / (1 + Z_90**2))
    assert one_each.snips.high == 1.0 and one_each.ips.low <= 1 / (1 + Z_90**2)
    champion = estimators.off_policy([1, 0], [0.5, 0.5], [1, 0], arm=0, predicted=None)
    assert champion.snips.value == 0.0 and champion.snips.high == pytest.approx(1 - 1 / (1 + Z_90**2))
    as_evaluated = EvaluationResult.model_validate({"policies": [
        {"policy": name, "held_out": 0, "judge": None, "predicted_reply": None, "off_policy": {
            "n": 2, "matched": 1, "ess": 1.0, "ips": None, "dr": None, "reason": None,
            "snips": {"value": e.snips.value, "low": e.snips.low, "high": e.snips.high}}}
        for name, e in (("new@1", one_each), ("old@1", champion))]})
    assert not verdict(as_evaluated, "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005).ahead  # a reply against none, one send each: no evidence
    # with many sends the binomial floor is the normal interval's own width: 30 of 100 at propensity 1
    many = estimators.off_policy([1] * 100, [1.0] * 100, [1] * 30 + [0] * 70, arm=1, predicted=None).snips
    low, high = wilson(0.3, 100)
    assert (many.low, many.high) == pytest.approx((min(low, 0.3 - Z_90 * math.sqrt(0.21) / 10),
                                                   max(high, 0.3 + Z_90 * math.sqrt(0.21) / 10)))
    assert high - low == pytest.approx(2 * Z_90 * math.sqrt(0.21) / 10, rel=0.02)


def test_an_importance_weighted_rate_beyond_one_is_clipped_with_its_interval():
    # two sends of the arm at propensity 0.01, both replied, among 7: IPS = 2 · 100 / 7 = 28.6 before clipping
    found = estimators.off_policy([1, 1, 0, 0, 0, 0, 0], [0.01, 0.01] + [0.99] * 5, [1, 1, 0, 0, 0, 0, 0], arm=1,
                                  predicted=0.2)
    for estimate in (found.ips, found.snips, found.dr):
        assert 0 <= estimate.low <= estimate.value <= estimate.high <= 1, estimate
    assert found.ips.value == 1.0 and found.dr.value == 1.0
    # four replied sends at 0.01 among 50: DR 6.6 ± 5.1 unclipped; around its clipped value it spans every rate,
    # rather than collapsing to 1.0 [1.0, 1.0] and telling the gate it is certain
    many = estimators.off_policy([1] * 4 + [0] * 46, [0.01] * 4 + [0.99] * 46, [1] * 4 + [0] * 46, arm=1, predicted=0.2)
    assert (many.dr.value, many.dr.low, many.dr.high) == (1.0, 0.0, 1.0)
    # one logged send has no spread to read a standard error from: DR keeps the Wilson interval of one draw
    one = estimators.off_policy([1], [0.5], [1], arm=1, predicted=0.2)
    assert one.dr.value == 1.0 and one.dr.low == pytest.approx(1 / (1 + Z_90**2))


def test_no_sends_or_none_by_the_policy_give_no_estimate_and_say_why():
    empty = estimators.off_policy([], [], [], arm=1, predicted=0.2)
    assert (empty.ips, empty.snips, empty.dr) == (None, None, None) and "no logged sends" in empty.reason
    others = estimators.off_policy([0, 0], [0.5, 0.5], [1, 0], arm=1, predicted=0.2)
    assert others.ips is None and "none of the logged sends" in others.reason


MIN_RECIPIENTS = 5


def result(challenger: tuple[float, float, float], champion: tuple[float, float, float], matched=(50, 450),
           recipients: int = MIN_RECIPIENTS) -> EvaluationResult:
    def policy(name, interval, n):
        value, low, high = interval
        return {"policy": name, "held_out": 0, "judge": None, "predicted_reply": None, "verified_recipients": recipients,
                "off_policy": {
            "n": 500, "matched": n, "ess": float(n), "ips": None, "snips": None,
            "dr": {"value": value, "low": low, "high": high}, "reason": None}}
    return EvaluationResult.model_validate({"policies": [policy("new@1", challenger, matched[0]),
                                                         policy("old@1", champion, matched[1])]})


def test_a_challenger_is_ahead_when_the_interval_of_the_difference_clears_zero():
    assert verdict(result((0.20, 0.16, 0.24), (0.10, 0.08, 0.12)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005).ahead
    # standard errors 0.04 / z and 0.03 / z: the difference's 90 % half-width is √(0.04² + 0.03²) = 0.05 < 0.06, ahead
    # although the two intervals overlap (0.12 < 0.13)
    assert verdict(result((0.16, 0.12, 0.20), (0.10, 0.07, 0.13)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005).ahead
    overlapping = verdict(result((0.14, 0.09, 0.19), (0.10, 0.08, 0.12)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert not overlapping.ahead and "the difference +0.040 [-0.014, +0.094] holds zero" in overlapping.message
    # 0.14 against 0.10: p̄ = 0.12, (1.644854 · √(2 · 0.12 · 0.88) + 0.841621 · √(0.14 · 0.86 + 0.10 · 0.90)) / 0.04
    # = (1.644854 · 0.459565 + 0.841621 · 0.458694) / 0.04 = 28.5490, squared 815.05
    assert ("at the observed rates (0.140 against 0.100) a decision needs about 816 sends of each (80 % power for the "
            "90 % interval of the difference") in overlapping.message
    assert "the evaluation has 50 of the challenger's and 450 of the champion's" in overlapping.message
    # an interval clipped at 0 keeps its standard error on the side that was not clipped: √(0.03² + 0.06²) = 0.067
    # is more than the difference 0.06 (the clipped side's 0.02 would have made it √(0.03² + 0.02²) = 0.036, ahead)
    assert not verdict(result((0.08, 0.05, 0.11), (0.02, 0.0, 0.08)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005).ahead
    behind = verdict(result((0.08, 0.05, 0.11), (0.10, 0.08, 0.12)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert not behind.ahead and "not ahead" in behind.message
    assert "at the observed rates (0.080 against 0.100) a decision needs about" in behind.message
    assert not verdict(result((0.2, 0.1, 0.3), (0.1, 0.0, 0.2)), "other@2", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005).ahead


def test_the_sends_a_decision_needs_are_the_sample_size_of_two_proportions():
    # 3 % against 2 %: p̄ = 0.025, (1.644854 · √(2 · 0.025 · 0.975) + 0.841621 · √(0.03 · 0.97 + 0.02 · 0.98)) / 0.01
    # = (1.644854 · 0.220794 + 0.841621 · 0.220681) / 0.01 = 54.8907, squared 3012.99
    assert sends_to_decide(0.03, 0.02) == sends_to_decide(0.02, 0.03) == 3013
    assert sends_to_decide(0.02, 0.02) is None
    # always-valid: z_a is the confidence sequence's width at the 2n sends of both, n its own fixed point
    n = sends_to_decide(0.03, 0.02, sequential=True)
    z_a = always_valid_margin(1.0, 2 * n)
    assert n == math.ceil(((z_a * math.sqrt(2 * 0.025 * 0.975) + 0.841621 * math.sqrt(0.0487)) / 0.01) ** 2)
    assert n > 2 * 3013


def test_a_challenger_ahead_on_replies_of_too_few_distinct_verified_recipients_is_not_promoted_and_told_why():
    few = verdict(result((0.20, 0.16, 0.24), (0.10, 0.08, 0.12), recipients=MIN_RECIPIENTS - 1), "new@1", "old@1",
                  min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert not few.ahead
    assert f"its replies come from {MIN_RECIPIENTS - 1} distinct verified recipients" in few.message
    assert f"needs at least {MIN_RECIPIENTS} (PROMOTION_MIN_RECIPIENTS)" in few.message
    enough = verdict(result((0.20, 0.16, 0.24), (0.10, 0.08, 0.12)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert enough.ahead and f"on replies from {MIN_RECIPIENTS} distinct verified recipients" in enough.message


def test_the_always_valid_margin_is_the_confidence_sequence_of_waudby_smith_et_al():
    # at alpha 0.1, ρ²·n* = −2 ln 0.1 + ln(−2 ln 0.1 + 1) = 4.60517 + 1.72369 = 6.32886; at n = n* = 1,000:
    # √(2 · 7.32886 / 6.32886 · ln(√7.32886 / 0.1)) = √(2.31601 · 3.29850) = 2.76394 standard errors
    assert always_valid_margin(0.05, 1_000) == pytest.approx(0.05 * 2.76394, rel=1e-5)
    # at a quarter of that, nρ² = 1.58221: √(2 · 2.58221 / 1.58221 · ln(√2.58221 / 0.1)) = √(3.26405 · 2.77691) = 3.01064
    assert always_valid_margin(0.05, 250) == pytest.approx(0.05 * 3.01064, rel=1e-5)
    assert always_valid_margin(0.05, 1_000) > Z_90 * 0.05  # wider than one look's


def test_a_sequential_verdict_needs_the_wider_always_valid_interval_of_the_difference():
    # standard errors 0.04 / z and 0.03 / z: one look's half-width 0.05 < 0.06, ahead; always-valid, over 50 + 450
    # sends (nρ² = 3.16443: √(2 · 4.16443 / 3.16443 · ln(√4.16443 / 0.1)) = 2.81742): 0.05 / 1.644854 · 2.81742 = 0.0856
    evidence = result((0.16, 0.12, 0.20), (0.10, 0.07, 0.13))
    assert verdict(evidence, "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005).ahead
    sequential = verdict(evidence, "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005, sequential=True)
    assert not sequential.ahead and sequential.sequential
    assert "the difference +0.060 [-0.026, +0.146] (always-valid) holds zero" in sequential.message
    assert verdict(result((0.30, 0.26, 0.34), (0.10, 0.07, 0.13)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005, sequential=True).ahead


def test_a_verdict_keeps_the_estimates_it_compared_for_the_promotion_event():
    ahead = verdict(result((0.20, 0.16, 0.24), (0.10, 0.08, 0.12)), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert (ahead.estimator, ahead.challenger.low, ahead.champion.high) == ("DR", 0.16, 0.12)
    unknown = verdict(result((0.2, 0.1, 0.3), (0.1, 0.0, 0.2)), "other@2", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert (unknown.estimator, unknown.challenger, unknown.champion) == (None, None, None)


def test_the_observed_traffic_split_matches_the_shares():
    shares = [0.7, 0.2, 0.1]
    counts = [0, 0, 0]
    for position in range(10_000):
        counts[choose_arm(shares, 7, f"p{position}", position)] += 1
    assert [c / 10_000 for c in counts] == pytest.approx(shares, abs=0.015)
    assert choose_arm(shares, 7, "p1", 1) == choose_arm(shares, 7, "p1", 1)  # reproducible from the seed
    assert choose_arm([0.0, 1.0], 3, "p1", 0) == 1


def test_auto_traffic_gives_a_policy_without_its_sends_an_even_share_and_the_rest_to_the_better_ones():
    from app.stats.bandit import auto_shares

    assert auto_shares([(50, 5), (500, 100)], floor=0.01, min_sends=100, seed=1) == pytest.approx([0.5, 0.5])
    assert auto_shares([(0, 0), (99, 40), (20, 0)], floor=0.0, min_sends=100, seed=1) == pytest.approx([1 / 3] * 3)
    # a challenger just added: a quarter; the three with their sends split the rest by top-two sampling
    young, worst, best, middle = auto_shares([(10, 1), (400, 20), (400, 60), (400, 40)], floor=0.0, min_sends=100, seed=1)
    assert young == pytest.approx(1 / 4) and worst + best + middle == pytest.approx(3 / 4) and best > middle > worst
    shares = auto_shares([(400, 20), (400, 60), (400, 40)], floor=0.05, min_sends=100, seed=1)
    assert sum(shares) == pytest.approx(1.0) and min(shares) >= 0.05
    assert shares[1] > shares[2] > shares[0]  # 15 % beats 10 % beats 5 %
    # top-two sampling sends the clear best about half the time, not all of it: its rival keeps learning
    clear = auto_shares([(2000, 400), (2000, 100)], floor=0.0, min_sends=100, seed=2)
    assert clear[0] == pytest.approx(0.5, abs=0.03)
    assert auto_shares([(10, 1)], floor=0.2, min_sends=100, seed=3) == [1.0]


def test_dr_takes_the_direct_method_per_logged_send():
    # q̂ per send: 0.5, 0.2, 0.5, 0.1, 0.2, 0.4; weights 4, 0, 4, 0, 0, 2
    # terms q̂ + w·(r − q̂): 0.5 + 4·0.5 = 2.5, 0.2, 0.5 − 4·0.5 = −1.5, 0.1, 0.2, 0.4 + 2·0.6 = 1.6; mean 3.1 / 6
    estimate = estimators.off_policy(ARMS, PROPENSITIES, REPLIES, arm=1, predicted=[0.5, 0.2, 0.5, 0.1, 0.2, 0.4])
    assert estimate.dr.value == pytest.approx(3.1 / 6)
    terms = [2.5, 0.2, -1.5, 0.1, 0.2, 1.6]
    mean = sum(terms) / 6
    se = math.sqrt(sum((t - mean) ** 2 for t in terms) / 5) / math.sqrt(6)
    assert (estimate.dr.low, estimate.dr.high) == pytest.approx((max(0.0, mean - 1.644854 * se), min(1.0, mean + 1.644854 * se)))
    # a perfect direct method and no noise: DR is exact where SNIPS only sees the evaluated arm's own sends
    exact = estimators.off_policy([1, 0, 0, 0], [0.5] * 4, [1, 0, 0, 0], arm=1, predicted=[1.0, 0.0, 1.0, 0.0])
    assert exact.dr.value == pytest.approx(0.5) and exact.snips.value == pytest.approx(1.0)


def test_the_direct_method_of_a_send_is_the_policys_held_out_prediction_for_a_prospect_like_its_prospect():
    from app.evaluations.workflow import direct_method
    from app.knowledge_graph.service import demo_graph

    scenarios = list(demo_graph().scenarios.values())[:3]
    a, b, c = ({"id": s.id, **s.prospect.model_dump()} for s in scenarios)
    # held out: two emails to prospects like a (0.1 and 0.3), one like b (0.6); none like c
    found = direct_method(scenarios, [a["id"], b["id"], a["id"]], [0.1, 0.6, 0.3], [a, b, c, a])
    assert found == pytest.approx([0.2, 0.6, (0.1 + 0.6 + 0.3) / 3, 0.2])  # c: the mean of every held-out email
    assert direct_method(scenarios, [], [], [a]) is None


def with_unsubscribes(evaluated: EvaluationResult, challenger: float, champion: float) -> EvaluationResult:
    data = evaluated.model_dump(mode="json")
    for policy, rate in zip(data["policies"], (challenger, champion), strict=True):
        policy["unsubscribes"] = {"n": 500, "matched": policy["off_policy"]["matched"], "ess": 1.0, "ips": None,
                                  "snips": {"value": rate, "low": rate, "high": rate}, "dr": None, "reason": None}
    return EvaluationResult.model_validate(data)


def test_a_challenger_that_raises_unsubscribes_beyond_the_margin_is_not_ahead_whatever_its_replies():
    clearly_ahead = result((0.30, 0.26, 0.34), (0.10, 0.08, 0.12))
    within = verdict(with_unsubscribes(clearly_ahead, 0.014, 0.010), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert within.ahead
    beyond = verdict(with_unsubscribes(clearly_ahead, 0.016, 0.010), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.005)
    assert not beyond.ahead
    assert "unsubscribe-and-complaint rate 0.0160" in beyond.message and "+0.0060" in beyond.message
    assert "UNSUBSCRIBE_GUARDRAIL" in beyond.message and "whatever its replies" in beyond.message
    # fewer unsubscribes than the champion never bar it; a wider margin lets the same challenger through
    assert verdict(with_unsubscribes(clearly_ahead, 0.0, 0.05), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.0).ahead
    assert verdict(with_unsubscribes(clearly_ahead, 0.016, 0.010), "new@1", "old@1", min_recipients=MIN_RECIPIENTS, guardrail=0.01).ahead
