"""The outcome model, the reward blend on it, and the statistics of GET /runs/{id}/outcomes: figures pinned."""

import pytest

from app.loop.outcome_model import NO_ESTIMATE, Estimate, FeedbackSource, OutcomeModel, SentEmail
from app.loop.reward import blend
from app.outcomes import refs
from app.outcomes.service import spearman, wilson_interval

K = 20.0


def sent(features, delivered, opens, replies, content="h") -> SentEmail:
    return SentEmail(features=features, content_hash=content, delivered=delivered, opens=opens, replies=replies)


def test_the_blend_scales_the_feedback_weight_by_the_confidence():
    estimate = Estimate.of_rates(p_open=0.5, p_reply=0.25, confidence=0.5, source=FeedbackSource.PREDICTED)
    assert estimate.score == pytest.approx(0.4 * 0.5 + 0.6 * 0.25)
    assert blend(0.8, estimate, weight=0.3) == pytest.approx(0.85 * 0.8 + 0.15 * estimate.score)
    assert blend(0.8, NO_ESTIMATE, weight=0.3) == 0.8  # no outcomes: the judge's score
    full = Estimate.of_rates(1.0, 1.0, 1.0, FeedbackSource.OBSERVED)
    assert blend(0.2, full, weight=1.0) == pytest.approx(1.0)


def test_without_outcomes_there_is_no_estimate():
    assert OutcomeModel.fit([], K).estimate(["tone:formal"], "x") == NO_ESTIMATE
    assert OutcomeModel.fit([sent(["tone:formal"], 0, 0, 0)], K).estimate(["tone:formal"], "x") == NO_ESTIMATE


def test_an_unseen_email_gets_the_populations_rates_and_evidence_earns_confidence():
    model = OutcomeModel.fit([sent(["tone:formal"], 100, 40, 10, "a"), sent(["tone:direct"], 100, 20, 2, "b")], K)
    estimate = model.estimate(["tone:friendly"], "new")
    assert estimate.source == FeedbackSource.PREDICTED
    assert estimate.p_open == pytest.approx((60 + 1) / (200 + 2))  # Beta(1, 1) prior on the population
    assert estimate.p_reply == pytest.approx((12 + 1) / (200 + 2))
    assert estimate.confidence == pytest.approx(200 / (200 + K))


def test_a_trait_moves_the_prediction_by_its_shrunk_rate():
    model = OutcomeModel.fit([sent(["tone:formal"], 100, 40, 20, "a"), sent(["tone:direct"], 100, 40, 0, "b")], K)
    formal, direct = model.estimate(["tone:formal"], "x"), model.estimate(["tone:direct"], "y")
    population = (20 + 1) / (200 + 2)
    assert formal.p_reply == pytest.approx((20 + K * population) / (100 + K))  # one trait: its shrunk rate exactly
    assert direct.p_reply == pytest.approx((0 + K * population) / (100 + K))
    thin = OutcomeModel.fit([sent(["tone:formal"], 1000, 400, 100, "a"), sent(["tone:direct"], 2, 2, 2, "b")], K)
    assert thin.estimate(["tone:direct"], "z").p_reply < 0.2  # two sends say little: near the population's 0.1


def test_an_email_sent_before_uses_its_own_outcomes():
    model = OutcomeModel.fit([sent(["tone:formal"], 30, 15, 9, "same-text"), sent(["tone:formal"], 170, 20, 1, "other")], K)
    estimate = model.estimate(["tone:formal"], "same-text")
    population = ((35 + 1) / 202, (10 + 1) / 202)
    assert estimate.source == FeedbackSource.OBSERVED
    assert estimate.p_reply == pytest.approx((9 + K * population[1]) / (30 + K))
    assert estimate.confidence == pytest.approx(30 / (30 + K))


def test_wilson_interval_figures():
    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(1, 3)
    assert (round(low, 4), round(high, 4)) == (0.0615, 0.7923)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775


def test_spearman_needs_five_pairs_and_spread():
    assert spearman([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]) is None
    assert spearman([0.1, 0.2, 0.3, 0.4, 0.5], [0.0, 0.1, 0.1, 0.3, 0.9]) == pytest.approx(0.975, abs=1e-3)
    assert spearman([0.1, 0.2, 0.3, 0.4, 0.5], [0.2] * 5) is None


def test_refs_are_stable_unique_and_opaque():
    first = refs.email_ref("run_a", 1, refs.PUBLISHED)
    assert first == refs.email_ref("run_a", 1, refs.PUBLISHED) and first.startswith("eml_") and len(first) == 24
    assert len({refs.email_ref(run, i, s) for run in ("run_a", "run_b") for i in range(5) for s in range(-1, 8)}) == 90
    assert refs.message_id(first, "mail.example.com") == f"<{first}@mail.example.com>"
