import art
import pytest

from app.knowledge_graph.service import demo_graph
from app.loop.feedback import FeedbackSimulator, perceived_cta, perceived_length, perceived_tone, reply_probabilities
from app.loop.runtime import create_feedback
from app.agent.schemas import Email
from app.loop.schemas import EmailTrajectory, RunConfig
from app.loop.steps import MAX_NODE_SCORE, reweight


def trajectory(reward, citations):
    return EmailTrajectory(messages_and_choices=[], reward=reward, email=Email(subject="s", body="b", citations=citations))


def test_reweight_boosts_only_the_top_trajectories_citations_in_proportion_to_reward():
    scores = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    groups = [art.TrajectoryGroup([trajectory(0.9, ["a"]), trajectory(0.6, ["b", "a"]), trajectory(0.2, ["c"]), trajectory(0.1, ["d"])])]
    changed = reweight(scores, groups, RunConfig(top_fraction=0.5))
    new = scores | changed
    assert set(changed) == {"a", "b"}
    assert new["a"] - 1.0 == pytest.approx((0.9 + 0.6) / 2) and new["b"] - 1.0 == pytest.approx(0.6 / 2)
    assert new["c"] == new["d"] == 1.0 and scores["a"] == 1.0  # the input is left alone


def test_reweight_stays_bounded():
    scores = {"a": 1.0}
    for _ in range(50):
        scores |= reweight(scores, [art.TrajectoryGroup([trajectory(1.0, ["a"]), trajectory(1.0, ["a"])])], RunConfig(top_fraction=1.0))
    assert scores["a"] == MAX_NODE_SCORE
    assert reweight(scores, [art.TrajectoryGroup([trajectory(1.0, ["a"])])], RunConfig(top_fraction=1.0)) == {}


def test_perception_of_an_email():
    assert perceived_tone("Dear Ms Li,\n\nText") == "formal"
    assert perceived_tone("Hi Li,\n\nText") == "friendly"
    assert perceived_tone("Li,\n\nText") == "direct"
    assert perceived_length("word " * 50) == "short" and perceived_length("word " * 200) == "long"
    assert perceived_cta("Could we book a 30-minute call?") == "meeting"
    assert perceived_cta("Shall I send you the summary?") == "resource"
    assert perceived_cta("Is cost a priority?") == "question"
    assert perceived_cta("Thanks.") == "none"


def test_hidden_preferences_drive_open_and_reply_rates():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    simulator = create_feedback(graph)
    prefs = simulator.preferences[scenario.id]
    prospect = scenario.prospect.model_dump()
    liked = list(prefs["interests"])[:2]
    good = Email(subject=f"{scenario.prospect.company} idea", body="Hi there,\n\nFacts.\n\nCould we book a 30-minute call?\n\nCheers", citations=liked)
    bad = Email(subject="Hello from us to you about something great today", body="Text.\n\nThanks.", citations=prefs["dislikes"])
    good_open, good_reply = reply_probabilities(good, prospect, prefs)
    bad_open, bad_reply = reply_probabilities(bad, prospect, prefs)
    assert good_reply > bad_reply and good_open > bad_open
    score, open_rate, reply_rate = simulator.observe(scenario.id, good, seed=1)
    assert 0 <= reply_rate <= open_rate <= 1 and 0 <= score <= 1
    assert simulator.observe(scenario.id, good, seed=1) == (score, open_rate, reply_rate)
    assert simulator.observe(scenario.id, None, seed=1) == (0.0, 0.0, 0.0)
    assert isinstance(simulator, FeedbackSimulator)
