"""The agent's tools and the embedded judge's rubric, on hand-written conversations."""

import json

import pytest

from app.backends.embedded.judge import grade, judge
from app.knowledge_graph.service import demo_graph
from app.agent.prompt import initial_messages
from app.agent.tools import AgentTools
from app.agent.transcript import parse_transcript


@pytest.fixture
def graph():
    return demo_graph()


@pytest.fixture
def scenario(graph):
    return next(iter(graph.scenarios.values()))


def test_bad_tool_calls_become_error_results(graph, scenario):
    tools = AgentTools(graph, scenario, graph.initial_scores)
    cases = [
        ("get_connected_nodes", '{"node_id": "no-such-node"}', "unknown node id"),
        ("get_relevant_context", "{not json", "malformed arguments"),
        ("get_relevant_context", '["a"]', "must be a JSON object"),
        ("get_relevant_context", '{"id": "x"}', "bad arguments"),
        ("send_email", "{}", "unknown tool"),
        ("finalize_email", '{"subject": "s", "body": "b", "citations": ["ghost"]}', "unknown citation ids"),
        ("finalize_email", '{"subject": "s", "body": "b", "citations": "a"}', "citations must be a list"),
    ]
    for name, arguments, message in cases:
        assert message in json.loads(tools.call(name, arguments))["error"]
    assert tools.final_email is None


def test_connected_nodes_come_best_first(graph, scenario):
    seed = scenario.seed_nodes[0]
    neighbors = [n.id for n in graph.neighbors(seed)]
    scores = dict(graph.initial_scores) | {neighbors[-1]: 3.0}
    listed = json.loads(AgentTools(graph, scenario, scores).call("get_connected_nodes", json.dumps({"node_id": seed})))["neighbors"]
    assert listed[0]["id"] == neighbors[-1] and listed[0]["score"] == 3.0
    assert [n["score"] for n in listed] == sorted((n["score"] for n in listed), reverse=True)


def conversation(graph, scenario, reads, citations, body=None):
    """A transcript that reads `reads` and finalizes citing `citations`."""
    tools = AgentTools(graph, scenario, graph.initial_scores)
    messages = initial_messages(graph, scenario, graph.initial_scores, 6)
    calls = [("get_relevant_context", {"node_id": n}) for n in reads]
    name = scenario.prospect.name.split()[0]
    body = body or (
        f"Hi {name},\n\nAs {scenario.prospect.role} at {scenario.prospect.company}, "
        + " ".join(graph.nodes[n].text for n in citations)
        + "\n\nWould you be open to a 20-minute call next week?\n\nBest,\nAlex"
    )
    calls.append(("finalize_email", {"subject": f"{scenario.prospect.company} idea", "body": body, "citations": citations}))
    for i, (tool, args) in enumerate(calls):
        call = {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": tools.call(tool, json.dumps(args))})
    return messages


def test_judge_rewards_grounded_relevant_efficient_emails(graph, scenario):
    from app.backends.embedded.policy import ProspectView

    view = ProspectView(scenario.prospect.model_dump())
    transcript_nodes = parse_transcript(conversation(graph, scenario, list(graph.nodes), list(graph.nodes)[:0])).nodes
    ranked = sorted(transcript_nodes.values(), key=lambda n: -view.relevance(n)[0])
    relevant, irrelevant = [n.id for n in ranked[:2]], [n.id for n in ranked[-2:]]

    good, parts = grade(parse_transcript(conversation(graph, scenario, relevant, relevant)))
    off_topic, _ = grade(parse_transcript(conversation(graph, scenario, irrelevant, irrelevant)))
    unread, unread_parts = grade(parse_transcript(conversation(graph, scenario, [], relevant)))
    wasteful, _ = grade(parse_transcript(conversation(graph, scenario, relevant + irrelevant, relevant)))
    no_ask, _ = grade(parse_transcript(conversation(graph, scenario, relevant, relevant, body=f"Hi,\n\n{graph.nodes[relevant[0]].text}\n\nThanks.")))
    assert parts["grounding"] == 1.0 and unread_parts["grounding"] == 0.0
    assert good > off_topic and good > unread and good > wasteful and good > no_ask
    assert 0.0 <= min(good, off_topic, unread, wasteful, no_ask) and good <= 1.0
    assert grade(parse_transcript(initial_messages(graph, scenario, graph.initial_scores, 6)))[0] == 0.0


def test_judge_answers_rulers_request_format(graph, scenario):
    a = conversation(graph, scenario, scenario.seed_nodes[:1], scenario.seed_nodes[:1])
    b = conversation(graph, scenario, [], scenario.seed_nodes[:1])
    shared = 2  # system and user messages
    user = (
        f"<context>\n{json.dumps(a[:shared])}\n</context>\n\nTrajectories:\n\n"
        f'<trajectory id="1">\n{json.dumps(a[shared:])}\n</trajectory>\n\n'
        f'<trajectory id="2">\n{json.dumps(b[shared:])}\n</trajectory>'
    )
    answer = judge([{"role": "system", "content": "rubric"}, {"role": "user", "content": user}])
    assert [s["trajectory_id"] for s in answer["scores"]] == ["1", "2"]
    assert answer["scores"][0]["score"] > answer["scores"][1]["score"]
    assert "grounding" in answer["scores"][0]["explanation"]
