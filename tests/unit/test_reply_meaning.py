"""What an outcome means: the interest scale's figures, the categories callers and providers give, and what suppresses."""

from datetime import UTC, date, datetime

import pytest
from pydantic import ValidationError

from app.kit.settings import DEFAULT_REPLY_INTEREST, Settings
from app.outcomes.meaning import InterestScale, classified, suppression
from app.outcomes.replies import Classification, DecidedBy, ReplyCategory
from app.outcomes.schemas import OutcomeEvent, OutcomeType

SCALE = InterestScale.of(DEFAULT_REPLY_INTEREST)


def event(kind: str, **extra) -> OutcomeEvent:
    return OutcomeEvent(ref="eml_x", type=kind, occurred_at=datetime(2026, 11, 20, tzinfo=UTC), id="e", recipient="r",
                        **extra)


def test_the_default_scale_names_every_category_and_weighs_replies_by_it():
    assert set(DEFAULT_REPLY_INTEREST) == {c.value for c in ReplyCategory}
    assert SCALE.positive == {ReplyCategory.meeting, ReplyCategory.interested, ReplyCategory.question,
                              ReplyCategory.referral}
    assert SCALE.negative == {ReplyCategory.not_interested, ReplyCategory.wrong_person, ReplyCategory.unsubscribe}
    assert (SCALE.top, SCALE.bottom) == (2.0, 3.0)
    assert [SCALE.gain(c) for c in (ReplyCategory.meeting, ReplyCategory.interested, ReplyCategory.question)] == [
        1.0, 0.5, 0.25]
    assert SCALE.harm(ReplyCategory.unsubscribe) == 1.0 and SCALE.harm(ReplyCategory.not_interested) == pytest.approx(1 / 3)
    assert SCALE.gain(ReplyCategory.not_interested) == 0.0 and SCALE.harm(ReplyCategory.meeting) == 0.0


def test_out_of_office_auto_replies_and_bounces_count_for_nothing_whatever_the_scale_says():
    generous = InterestScale.of(DEFAULT_REPLY_INTEREST | {"out_of_office": 5, "auto_reply": 5, "bounce": -5})
    for category in (ReplyCategory.out_of_office, ReplyCategory.auto_reply, ReplyCategory.bounce):
        assert generous.value(category) == 0.0 and category not in generous.positive | generous.negative
    assert generous.top == 2.0 and generous.bottom == 3.0


def test_the_scale_is_a_setting_whose_unknown_categories_are_refused():
    assert Settings(_env_file=None, reply_interest={"question": 1}).reply_interest == DEFAULT_REPLY_INTEREST | {
        "question": 1.0}
    with pytest.raises(ValidationError, match="unknown reply categories thrilled"):
        Settings(_env_file=None, reply_interest={"thrilled": 1})


def test_a_callers_category_wins_over_its_sentiment_and_providers_events_are_filed_as_theirs():
    assert classified(event("replied", category="meeting", sentiment="negative"), from_provider=False) == Classification(
        ReplyCategory.meeting, 1.0, DecidedBy.caller, "given by the caller")
    assert classified(event("replied", sentiment="positive"), from_provider=False).category == ReplyCategory.interested
    assert classified(event("replied", sentiment="negative"), from_provider=False).category == ReplyCategory.not_interested
    neutral = classified(event("replied", sentiment="neutral"), from_provider=False)
    assert (neutral.category, neutral.confidence) == (ReplyCategory.unknown, 0.0)
    assert classified(event("replied"), from_provider=False) is None  # read from its text, or filed as unknown
    away = classified(event("replied", category="out_of_office", returns_on="2026-12-01"), from_provider=False)
    assert away.returns_on == date(2026, 12, 1)
    for kind, category in (("unsubscribed", ReplyCategory.unsubscribe), ("complained", ReplyCategory.unsubscribe),
                           ("bounced", ReplyCategory.bounce)):
        assert classified(event(kind), from_provider=True).category == category
        assert classified(event(kind), from_provider=True).decided_by == DecidedBy.provider
        assert classified(event(kind), from_provider=False).decided_by == DecidedBy.caller
    assert classified(event("delivered"), from_provider=True) is None
    with pytest.raises(ValidationError, match="returns_on goes with"):
        event("replied", category="meeting", returns_on="2026-12-01")


def test_unsubscribes_complaints_and_bounces_suppress_for_good_and_an_away_notice_until_its_return():
    def meant(category: ReplyCategory, returns_on: date | None = None) -> Classification:
        return Classification(category, 1.0, DecidedBy.rules, "", returns_on)

    assert suppression(OutcomeType.REPLIED, meant(ReplyCategory.unsubscribe)).until is None
    assert suppression(OutcomeType.COMPLAINED, meant(ReplyCategory.unsubscribe)).reason == "complaint"
    assert suppression(OutcomeType.BOUNCED, meant(ReplyCategory.bounce)).reason == "bounce"
    assert suppression(OutcomeType.AUTO_REPLIED, meant(ReplyCategory.out_of_office, date(2026, 12, 1))).until == date(
        2026, 12, 1)
    assert suppression(OutcomeType.AUTO_REPLIED, meant(ReplyCategory.out_of_office)) is None  # no return date stated
    assert suppression(OutcomeType.REPLIED, meant(ReplyCategory.not_interested)) is None
