"""The agent's tools and the embedded judge's rubric, on hand-written conversations."""

import json

import pytest

from app.agent.prompt import initial_messages
from app.agent.tools import AgentTools
from app.agent.transcript import parse_transcript
from app.backends.embedded.judge import grade, judge
from app.knowledge_graph.service import demo_graph


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


def test_the_rubric_weights_are_pinned():
    """docs/architecture/embedded-backend.md documents these weights: a change to one is a change to the docs."""
    from app.backends.embedded.judge import ASK_OFF_GOAL, RUBRIC_WEIGHTS

    assert RUBRIC_WEIGHTS == {
        "pains_answered": 0.20, "ask": 0.15, "proof": 0.10, "citations_used": 0.10, "length": 0.10, "grounding": 0.05,
        "efficiency": 0.05, "seller": 0.05, "no_echo": 0.05, "grammar": 0.05, "no_filler": 0.05, "personalization": 0.05,
    }
    assert sum(RUBRIC_WEIGHTS.values()) == pytest.approx(1.0) and ASK_OFF_GOAL == 0.5


def test_the_score_is_the_weighted_sum_of_the_criteria(graph, scenario):
    from app.backends.embedded.judge import RUBRIC_WEIGHTS

    relevant = ["case-study-meridian-health", "compliance-hipaa"]
    score, parts = grade(parse_transcript(conversation(graph, scenario, relevant, relevant)))
    assert set(parts) == set(RUBRIC_WEIGHTS) and all(0.0 <= v <= 1.0 for v in parts.values())
    assert score == pytest.approx(sum(RUBRIC_WEIGHTS[k] * v for k, v in parts.items()))


SALES = """Hi Priya,

I'm Alex from Lumora Systems, a data reliability and workflow automation company. As Saint Aldric Health's CTO, you \
are likely dealing with PHI leaking into analytics tools.

One customer's results speak to exactly that, as well as to broken clinical dashboards: {meridian}

Our HIPAA and BAAs compliance addresses HIPAA audit pressure: {hipaa}

Would you be open to a 30-minute discovery call about monitoring clinical data pipelines without exposing PHI?

Cheers,
Alex"""


def test_each_criterion_marks_down_the_email_that_breaks_it(graph, scenario):
    """A salesperson's email, then the same email with one thing a salesperson would fix: each costs its criterion."""
    cited = ["case-study-meridian-health", "compliance-hipaa"]
    meridian, hipaa = graph.nodes[cited[0]].text, graph.nodes[cited[1]].text.split(". ")[-1]
    good = SALES.format(meridian=meridian, hipaa=hipaa)
    breaks = {
        "seller": good.replace("I'm Alex from Lumora Systems, a data reliability and workflow automation company. ", ""),
        "no_echo": good.replace("Our HIPAA and BAAs compliance addresses HIPAA audit pressure:", "Regarding HIPAA audit pressure:"),
        "ask": good.replace("Would you be open to a 30-minute discovery call about", "Shall I send you a summary about"),
        "no_filler": good.replace("Would you be open", "I have kept this to the specifics, rather than a generic pitch.\n\nWould you be open"),
        "grammar": good.replace("Saint Aldric Health's", "Saint Aldric Health's's").replace("a data", "an data"),
        "pains_answered": SALES.format(meridian=meridian, hipaa="We care about compliance."),
        "proof": good.replace(meridian, meridian.split(". ")[0] + "."),
        "length": good.replace("Would you be open", " ".join([meridian] * 3) + "\n\nWould you be open"),
    }
    score, parts = grade(parse_transcript(conversation(graph, scenario, cited, cited, body=good)))
    assert score > 0.9 and parts["seller"] == parts["no_echo"] == parts["ask"] == parts["grammar"] == 1.0
    for criterion, body in breaks.items():
        worse, worse_parts = grade(parse_transcript(conversation(graph, scenario, cited, cited, body=body)))
        assert worse_parts[criterion] < parts[criterion], criterion
        assert worse < score, criterion
