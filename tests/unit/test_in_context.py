"""Learning for a model that cannot be trained, piece by piece: the lessons that separate the best
email from the worst, what each iteration distils (the best email so far and a bounded playbook),
and the prompt that carries it (tests/service/test_in_context.py runs it through the workflow)."""

import art

from app.agent.facts import scenario_starts
from app.agent.prompt import initial_messages
from app.agent.schemas import Email, ScenarioContext
from app.agent.transcript import parse_transcript
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph
from app.loop.in_context import PLAYBOOK_SIZE, criteria, distil, lessons
from app.loop.schemas import RunConfig
from app.loop.trajectory import EmailTrajectory


def trajectory(reward, explanation, scenario_id="s", rollout=0, citations=("a",)):
    t = EmailTrajectory(messages_and_choices=[], reward=reward, scenario_id=scenario_id, rollout=rollout,
                        email=Email(subject=f"subject {rollout}", body="b", citations=list(citations)))
    t.log(f"RULER explanation: {explanation}")
    return t


def test_lessons_name_what_separated_the_best_email_from_the_worst():
    group = art.TrajectoryGroup([trajectory(0.9, "grounding 1.00, relevance 0.80, tone 0.50", rollout=0),
                                 trajectory(0.5, "grounding 1.00, relevance 0.60, tone 0.50", rollout=1),
                                 trajectory(0.2, "grounding 0.50, relevance 0.20, tone 0.55", rollout=2)])
    assert criteria("grounding 1.00, call_to_action 0.5") == {"grounding": 1.0, "call_to_action": 0.5}
    assert criteria("The email is specific, 2 facts") == {}
    assert lessons(group, 4) == [
        "relevance: 0.80 in the best email vs 0.20 in the worst (iteration 4); raise it.",
        "grounding: 1.00 in the best email vs 0.50 in the worst (iteration 4); raise it.",
    ]
    prose = art.TrajectoryGroup([trajectory(0.9, "Specific and grounded.", rollout=0), trajectory(0.3, "Generic; " + "x" * 400, rollout=1)])
    worked, short = lessons(prose, 2)
    assert worked == "What worked (iteration 2, reward 0.90): Specific and grounded."
    assert short.startswith("What fell short (iteration 2, reward 0.30): Generic;") and len(short) <= 240


def test_distil_keeps_the_best_email_so_far_and_a_bounded_playbook():
    config = RunConfig(in_context=True)
    first = distil(None, [art.TrajectoryGroup([trajectory(0.8, "relevance 0.9", rollout=0), trajectory(0.1, "relevance 0.1", rollout=1)])],
                   config, iteration=1)
    assert first["s"].exemplar.model_dump() == {"subject": "subject 0", "body": "b", "citations": ["a"], "reward": 0.8, "iteration": 1}
    assert first["s"].playbook == ["relevance: 0.90 in the best email vs 0.10 in the worst (iteration 1); raise it."]
    # A worse best email keeps the exemplar; a lesson on the same criterion replaces the older one.
    second = distil(first, [art.TrajectoryGroup([trajectory(0.6, "relevance 0.7, tone 0.9", rollout=0),
                                                 trajectory(0.2, "relevance 0.3, tone 0.1", rollout=1)])], config, iteration=2)
    assert second["s"].exemplar == first["s"].exemplar
    assert [p.split(":")[0] for p in second["s"].playbook] == ["tone", "relevance"] and "iteration 2" in second["s"].playbook[1]
    many = ", ".join(f"c{i} 0.9" for i in range(10)), ", ".join(f"c{i} 0.1" for i in range(10))
    third = distil(second, [art.TrajectoryGroup([trajectory(0.9, many[0], rollout=0), trajectory(0.1, many[1], rollout=1)])],
                   config, iteration=3)
    assert third["s"].exemplar.iteration == 3 and len(third["s"].playbook) == PLAYBOOK_SIZE
    assert distil(first, [], RunConfig(in_context=False), iteration=2) is None


def test_the_prompt_carries_the_exemplar_and_the_playbook():
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    cited = [n for n in graph.nodes if n not in scenario.seed_nodes][:2]
    context = {"exemplar": {"subject": "Hi", "body": "Body </b> \"quoted\"\nGoal: not a goal", "citations": cited,
                            "reward": 0.71, "iteration": 3},
               "playbook": ["relevance: 0.90 in the best email vs 0.20 in the worst (iteration 3); raise it."]}
    messages = initial_messages(graph, scenario, NodeScores(), 6, ScenarioContext.model_validate(context))
    assert "(reward 0.71)" in messages[1]["content"]
    prompt = parse_transcript(messages)
    assert prompt.exemplar == Email(subject="Hi", body=context["exemplar"]["body"], citations=cited)
    assert prompt.playbook == context["playbook"] and prompt.goal == scenario.goal
    assert all(prompt.nodes[c].seed and prompt.nodes[c].exemplar and not prompt.nodes[c].read for c in cited)
    bare = parse_transcript(initial_messages(graph, scenario, NodeScores(), 6))
    assert bare.exemplar is None and bare.playbook == [] and set(bare.nodes) == set(scenario_starts(graph, scenario))


