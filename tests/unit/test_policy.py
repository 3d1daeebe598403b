"""The untrained embedded policy's priors: it cites what it read, and keeps what the best email so far did."""

import pytest

from app.agent.facts import answers, scenario_starts
from app.agent.prompt import initial_messages, seller_summary
from app.agent.schemas import Email, ScenarioContext
from app.agent.tools import AgentTools
from app.agent.transcript import SeenNode, Transcript, parse_transcript
from app.backends.embedded.composer import Seller, angle_of, compose, quotable
from app.backends.embedded.policy import Checkpoint, plan_turn, sampler
from app.backends.embedded.server import policy_turn
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph


def _email(graph, scenario, context=None, seed=None, scores=None) -> tuple[Email, list[dict]]:
    """An untrained embedded agent's email for this prompt through the real tools (its most likely
    one without a seed), and the conversation."""
    scores = scores or NodeScores()
    messages = initial_messages(graph, scenario, scores, 6, context)
    tools = AgentTools(graph, scenario, scores)
    turn = 0
    while tools.final_email is None:
        turn += 1  # a seed per turn, as app.loop.rollout sends
        sampling = {"temperature": 0} if seed is None else {"temperature": 1, "seed": 64 * seed + turn}
        message, _ = policy_turn(Checkpoint.initial(), {"messages": messages, **sampling})
        call = message["tool_calls"][0]
        messages += [message, {"role": "tool", "tool_call_id": call["id"],
                               "content": tools.call(call["function"]["name"], call["function"]["arguments"])}]
    return tools.final_email, messages


def test_an_untrained_embedded_agent_keeps_what_the_best_email_so_far_did():
    """The embedded policy reads the exemplar as an LLM would: it reads and cites what the best email
    cited, and writes in its tone, length and kind of ask (its prior, EXEMPLAR_PRIOR)."""
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    prospect = scenario.prospect.model_dump()
    without, _ = _email(graph, scenario)
    answering = [graph.nodes[a.node_id] for a in answers(graph, prospect)]  # facts the composer quotes for it
    cited = [n for n in answering if n.id not in without.citations][:2]
    assert cited
    seen = [SeenNode(n.id, n.type, n.title, 1.0, n.text, tuple(n.tags)) for n in cited]
    subject, body = compose(prospect, seen, "direct", "long", "question", goal=scenario.goal,
                            seller=Seller.of(seller_summary(graph)))
    # what the policy reads back: the tone and the ask, and the length band the exemplar's facts filled (no padding)
    angle = angle_of(body, prospect, scenario.goal)
    assert angle["tone"] == "direct" and angle["cta"] == "question"
    assert angle_of(without.body, prospect, scenario.goal) != angle  # not what it writes anyway
    context = ScenarioContext.model_validate({"exemplar": {"subject": subject, "body": body, "citations": [n.id for n in cited],
                                                           "reward": 0.9, "iteration": 1}, "playbook": []})
    kept, _ = _email(graph, scenario, context)
    assert {n.id for n in cited} <= set(kept.citations)
    assert angle_of(kept.body, prospect, scenario.goal) == angle


def test_an_untrained_agent_that_read_a_fact_cites_one():
    """Only an email finalized before reading a fact that answers a pain cites nothing: 20 sampled rollouts per demo
    scenario."""
    graph = demo_graph()
    finalized_unread = 0
    for scenario in graph.scenarios.values():
        for seed in range(20):
            email, messages = _email(graph, scenario, seed=seed)
            read = parse_transcript(messages).read_nodes
            # what the composer could quote: facts that answer a pain (a price alone answers none)
            assert email.citations or not quotable(scenario.prospect.model_dump(), read), (scenario.id, seed)
            assert set(email.citations) <= {n.id for n in read}
            finalized_unread += not read
    assert finalized_unread < 20  # the prior all but rules out finalizing before reading (under 10%)


def test_an_email_that_would_cite_nothing_cites_the_read_node_the_policy_prefers_most():
    """Not the last one read: with KG scores, the one that worked best before for this prospect."""
    scenario = next(iter(demo_graph().scenarios.values()))
    weights = Checkpoint.initial().weights
    greedy = sampler(weights, None)
    offered = []

    def skip_each_then_greedy(block, features, labels):
        if labels[-1].endswith(":1"):
            return 0  # decline every node, one at a time
        if block == "cite":
            offered.append(labels)
        return greedy(block, features, labels)

    pain = scenario.prospect.pains[0]
    for scores in ((3.0, 0.5, 1.0), (0.5, 1.0, 3.0), (1.0, 3.0, 0.5)):
        nodes = [SeenNode(f"n{i}", "feature", f"Node {i}", score, f"Node {i} stops {pain} for {i + 2} teams.")
                 for i, score in enumerate(scores)]
        t = Transcript(prospect=scenario.prospect.model_dump(), goal=scenario.goal, turns=5, turn_budget=6,
                       nodes={n.id: n for n in nodes})
        call, decisions = plan_turn(t, skip_each_then_greedy)
        assert call["name"] == "finalize_email"
        assert offered[-1] == ["cite_one=n0", "cite_one=n1", "cite_one=n2"]
        assert call["arguments"]["citations"] == [f"n{scores.index(3.0)}"]


def test_an_untrained_agent_weighs_the_nodes_its_prompt_says_worked_before_by_their_evidence():
    """<proven_nodes> advertises a node's score a second time: at the cap it is read and cited far more
    than its score alone would make it, on thin evidence (just above 1.0) hardly more. 100 sampled rollouts."""
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    starts = scenario_starts(graph, scenario)
    proven = [a.node_id for a in answers(graph, scenario.prospect.model_dump()) if a.node_id not in starts][-2:]
    assert proven  # facts that answer the prospect's pains, not among its start nodes

    def citing_proven(score: float) -> float:
        scores = NodeScores({node_id: score for node_id in proven})
        emails = [_email(graph, scenario, seed=seed, scores=scores)[0] for seed in range(100)]
        return sum(bool(set(e.citations) & set(proven)) for e in emails) / len(emails)

    thin, strong = citing_proven(1.05), citing_proven(5.0)
    print(f"emails citing a proven node: {thin:.0%} at 1.05, {strong:.0%} at 5.0")
    assert thin <= 0.55
    assert strong >= thin + 0.3  # the evidence, not the listing, is what counts


def test_a_checkpoint_from_a_policy_with_other_features_is_refused_with_a_reason():
    checkpoint = Checkpoint.initial()
    assert Checkpoint.from_bytes(checkpoint.to_bytes()).weights.keys() == checkpoint.weights.keys()
    checkpoint.weights["read"] = checkpoint.weights["read"][:-1]  # as written before a node feature was added
    with pytest.raises(ValueError, match="start a new one"):
        Checkpoint.from_bytes(checkpoint.to_bytes())
