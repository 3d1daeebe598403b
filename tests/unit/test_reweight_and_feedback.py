import art
import pytest

from app.agent.prompt import initial_messages, proven_nodes
from app.agent.schemas import Email
from app.agent.transcript import parse_transcript
from app.knowledge_graph.graph import NodeScores, ScenarioScores
from app.knowledge_graph.service import demo_graph
from app.loop.credit import MAX_NODE_SCORE, MIN_NODE_SCORE, apply_credit, node_credit, reweight
from app.loop.features import perceived_cta, perceived_length, perceived_tone
from app.loop.schemas import RunConfig
from app.loop.trajectory import EmailTrajectory


def trajectory(reward, citations, scenario_id="s", rollout=0, email=True):
    return EmailTrajectory(messages_and_choices=[], reward=reward, scenario_id=scenario_id, rollout=rollout,
                           email=Email(subject="s", body="b", citations=citations) if email else None)


def group(*members, scenario_id="s"):
    return art.TrajectoryGroup([trajectory(r, c, scenario_id, i) for i, (r, c) in enumerate(members)])


STEP = 5 ** (1 / 4)  # the most a score moves in one iteration: a factor 5^(1/4) either way


def test_credit_is_signed_relative_to_the_group_of_citing_emails_and_in_units_of_its_spread():
    # Citing emails' mean reward is 0.5 and their standard deviation sqrt(0.05): a and d are 1.34
    # deviations away (past the full step, so capped), b and c 1/sqrt(5) = 0.45 of one, so 0.45 of a step.
    groups = [group((0.8, ["a"]), (0.6, ["b"]), (0.4, ["c"]), (0.2, ["d"]))]
    changed = reweight({"s": {}}, groups, RunConfig())
    z = 5 ** -0.5
    assert changed["s"] == pytest.approx({"a": STEP, "b": STEP ** z, "c": STEP ** -z, "d": 1 / STEP})


def test_credit_does_not_depend_on_how_far_apart_the_judge_spreads_its_scores():
    wide = [group((0.8, ["a"]), (0.6, ["b"]), (0.4, ["c"]), (0.2, ["d"]))]
    narrow = [group((0.53, ["a"]), (0.51, ["b"]), (0.49, ["c"]), (0.47, ["d"]))]  # a tenth of the spread
    assert node_credit(narrow, 1.0) == pytest.approx(node_credit(wide, 1.0))
    # Citing emails that all scored the same tell no node apart: no credit.
    assert node_credit([group((0.5, ["a"]), (0.5, ["b"]))], 1.0) == {}


def test_a_node_earns_the_mean_advantage_of_the_emails_citing_it():
    groups = [group((0.9, ["a", "b"]), (0.5, ["a"]), (0.3, ["c"]), (0.3, ["c"]))]  # mean 0.5
    spread = ((0.4 ** 2 + 0 + 0.2 ** 2 + 0.2 ** 2) / 4) ** 0.5
    credit = node_credit(groups, top_fraction=1.0)
    assert credit == pytest.approx({"a": (0.4 + 0.0) / 2 / spread, "b": 0.4 / spread, "c": -0.2 / spread})


def test_only_emails_that_cite_something_are_compared():
    citing = [(0.8, ["a"]), (0.4, ["b"])]
    with_silent = [art.TrajectoryGroup(group(*citing).trajectories + [
        trajectory(0.0, [], rollout=2), trajectory(0.0, [], rollout=3, email=False)])]
    assert reweight({"s": {}}, with_silent, RunConfig()) == reweight({"s": {}}, [group(*citing)], RunConfig())
    assert node_credit(with_silent, 1.0) == pytest.approx({"a": 1.0, "b": -1.0})  # baseline 0.6 and spread 0.2, not 0.3 and 0.33
    # One citing email has nothing to be compared with: no credit at all.
    assert reweight({"s": {}}, [group((0.9, ["a"]), (0.1, []))], RunConfig()) == {}


def test_top_fraction_credits_only_the_best_and_worst_citing_emails():
    groups = [group((0.9, ["a"]), (0.6, ["b"]), (0.5, ["c"]), (0.2, ["d"]))]  # mean 0.55, spread 0.25
    assert node_credit(groups, top_fraction=0.25) == pytest.approx({"a": 1.4, "d": -1.4})
    assert set(node_credit(groups, top_fraction=0.5)) == {"a", "b", "c", "d"}


def test_scores_move_at_most_one_step_per_iteration_and_stay_in_a_fifth_to_five():
    scores = {"s": {}}
    history = []
    for _ in range(6):
        changed = reweight(scores, [group((1.0, ["up"]), (0.0, ["down"]))], RunConfig())
        scores = {"s": scores["s"] | changed.get("s", {})}
        history.append(dict(scores["s"]))
    assert [h["up"] for h in history[:4]] == pytest.approx([STEP ** k for k in (1, 2, 3, 4)])
    assert [h["down"] for h in history[:4]] == pytest.approx([STEP ** -k for k in (1, 2, 3, 4)])
    assert history[-1] == {"up": MAX_NODE_SCORE, "down": MIN_NODE_SCORE}
    assert MAX_NODE_SCORE == 5.0 and MIN_NODE_SCORE == pytest.approx(0.2)
    # At the bounds nothing moves, so nothing is stored.
    assert reweight(scores, [group((1.0, ["up"]), (0.0, ["down"]))], RunConfig()) == {}
    assert apply_credit({"x": 4.9}, {"x": 1.0}) == {"x": 5.0}


def test_each_scenario_keeps_its_own_scores():
    groups = [group((0.9, ["x"]), (0.1, ["y"]), scenario_id="s1"), group((0.1, ["x"]), (0.9, ["y"]), scenario_id="s2")]
    scores = {"s1": {"x": 2.0}, "s2": {}}
    changed = reweight(scores, groups, RunConfig())
    assert changed["s1"]["x"] == pytest.approx(2.0 * STEP) and changed["s1"]["y"] == pytest.approx(1 / STEP)
    assert changed["s2"]["x"] == pytest.approx(1 / STEP) and changed["s2"]["y"] == pytest.approx(STEP)
    assert scores == {"s1": {"x": 2.0}, "s2": {}}  # the input is left alone


def test_reweighting_off_changes_nothing():
    assert reweight({"s": {}}, [group((0.9, ["a"]), (0.1, ["b"]))], RunConfig(reweight_graph=False)) == {}


def test_the_run_wide_map_is_the_geometric_mean_over_scenarios():
    scores = ScenarioScores({"s1": NodeScores({"x": 4.0, "y": 0.5}), "s2": NodeScores({"x": 0.25})})
    assert scores.mean(["s1", "s2"]) == pytest.approx({"x": 1.0, "y": 0.5 ** 0.5})
    assert scores.mean(["s1", "s2", "s3"]) == pytest.approx({"x": 1.0, "y": 0.5 ** (1 / 3)})
    assert scores.mean(["s1"]) == {"x": 4.0, "y": 0.5}
    assert scores.of("s3") == {} and scores.of("s3")["x"] == 1.0
    legacy = ScenarioScores({"": NodeScores({"x": 3.0}), "s1": NodeScores({"y": 2.0})})  # a run from before
    assert legacy.of("s1") == {"x": 3.0, "y": 2.0} and legacy.mean(["s1", "s2"]) == pytest.approx({"x": 3.0, "y": 2 ** 0.5})


def test_the_prompt_lists_the_nodes_that_worked_before_best_first():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    others = [n for n in graph.nodes if n not in scenario.seed_nodes]
    scores = NodeScores({others[0]: 1.5, others[1]: 3.0, others[2]: 0.5, scenario.seed_nodes[0]: 4.0}
                        | {n: 1.1 for n in others[3:20]})
    assert proven_nodes(scores, 3, exclude=scenario.seed_nodes) == [others[1], others[0], *sorted(others[3:20])[:1]]
    transcript = parse_transcript(initial_messages(graph, scenario, scores, max_turns=3))
    proven = [n for n in transcript.nodes.values() if n.proven]
    assert [n.id for n in proven] == proven_nodes(scores, 3, exclude=scenario.seed_nodes)
    assert all(n.seed and n.score > 1 and n.title == graph.nodes[n.id].title for n in proven)
    assert "<proven_nodes>" not in initial_messages(graph, scenario, NodeScores({others[2]: 0.5}), max_turns=3)[1]["content"]


def test_perception_of_an_email():
    assert perceived_tone("Dear Ms Li,\n\nText") == "formal"
    assert perceived_tone("Hi Li,\n\nText") == "friendly"
    assert perceived_tone("Li,\n\nText") == "direct"
    assert perceived_length("word " * 50) == "short" and perceived_length("word " * 200) == "long"
    assert perceived_cta("Could we book a 30-minute call?") == "meeting"
    assert perceived_cta("Shall I send you the summary?") == "resource"
    assert perceived_cta("Is cost a priority?") == "question"
    assert perceived_cta("Thanks.") == "none"
