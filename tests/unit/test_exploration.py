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
from app.loop.exploration import Exploration
from app.loop.outcome_model import OutcomeModel, SentEmail

K = 20.0


def sent(features, delivered, replies, content) -> SentEmail:
    return SentEmail(features=features, content_hash=content, delivered=delivered, opens=delivered // 2, replies=replies)


def test_with_no_sends_every_node_draws_from_the_prior_at_a_rate_of_one_half():
    draws = OutcomeModel.fit([], K).trait_draws(["cites:a"] * 20000, np.random.default_rng(0))
    assert draws.mean() == pytest.approx(0.0, abs=0.02)
    assert draws.std() == pytest.approx(1 / math.sqrt(K * 0.25), rel=0.02)  # prior precision K · p(1 − p), p = 1/2


def test_a_node_the_sends_pinned_down_draws_near_what_they_showed_and_an_unsent_one_as_wide_as_the_prior():
    model = OutcomeModel.fit([sent(["cites:good", "tone:formal"], 400, 120, "a"), sent(["cites:poor", "tone:formal"], 400, 4, "b")], K)
    rng = np.random.default_rng(1)
    draws = np.array([model.trait_draws(["cites:good", "cites:poor", "cites:new"], rng) for _ in range(4000)])
    for column, trait in enumerate(["cites:good", "cites:poor"]):
        mean, sd = model.replies.trait_posterior(trait)
        assert (mean, sd) == (model.replies.weights[trait], pytest.approx(math.sqrt(model.replies.covariance[column + 1, column + 1])))
        assert draws[:, column].mean() == pytest.approx(mean, abs=0.03) and draws[:, column].std() == pytest.approx(sd, rel=0.05)
    assert draws[:, 0].mean() > 0 > draws[:, 1].mean()
    assert draws[:, 2].mean() == pytest.approx(0.0, abs=0.03)
    assert draws[:, 2].std() == pytest.approx(math.sqrt(model.replies.prior_variance), rel=0.05)
    assert draws[:, 2].std() > max(draws[:, 0].std(), draws[:, 1].std())


def test_a_rollout_sees_each_score_times_exp_of_scale_times_its_draw_and_the_same_seed_the_same_view():
    model = OutcomeModel.fit([sent(["cites:a"], 200, 60, "x")], K)
    nodes = ("a", "b", "c")
    scores = NodeScores({"a": 2.0})
    shown = Exploration(model, nodes, 0.5).shown_scores(scores, (7, 1))
    draws = model.trait_draws(["cites:a", "cites:b", "cites:c"], np.random.default_rng((7, 1)))
    assert shown == pytest.approx({n: scores[n] * math.exp(0.5 * w) for n, w in zip(nodes, draws)})
    assert Exploration(model, nodes, 0.5).shown_scores(scores, (7, 1)) == shown
    assert Exploration(model, nodes, 0.5).shown_scores(scores, (8, 1)) != shown
    assert Exploration(model, nodes, 0.5).unsent(["a", "b"]) == ["b"]  # what sending this email would teach


def test_the_agent_is_shown_the_explored_scores_but_told_only_what_worked_before():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    seed, neighbour = scenario.seed_nodes[0], graph.neighbors(scenario.seed_nodes[0])[0].id
    scores = NodeScores({neighbour: 0.5})
    shown = {node: 3.0 for node in graph.nodes}
    transcript = parse_transcript(initial_messages(graph, scenario, scores, 6, shown=shown))
    assert transcript.nodes[seed].score == 3.0 and not any(n.proven for n in transcript.nodes.values())
    listed = json.loads(AgentTools(graph, scenario, shown).call("get_connected_nodes", json.dumps({"node_id": seed})))
    assert {n["score"] for n in listed["neighbors"]} == {3.0}
