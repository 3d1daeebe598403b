"""Exploration: each rollout's view of the KG scores is a Thompson draw from the outcome model's posterior of what
citing each node adds to the reply log-odds. Figures pinned."""

import json
import math

import numpy as np
import pytest

from app.agent.prompt import initial_messages
from app.agent.tools import AgentTools
from app.agent.transcript import parse_transcript
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph
from app.loop.exploration import LIFT, Exploration
from app.loop.features import in_segment, segment
from app.loop.outcome_model import OutcomeModel, SentEmail

K = 20.0


def sent(features, delivered, replies, content) -> SentEmail:
    return SentEmail(features=features, content_hash=content, delivered=delivered, opens=delivered // 2, positive=replies)


def test_a_node_the_sends_pinned_down_draws_near_what_they_showed_and_an_unsent_one_as_wide_as_the_prior():
    model = OutcomeModel.fit([sent(["cites:good", "tone:formal"], 400, 120, "a"), sent(["cites:poor", "tone:formal"], 400, 4, "b")], K)
    rng = np.random.default_rng(1)
    draws = np.array([model.trait_draws([["cites:good"], ["cites:poor"], ["cites:new"]], rng) for _ in range(4000)])
    for column, trait in enumerate(["cites:good", "cites:poor"]):
        mean, sd = model.positive.traits_posterior([trait])
        assert (mean, sd) == (model.positive.weights[trait], pytest.approx(math.sqrt(model.positive.covariance[column + 1, column + 1])))
        assert draws[:, column].mean() == pytest.approx(mean, abs=0.03) and draws[:, column].std() == pytest.approx(sd, rel=0.05)
    assert draws[:, 0].mean() > 0 > draws[:, 1].mean()
    assert draws[:, 2].mean() == pytest.approx(0.0, abs=0.03)
    assert draws[:, 2].std() == pytest.approx(math.sqrt(model.positive.prior_variance), rel=0.05)
    assert draws[:, 2].std() > max(draws[:, 0].std(), draws[:, 1].std())


def test_a_rollout_promotes_the_node_within_reach_whose_draw_is_highest():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    far = next(n for n in graph.nodes if n not in {m.id for s in scenario.seed_nodes for m in graph.neighbors(s)}
               and n not in scenario.seed_nodes)
    scores = NodeScores({far: 2.0})  # worked before: listed in the prompt, so within reach
    near = {*scenario.seed_nodes, *(m.id for s in scenario.seed_nodes for m in graph.neighbors(s)), far}
    model = OutcomeModel.fit([sent(["cites:" + scenario.seed_nodes[0]], 200, 60, "x")], K)
    explore = Exploration(model, graph, 1.0)
    reach = explore.reach(scenario, scores)
    assert reach == sorted(near)
    shown, focus = explore.shown_scores(scenario, scores, (7, 1))
    reader = segment(scenario.prospect.role, scenario.prospect.industry)
    draws = model.trait_draws([[f"cites:{n}", in_segment(reader, f"cites:{n}")] for n in reach], np.random.default_rng((7, 1)))
    weight = float(draws.max())
    assert focus == reach[int(np.argmax(draws))] and weight > 0
    assert shown[focus] == pytest.approx(scores[focus] * math.exp(weight))  # the drawn reply log-odds, as a factor
    assert all(shown[n] == scores[n] for n in graph.nodes if n != focus)
    assert explore.shown_scores(scenario, scores, (7, 1))[1] == focus  # the same seed, the same view
    half, _ = Exploration(model, graph, 0.5).shown_scores(scenario, scores, (7, 1))
    assert half[focus] == pytest.approx(scores[focus] * math.exp(0.5 * weight))
    sure, _ = Exploration(model, graph, 10.0).shown_scores(scenario, scores, (7, 1))
    assert sure[focus] == pytest.approx(scores[focus] * LIFT) and LIFT == 25  # at most from the lowest score to the highest
    assert explore.unsent([scenario.seed_nodes[0], far]) == [far]  # what sending this email would teach


def test_a_node_whose_sends_got_replies_is_the_focus_far_more_often_than_one_whose_sends_got_none():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    replied, ignored, *_ = sorted(m.id for s in scenario.seed_nodes for m in graph.neighbors(s))
    model = OutcomeModel.fit([sent([f"cites:{replied}"], 300, 90, "a"), sent([f"cites:{ignored}"], 300, 0, "b")], K)
    explore = Exploration(model, graph, 1.0)
    focus = [explore.focus(scenario, NodeScores(), (seed, 1))[0] for seed in range(400)]
    assert focus.count(replied) > 100 > 10 > focus.count(ignored)
    untried = len(explore.reach(scenario, NodeScores())) - 2
    assert 400 - focus.count(replied) - focus.count(ignored) > untried  # untried nodes still get their turns


def test_the_agent_is_shown_its_focus_among_its_start_nodes_but_told_only_what_worked_before():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    focus = next(n for n in graph.nodes if n not in scenario.seed_nodes)
    shown = NodeScores({focus: 5.0})
    transcript = parse_transcript(initial_messages(graph, scenario, NodeScores(), 6, shown=shown, focus=focus))
    assert transcript.nodes[focus].seed and transcript.nodes[focus].score == 5.0
    assert not any(n.proven for n in transcript.nodes.values())
    seed = scenario.seed_nodes[0]
    neighbour = graph.neighbors(seed)[0].id
    listed = json.loads(AgentTools(graph, scenario, NodeScores({neighbour: 3.0})).call(
        "get_connected_nodes", json.dumps({"node_id": seed})))
    assert next(n["score"] for n in listed["neighbors"] if n["id"] == neighbour) == 3.0


def test_draws_for_a_population_that_never_replied_stay_probabilities():
    """Its rate near 0 makes the prior wide: draws far out in log-odds are still probabilities, not an overflow."""
    model = OutcomeModel.fit([sent(["cites:a", "tone:formal"], 5000, 0, "x")], K)
    rng = np.random.default_rng(0)
    for _ in range(200):
        for features, content in ((["cites:new", "tone:direct"], "new"), (["cites:a", "tone:formal"], "x")):
            estimate = model.draw(features, content, rng)  # predicted, and the very email that was sent
            assert 0.0 <= estimate.p_positive <= 1.0 and 0.0 <= estimate.p_open <= 1.0
