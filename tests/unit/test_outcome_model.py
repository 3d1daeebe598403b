"""The outcome model, the reward blend on it, and the statistics of GET /runs/{id}/outcomes: figures pinned."""

import warnings

import numpy as np
import pytest

from app.loop.outcome_model import NO_ESTIMATE, Estimate, FeedbackSource, OutcomeModel, SentEmail, TraitRegression
from app.loop.reward import blend
from app.outcomes import refs
from app.outcomes.service import spearman
from app.stats.intervals import Z_95, wilson

K = 20.0


def sent(features, delivered, opens, replies, content="h") -> SentEmail:
    return SentEmail(features=features, content_hash=content, delivered=delivered, opens=opens, positive=replies)


def test_the_feedback_score_is_the_expected_interest_of_a_send_and_opens_weigh_nothing():
    """P(positive) − harm_ratio · P(negative), floored at 0: at the default scale (meeting 2, unsubscribe −3) a send
    that books a meeting one time in ten and draws an unsubscribe one time in twenty is worth 0.1 − 1.5 · 0.05."""
    estimate = Estimate.of_rates(p_open=0.9, p_positive=0.1, p_negative=0.05, harm_ratio=1.5, confidence=1.0,
                                 source=FeedbackSource.OBSERVED)
    assert estimate.score == pytest.approx(0.025)
    assert Estimate.of_rates(0.0, 0.1, 0.05, 1.5, 1.0, FeedbackSource.OBSERVED).score == estimate.score  # opens: nothing
    assert Estimate.of_rates(0.5, 0.1, 0.2, 1.5, 1.0, FeedbackSource.OBSERVED).score == 0.0  # floored
    assert Estimate.of_rates(0.5, 1.0, 0.0, 1.5, 1.0, FeedbackSource.OBSERVED).score == 1.0


def test_a_sent_emails_replies_weigh_by_the_interest_scale():
    """A meeting counts whole, an interested reply half, an unsubscribe whole on the negative side, a not-interested a
    third: the model's rates are those weights per delivered send."""
    model = OutcomeModel.fit([SentEmail(["tone:formal"], "a", delivered=1000, opens=0, positive=100.0, negative=30.0)],
                             prior_strength=K, harm_ratio=1.5)
    seen = model.estimate(["tone:formal"], "a")
    assert seen.p_positive == pytest.approx(0.1, abs=0.005) and seen.p_negative == pytest.approx(0.03, abs=0.005)
    assert seen.score == pytest.approx(seen.p_positive - 1.5 * seen.p_negative)


def test_the_blend_moves_the_feedback_from_the_populations_toward_the_emails_own_by_the_confidence():
    estimate = Estimate.of_rates(p_open=0.5, p_positive=0.25, p_negative=0.0, harm_ratio=1.5, confidence=0.5,
                                 source=FeedbackSource.PREDICTED, baseline=0.2)
    assert estimate.score == pytest.approx(0.25)
    assert blend(0.8, estimate, weight=0.3) == pytest.approx(0.7 * 0.8 + 0.3 * (0.2 + 0.5 * (estimate.score - 0.2)))
    assert blend(0.8, NO_ESTIMATE, weight=0.3) == 0.8  # no outcomes: the judge's score
    full = Estimate.of_rates(1.0, 1.0, 0.0, 1.5, 1.0, FeedbackSource.OBSERVED)
    assert blend(0.2, full, weight=1.0) == pytest.approx(1.0)


def test_evidence_of_usual_rates_neither_helps_nor_hurts_and_better_rates_win():
    """Two emails the judge scores alike: one sent often at the population's rates, one never sent (confidence 0)."""
    model = OutcomeModel.fit([sent(["tone:formal"], 400, 120, 40, "often"), sent(["tone:direct"], 400, 40, 4, "poor"),
                              sent(["tone:warm"], 400, 200, 80, "good")], K)
    usual = model.estimate(["tone:formal"], "often")
    unknown = Estimate.of_rates(0.9, 0.9, 0.0, 1.0, 0.0, FeedbackSource.PREDICTED, usual.baseline)  # any, c = 0
    at_population = Estimate.of_rates(model.opens.population, model.positive.population, model.negative.population,
                                      1.0, usual.confidence, FeedbackSource.OBSERVED, usual.baseline)
    assert usual.confidence > 0.9 and at_population.score == pytest.approx(usual.baseline)
    assert blend(0.9, at_population, 0.3) == pytest.approx(blend(0.9, unknown, 0.3))
    assert blend(0.9, model.estimate(["tone:warm"], "good"), 0.3) > blend(0.9, unknown, 0.3)
    assert blend(0.9, model.estimate(["tone:direct"], "poor"), 0.3) < blend(0.9, unknown, 0.3)


def test_without_outcomes_there_is_no_estimate():
    assert OutcomeModel.fit([], K).estimate(["tone:formal"], "x") == NO_ESTIMATE
    assert OutcomeModel.fit([sent(["tone:formal"], 0, 0, 0)], K).estimate(["tone:formal"], "x") == NO_ESTIMATE


def test_an_unseen_email_gets_about_the_populations_rates_and_evidence_earns_confidence():
    model = OutcomeModel.fit([sent(["tone:formal"], 100, 40, 10, "a"), sent(["tone:direct"], 100, 20, 2, "b")], K)
    estimate = model.estimate(["tone:friendly"], "new")
    assert estimate.source == FeedbackSource.PREDICTED
    assert estimate.p_open == pytest.approx((60 + 1) / (200 + 2), abs=0.01)  # a tone never sent: the middle
    assert estimate.p_positive == pytest.approx((12 + 1) / (200 + 2), abs=0.015)
    # c = 1 − v / v₀ over the intercept and the one trait, which no send pinned down
    sigma0 = model.positive.prior_variance
    assert estimate.confidence == pytest.approx(1 - (model.positive.covariance[0, 0] + sigma0) / (2 * sigma0))
    assert estimate.confidence < model.estimate(["tone:formal"], "new").confidence


def test_a_prediction_earns_confidence_as_sends_pin_down_its_traits():
    def confidence(sends: int, features: list[str]) -> float:
        model = OutcomeModel.fit([sent(["ask:meeting", "tone:friendly"], sends, sends // 2, sends // 5, "a"),
                                  sent(["ask:none", "tone:formal"], sends, sends // 2, sends // 20, "b")], K)
        return model.estimate(features, "new").confidence

    assert confidence(10, ["ask:meeting", "tone:friendly"]) < confidence(1000, ["ask:meeting", "tone:friendly"])
    assert confidence(100_000, ["ask:meeting", "tone:friendly"]) > 0.99
    # never sent together: however many sends, the mix is less certain than either combination that was
    assert confidence(100_000, ["ask:meeting", "tone:formal"]) < 0.9


def test_a_trait_moves_the_prediction_toward_its_rate_by_its_evidence():
    model = OutcomeModel.fit([sent(["tone:formal"], 100, 40, 20, "a"), sent(["tone:direct"], 100, 40, 0, "b")], K)
    formal, direct = model.estimate(["tone:formal"], "x"), model.estimate(["tone:direct"], "y")
    assert 0.15 < formal.p_positive < 0.2 and 0.0 < direct.p_positive < 0.05  # shrunk from 0.2 and 0 toward 0.1
    assert formal.p_open == pytest.approx(0.4, abs=2e-3) == direct.p_open
    thin = OutcomeModel.fit([sent(["tone:formal"], 1000, 400, 100, "a"), sent(["tone:direct"], 2, 2, 2, "b")], K)
    assert thin.estimate(["tone:direct"], "z").p_positive < 0.3  # two replies in two sends say little
    more = OutcomeModel.fit([sent(["tone:formal"], 1000, 400, 100, "a"), sent(["tone:direct"], 200, 200, 200, "b")], K)
    assert more.estimate(["tone:direct"], "z").p_positive > 0.9


def test_traits_that_travel_together_share_the_credit():
    """A sum of each trait's own deviation would count the email's rate once per trait it has."""
    model = OutcomeModel.fit([sent(["ask:meeting", "cites:a", "tone:friendly"], 200, 100, 80, "a"),
                              sent(["ask:none", "cites:b", "tone:formal"], 200, 100, 20, "b")], K)
    assert model.estimate(["ask:meeting", "cites:a", "tone:friendly"], "x").p_positive == pytest.approx(0.4, abs=0.02)
    assert model.estimate(["ask:none", "cites:b", "tone:formal"], "y").p_positive == pytest.approx(0.1, abs=0.02)
    mixed = model.estimate(["ask:meeting", "cites:b", "tone:friendly"], "z").p_positive
    assert 0.25 < mixed < 0.4  # two of the good email's three traits


def test_an_email_sent_before_uses_its_own_outcomes_shrunk_toward_the_prediction():
    model = OutcomeModel.fit([sent(["tone:formal"], 30, 15, 9, "same-text"), sent(["tone:formal"], 170, 20, 1, "other")], K)
    estimate = model.estimate(["tone:formal"], "same-text")
    predicted = model.estimate(["tone:formal"], "unsent")
    assert estimate.source == FeedbackSource.OBSERVED and predicted.source == FeedbackSource.PREDICTED
    assert estimate.p_positive == pytest.approx((9 + K * predicted.p_positive) / (30 + K))
    assert estimate.p_open == pytest.approx((15 + K * predicted.p_open) / (30 + K))
    assert estimate.confidence == pytest.approx(30 / (30 + K))


def test_rare_outcomes_among_traits_sent_together_fit_to_the_posteriors_mode_without_overflow():
    """Three replies in about a thousand sends, forty traits sent in overlapping sets: a full Newton step from the
    prior's centre overshoots far enough to overflow exp. The fit reaches the mode (the gradient of the log posterior
    is zero there) with no warning."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        design = (rng.random((60, 40)) < 0.3).astype(float)
        trials = rng.integers(1, 30, 60).astype(float)
        successes = np.zeros(60)
        replied = rng.choice(60, 3, replace=False)
        successes[replied] = trials[replied] * rng.random(3)
        traits = [f"t{i}" for i in range(40)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fitted = TraitRegression.fit(traits, design, trials, successes, prior_strength=5.0)
        beta = np.array([fitted.intercept] + [fitted.weights[t] for t in traits])
        x = np.hstack([np.ones((60, 1)), design])
        population = (successes.sum() + 1) / (trials.sum() + 2)
        precision = 5.0 * population * (1 - population)
        centre = np.zeros(41)
        centre[0] = np.log(population / (1 - population))
        gradient = x.T @ (successes - trials / (1 + np.exp(-(x @ beta)))) - precision * (beta - centre)
        assert np.abs(gradient).max() < 1e-6, seed


def test_emails_with_the_same_traits_are_fitted_as_one_row_with_the_same_result_as_every_send_apart():
    """Pooling sends by trait set sums their counts: the binomial likelihood is the same, so the fit is the same."""
    rng = np.random.default_rng(3)
    kinds = [["tone:formal", "cites:a"], ["tone:formal", "cites:b"], ["tone:direct", "cites:a", "cta:call"]]
    emails = [sent(kinds[i % 3], delivered=1, opens=int(rng.random() < 0.4), replies=float(rng.random() < 0.2),
                   content=str(i)) for i in range(90)]
    traits = sorted({t for k in kinds for t in k})
    design = np.array([[float(t in e.features) for t in traits] for e in emails])
    apart = TraitRegression.fit(traits, design, np.ones(90), np.array([e.positive for e in emails]), K)
    pooled = OutcomeModel.fit(emails, K).positive
    assert pooled.intercept == pytest.approx(apart.intercept, abs=1e-6)
    assert pooled.weights == pytest.approx(apart.weights, abs=1e-6)
    assert pooled.covariance == pytest.approx(apart.covariance, abs=1e-6)


def test_wilson_interval_figures():
    low, high = wilson(1 / 3, 3, Z_95)
    assert (round(low, 4), round(high, 4)) == (0.0615, 0.7923)
    low, high = wilson(0, 10, Z_95)
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


def test_a_draw_follows_the_posterior_and_a_sent_email_draws_from_its_own_counts():
    import numpy as np

    model = OutcomeModel.fit([sent(["tone:formal"], 400, 200, 80, "a"), sent(["tone:direct"], 400, 200, 8, "b")], K)
    rng = np.random.default_rng(0)
    formal = [model.draw(["tone:formal"], "x", rng).p_positive for _ in range(4000)]
    predicted = model.estimate(["tone:formal"], "x")
    assert np.mean(formal) == pytest.approx(predicted.p_positive, abs=0.01)
    logits = np.log(np.array(formal) / (1 - np.array(formal)))
    rows = [0, 1 + list(model.positive.weights).index("tone:formal")]  # the intercept and the trait
    variance = model.positive.covariance[np.ix_(rows, rows)].sum()
    assert np.var(logits) == pytest.approx(variance, rel=0.1)
    never = [model.draw(["tone:friendly"], "y", rng).p_positive for _ in range(4000)]
    assert np.std(never) > 2 * np.std(formal)  # a trait never sent keeps its prior's spread
    again = [model.draw(["tone:formal"], "a", rng) for _ in range(4000)]
    assert {d.source for d in again} == {FeedbackSource.OBSERVED} and {d.confidence for d in again} == {1.0}
    shrunk = model.estimate(["tone:formal"], "a")
    assert np.mean([d.p_positive for d in again]) == pytest.approx(shrunk.p_positive, abs=0.005)  # Beta's mean
    assert OutcomeModel.fit([], K).draw(["tone:formal"], "x", rng) == NO_ESTIMATE


def test_the_email_to_send_is_drawn_by_reward_under_the_outcome_models_posterior():
    import numpy as np

    from app.agent.schemas import Email
    from app.loop.email import choose_by_outcomes
    from app.loop.features import content_hash, email_features
    from app.loop.feedback import OutcomeFeedback

    def email(greeting: str, ask: str) -> Email:
        return Email(subject="A note", body=f"{greeting} Priya,\n\nWe help hospitals.\n\n{ask}\n\nSam", citations=[])

    friendly, formal = email("Hi", "Could we meet for 15 minutes?"), email("Dear", "Could we meet for 15 minutes?")
    direct = email("Priya -", "Is this a priority?")

    def sends(e: Email, delivered: int, replies: int) -> SentEmail:
        return SentEmail(email_features(e, "Priya", "Acme", "cto @ healthcare"), content_hash(e), delivered, delivered // 2, replies)

    def chosen(feedback, candidates, weight=0.3, draws=400) -> list[int]:
        rng = np.random.default_rng(1)
        return [choose_by_outcomes(candidates, feedback, "scn", weight, rng) for _ in range(draws)]

    prospects = {"scn": ("Priya", "Acme", "cto @ healthcare")}
    nothing = OutcomeFeedback(OutcomeModel.fit([], K), prospects)
    assert set(chosen(nothing, [(friendly, 0.5), (formal, 0.9)])) == {0}  # no outcomes: the greedy email, as before
    learnt = OutcomeFeedback(OutcomeModel.fit([sends(friendly, 500, 200), sends(formal, 500, 10)], K), prospects)
    # The feedback is worth its weight: friendly replies 20× as often (feedback ≈ 0.38 higher), and at weight 0.3
    # that outweighs 0.05 of the judge's score (worth 0.7·0.05) ...
    assert set(chosen(learnt, [(formal, 0.9), (friendly, 0.85)])) == {1}
    # ... but not 0.2 of it; at weight 0 the judge alone decides.
    assert set(chosen(learnt, [(formal, 0.9), (friendly, 0.7)])) == {0}
    assert set(chosen(learnt, [(formal, 0.9), (friendly, 0.85)], weight=0.0)) == {0}
    # A kind of email never sent wins sometimes, on the chance that it gets more replies, and not always.
    explored = chosen(learnt, [(friendly, 0.8), (direct, 0.8)])
    assert 0.02 < np.mean(explored) < 0.6


def test_each_segment_learns_how_it_departs_from_every_send_and_an_unsent_segment_gets_the_pooled_rate():
    from app.agent.schemas import Email
    from app.loop.features import content_hash, email_features, segment

    formal = Email(subject="A note", body="Dear Priya,\n\nWe help.\n\nCould we meet?\n\nSam", citations=["case"])
    friendly = Email(subject="A note", body="Hi Priya,\n\nWe help.\n\nCould we meet?\n\nSam", citations=["case"])
    cfo, cto, ciso = segment("CFO", "SaaS"), segment(" cto ", "Health  care"), segment("CISO", "insurance")
    assert (cfo, cto) == ("cfo @ saas", "cto @ health care")
    features = email_features(formal, "Priya", "Acme", cfo)
    assert {"tone:formal", "cites:case", "in:cfo @ saas|tone:formal", "in:cfo @ saas|cites:case", "segment:cfo @ saas"} <= set(features)
    assert features == sorted(features) and len([f for f in features if f.startswith("in:")]) == 5

    def sends(email: Email, reader: str, replies: int) -> SentEmail:
        return SentEmail(email_features(email, "Priya", "Acme", reader), f"{content_hash(email)}{reader}", 300, 150, replies)

    # CFOs answer friendly emails, CTOs formal ones, each 30% against 5%.
    model = OutcomeModel.fit([sends(friendly, cfo, 90), sends(formal, cfo, 15), sends(formal, cto, 90), sends(friendly, cto, 15)], K)

    def p_reply(email: Email, reader: str) -> float:
        return model.estimate(email_features(email, "Priya", "Acme", reader), "unsent").p_positive

    assert p_reply(friendly, cfo) > 0.2 > 0.1 > p_reply(formal, cfo)
    assert p_reply(formal, cto) > 0.2 > 0.1 > p_reply(friendly, cto)
    # A segment never sent to: neither tone is known to be better, so each gets about the pooled rate.
    assert p_reply(formal, ciso) == pytest.approx(p_reply(friendly, ciso), abs=0.01)
    assert p_reply(formal, ciso) == pytest.approx(105 / 600, abs=0.03)
