"""A judge model classifies a person's reply where one is configured (a loopback OpenAI-compatible stand-in here),
the offline rules being the fallback for machines' messages and for any failure of the model."""

import json
from datetime import UTC, datetime

import pytest

from app.outcomes.replies import DecidedBy, ReplyCategory
from app.outcomes.replies.model import JudgeModel, classify_with_model
from tests.standins import ScriptedTextModel
from tests.support import free_port

FRIDAY = datetime(2026, 11, 20, 9, tzinfo=UTC)
REPLY = "Ok, send me something for Thursday."


def answered(content: str) -> ScriptedTextModel:
    return ScriptedTextModel([(content, "stop")])


async def test_the_models_category_decides_a_persons_reply():
    with answered(json.dumps({"category": "meeting", "confidence": 0.92, "reason": "proposes Thursday"})) as model:
        result = await classify_with_model(REPLY, {}, FRIDAY, JudgeModel(model.base_url, "judge-1", api_key="k"))
    assert (result.category, result.confidence, result.decided_by) == (ReplyCategory.meeting, 0.92, DecidedBy.model)
    assert result.reason == "model judge-1: proposes Thursday"
    request = model.requests[0]
    assert request["model"] == "judge-1" and request["messages"][1]["content"] == REPLY
    assert '"unsubscribe"' in request["messages"][0]["content"]


async def test_unknown_from_the_model_has_confidence_zero_and_a_confidence_past_one_is_one():
    with answered(json.dumps({"category": "unknown", "confidence": 0.8, "reason": "unclear"})) as model:
        unknown = await classify_with_model(REPLY, {}, FRIDAY, JudgeModel(model.base_url, "judge-1"))
    with answered(json.dumps({"category": "interested", "confidence": 7, "reason": "keen"})) as model:
        keen = await classify_with_model(REPLY, {}, FRIDAY, JudgeModel(model.base_url, "judge-1"))
    assert (unknown.category, unknown.confidence) == (ReplyCategory.unknown, 0.0)
    assert (keen.category, keen.confidence) == (ReplyCategory.interested, 1.0)


@pytest.mark.parametrize("content", ["I think they are interested", json.dumps({"category": "enthusiastic"}),
                                     json.dumps({"category": "bounce", "confidence": 1, "reason": "?"}), "[]"])
async def test_an_answer_outside_the_categories_leaves_the_rules_classification(content):
    with answered(content) as model:
        result = await classify_with_model("Please remove me from your list.", {}, FRIDAY,
                                           JudgeModel(model.base_url, "judge-1"))
    assert (result.category, result.decided_by) == (ReplyCategory.unsubscribe, DecidedBy.rules)
    assert "the model judge-1 gave no category" in result.reason


async def test_an_unreachable_model_leaves_the_rules_classification():
    judge = JudgeModel(f"http://127.0.0.1:{free_port()}/v1", "judge-1", timeout_s=2)
    result = await classify_with_model("Not interested, thanks.", {}, FRIDAY, judge)
    assert (result.category, result.decided_by) == (ReplyCategory.not_interested, DecidedBy.rules)
    assert "ConnectError" in result.reason


async def test_a_machines_message_is_left_to_the_rules_and_the_model_is_not_asked():
    with answered(json.dumps({"category": "meeting", "confidence": 1, "reason": "x"})) as model:
        result = await classify_with_model("Could not be delivered.", {"From": "MAILER-DAEMON@mx.example.com"},
                                           FRIDAY, JudgeModel(model.base_url, "judge-1"))
    assert (result.category, result.decided_by, model.requests) == (ReplyCategory.bounce, DecidedBy.rules, [])
