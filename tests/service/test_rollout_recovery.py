"""A rollout keeps a model on track that answers in text, over real HTTP to an OpenAI-compatible server."""

import json

import pytest
from openai import AsyncOpenAI

from app.agent.facts import scenario_starts
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph
from app.loop.rollout import CORRECTION, FINALIZE_NOW, GROUND, STRUCTURED, STRUCTURED_MAX_TOKENS, rollout
from app.loop.schemas import EndReason
from app.runs.schemas import LearnLoopRequest
from tests.standins import ScriptedTextModel

GRAPH = demo_graph()
SCENARIO = next(iter(GRAPH.scenarios.values()))
NODE = SCENARIO.seed_nodes[0]
EMAIL_BODY = ("Hi there,\n\nTeams like yours lose hours every week to manual reporting, and our platform turns that into "
              "minutes with the audit trail built in. Three regional systems made the switch last quarter.\n\n"
              "Would a 20-minute call next Tuesday work?\n\nBest,\nSam")


async def run(script: list, max_turns: int = 6, **model) -> tuple:
    with ScriptedTextModel(script, **model) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        trajectory = await rollout(client, "small", GRAPH, SCENARIO, NodeScores(), max_turns=max_turns, seed=1,
                                   logprobs=False, max_tokens=256)
        return trajectory, server.requests


async def test_text_turns_get_a_correction_and_a_written_out_email_is_the_final_one():
    title = GRAPH.nodes[NODE].title
    trajectory, requests = await run([
        ("<start_nodes>[...]</start_nodes>", "length"),  # an echoed prompt, cut: corrected, not the end
        (f'```json\n{json.dumps({"name": "get_relevant_context", "arguments": {"node_id": NODE}})}\n```', "stop"),
        (f"Subject: About {title}\n\n{EMAIL_BODY}\nIt is built on {title}.", "stop"),
    ])
    assert trajectory.end_reason == EndReason.PARSED_FROM_TEXT and trajectory.turns == 3 and trajectory.corrections == 1
    assert trajectory.email.subject == f"About {title}" and trajectory.email.citations == [NODE]  # read, and mentioned
    corrections = [m for m in requests[1]["messages"] if m["role"] == "user" and m["content"] == CORRECTION]
    assert len(corrections) == 1
    assert requests[2]["messages"][-1]["content"].startswith("Result of get_relevant_context: ")
    assert all(r["max_tokens"] == 256 and "tool_choice" not in r for r in requests)
    # after the turn in text, each turn asks for a tool call as JSON under a schema instead of by tools
    assert "tools" in requests[0] and "response_format" not in requests[0]
    assert all("tools" not in r and r["response_format"]["json_schema"]["name"] == "tool_call" for r in requests[1:])
    assert trajectory.json_turns == 2


async def test_an_email_written_out_that_cites_nothing_read_is_final_only_on_the_last_turn():
    written = (f"Subject: A note for you\n\n{EMAIL_BODY}", "stop")
    trajectory, requests = await run([written], max_turns=3)
    assert trajectory.end_reason == EndReason.PARSED_FROM_TEXT and trajectory.turns == 3 and trajectory.email.citations == []
    assert trajectory.corrections == 2 and requests[1]["messages"][-1] == {"role": "user", "content": GROUND}


def names_offered(request: dict) -> list[str]:
    schema = request["response_format"]["json_schema"]["schema"]
    return [option["properties"]["name"]["const"] for option in schema.get("anyOf", [schema])]


async def test_after_a_turn_in_text_the_agent_explores_and_cites_through_tool_calls_under_a_schema():
    """As llama-server does with a chat template without tools: `tools` ignored, `response_format` obeyed."""
    read = json.dumps({"name": "get_relevant_context", "arguments": {"node_id": NODE}})
    final = json.dumps({"name": "finalize_email", "arguments": {"subject": "About it", "body": EMAIL_BODY, "citations": [NODE]}})
    trajectory, requests = await run([("<start_nodes>[...]</start_nodes>", "stop"), (read, "stop"), (final, "stop")])
    assert trajectory.end_reason == EndReason.FINALIZED and trajectory.email.citations == [NODE]
    assert trajectory.turns == 3 and trajectory.json_turns == 2 and trajectory.corrections == 1
    # nothing read yet: only the exploring tools, on the nodes the prompt showed (the seeds, then facts for the pains)
    assert names_offered(requests[1]) == ["get_connected_nodes", "get_relevant_context"]
    node_ids = requests[1]["response_format"]["json_schema"]["schema"]["anyOf"][1]["properties"]["arguments"]
    assert node_ids["properties"]["node_id"]["enum"] == scenario_starts(GRAPH, SCENARIO)
    # a node read: finalize_email too, citing 1 to 8 of the nodes read
    assert names_offered(requests[2]) == ["get_connected_nodes", "get_relevant_context", "finalize_email"]
    cited = requests[2]["response_format"]["json_schema"]["schema"]["anyOf"][2]["properties"]["arguments"]["properties"]
    assert cited["citations"] == {"type": "array", "items": {"type": "string", "enum": [NODE]}, "minItems": 1, "maxItems": 1}

    # a call that would repeat one made is not offered again: it would return what the agent already has
    listed = json.dumps({"name": "get_connected_nodes", "arguments": {"node_id": NODE}})
    _, requests = await run([("Thinking.", "stop"), (listed, "stop"), ("Thinking.", "stop")])
    offered = {o["properties"]["name"]["const"]: o["properties"]["arguments"]["properties"]["node_id"]["enum"]
               for o in requests[2]["response_format"]["json_schema"]["schema"]["anyOf"]}
    assert NODE not in offered["get_connected_nodes"] and NODE in offered["get_relevant_context"]
    assert set(offered["get_connected_nodes"]) > set(SCENARIO.seed_nodes) - {NODE}  # and its neighbours are now shown

    # with one turn left before the last and nothing read, a read; the last turn offers finalize_email alone, says
    # so, and has room for the whole email
    _, requests = await run([("Thinking.", "stop")], max_turns=3)
    assert [names_offered(r) for r in requests[1:3]] == [["get_relevant_context"], ["finalize_email"]]
    assert requests[2]["messages"][-1] == {"role": "user", "content": FINALIZE_NOW}
    assert [r["max_tokens"] for r in requests[:3]] == [256, 256, STRUCTURED_MAX_TOKENS]

    # a server that refuses response_format is asked again plainly, that turn and every turn after it
    refused, requests = await run([("Thinking.", "stop")], max_turns=3, rejects="response_format")
    assert refused.end_reason == EndReason.OUT_OF_TURNS and refused.json_turns == 1
    assert [("response_format" in r, "tools" in r) for r in requests] == [
        (False, True), (True, False), (False, True), (False, True)]  # the last: tool_choice, no JSON asked after it


async def test_the_last_turn_asks_for_finalize_email_and_says_how_the_rollout_ended():
    read = {"name": "get_relevant_context", "arguments": {"node_id": NODE}}
    trajectory, requests = await run([read, read, ("I am thinking.", "stop")], max_turns=3)
    assert trajectory.end_reason == EndReason.OUT_OF_TURNS and trajectory.email is None and trajectory.corrections == 0
    assert [r.get("tool_choice") for r in requests] == [None, None, {"type": "function", "function": {"name": "finalize_email"}}, None]
    schema = requests[-1]["response_format"]["json_schema"]["schema"]  # then the email as JSON, citing what was read
    assert schema["properties"]["citations"]["items"]["enum"] == [NODE] and "tools" not in requests[-1]
    assert requests[-1]["max_tokens"] == STRUCTURED_MAX_TOKENS > requests[0]["max_tokens"] == 256  # room for the whole JSON
    cut, _ = await run([("Dear", "length")], max_turns=2)
    assert cut.end_reason == EndReason.CUT_BY_LENGTH
    finalized, _ = await run([{"name": "finalize_email", "arguments": {"subject": "s", "body": "b", "citations": []}}])
    assert finalized.end_reason == EndReason.FINALIZED and finalized.turns == 1


async def test_a_conversation_that_outgrows_the_context_window_ends_the_rollout_not_the_run():
    read = {"name": "get_relevant_context", "arguments": {"node_id": NODE}}
    with ScriptedTextModel([read]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        first_turn = len(json.dumps((await rollout(client, "small", GRAPH, SCENARIO, NodeScores(), max_turns=1,
                                                   logprobs=False)).messages()[:2]))
    trajectory, requests = await run([read], max_turns=6, context_chars=first_turn + 1500)
    assert trajectory.end_reason == EndReason.CONTEXT_FULL and trajectory.email is None
    assert 1 < trajectory.turns < 6 and len(requests) == trajectory.turns


async def test_a_server_that_rejects_a_named_tool_choice_is_asked_again_without_it():
    read = {"name": "get_relevant_context", "arguments": {"node_id": NODE}}
    trajectory, requests = await run([read, ("I am thinking.", "stop")], max_turns=2, rejects_tool_choice=True)
    assert trajectory.end_reason == EndReason.OUT_OF_TURNS and trajectory.turns == 2
    assert [("tool_choice" in r) for r in requests] == [False, True, False, False]


async def test_a_last_turn_in_text_is_followed_by_one_request_for_the_email_as_json_under_a_schema():
    """A server that ignores `tool_choice` on the last turn after the agent used tools gets asked for the email."""
    title = GRAPH.nodes[NODE].title
    read = {"name": "get_relevant_context", "arguments": {"node_id": NODE}}
    written = json.dumps({"subject": f"About {title}", "body": "Hi Priya, a short note.", "citations": [NODE, "ghost", NODE]})
    trajectory, requests = await run([read, ("<start_nodes>[...]</start_nodes>", "stop")], max_turns=2,
                                     structured=(written, "stop"))
    assert trajectory.end_reason == EndReason.STRUCTURED and trajectory.turns == 2 and len(requests) == 3
    assert trajectory.email.subject == f"About {title}" and trajectory.email.citations == [NODE]  # only what it read
    assert requests[-1]["messages"][-1] == {"role": "user", "content": STRUCTURED}
    for answer in (("{\"subject\": \"cut at the lim", "length"), ("Subject: no JSON here", "stop")):
        unusable, _ = await run([("Thinking.", "stop")], max_turns=1, structured=answer)
        assert unusable.email is None and unusable.end_reason in (EndReason.CUT_BY_LENGTH, EndReason.OUT_OF_TURNS)
    refused, requests = await run([("Thinking.", "stop")], max_turns=1, rejects="response_format")
    assert refused.email is None and refused.end_reason == EndReason.OUT_OF_TURNS and len(requests) == 2
    tools_used, requests = await run([read], max_turns=2)  # out of turns calling tools: nothing more is asked
    assert tools_used.end_reason == EndReason.OUT_OF_TURNS and len(requests) == 2


async def test_a_model_that_answers_in_text_still_gets_a_run_through(learn):
    """Every turn of the greedy attempt is text; the sampled attempts and then the iteration's best step in."""
    written = [(f"Subject: A note for you\n\n{EMAIL_BODY}", "stop")]
    with ScriptedTextModel([("Let me see.", "stop"), ("Still thinking.", "stop"), *written]) as model:
        learned = await learn(LearnLoopRequest(backend="openai", iterations=1, rollouts_per_group=2, max_turns=2,
                                               scenario_ids=[SCENARIO.id], in_context=False),
                              openai_base_url=model.base_url, openai_model="small", openai_api_key="k")
    assert learned.run["status"] == "failed" and learned.run["error"]["step"] == "email"
    message = learned.run["error"]["message"]
    assert "in 4 attempts of at most 2 turns" in message and "ran out of turns 4 times" in message
    assert "answered in text instead of calling a tool 4 times" in message

    with ScriptedTextModel([("Let me see.", "stop"), *written]) as model:
        learned = await learn(LearnLoopRequest(backend="openai", iterations=1, rollouts_per_group=2, max_turns=2,
                                               scenario_ids=[SCENARIO.id], in_context=False),
                              openai_base_url=model.base_url, openai_model="small", openai_api_key="k")
    assert learned.run["status"] == "succeeded", learned.run
    record = learned.iterations[1]
    assert record["metrics"]["end/parsed_from_text"] == 2 and record["metrics"]["corrections"] == 2
    assert record["email"]["subject"] == "A note for you"


@pytest.mark.parametrize("field", ["seed", "tools"])
async def test_a_server_that_rejects_what_the_run_sends_fails_it_at_start_with_its_own_message(learn, field):
    with ScriptedTextModel([("Hello.", "stop")], rejects=field) as model:
        learned = await learn(LearnLoopRequest(backend="openai", iterations=1, scenario_ids=[SCENARIO.id]),
                              openai_base_url=model.base_url, openai_model="small", openai_api_key="k")
        calls = len(model.requests)
    assert learned.run["status"] == "failed" and learned.run["error"]["step"] == "start", learned.run
    assert f"(400): unsupported parameter: {field}" in learned.run["error"]["message"]
    assert learned.iterations == [] and calls == 1  # a refusal is not retried


async def test_a_fixed_model_is_never_asked_for_logprobs(learn):
    """Only a backend that trains on them needs them, and some servers refuse them."""
    with ScriptedTextModel([(f"Subject: A note for you\n\n{EMAIL_BODY}", "stop")], rejects="logprobs") as model:
        learned = await learn(LearnLoopRequest(backend="openai", iterations=1, rollouts_per_group=2, scenario_ids=[SCENARIO.id]),
                              openai_base_url=model.base_url, openai_model="small", openai_api_key="k")
    assert learned.run["status"] == "succeeded", learned.run


async def sent_and_typed(script: list, **model) -> tuple[list[dict], list[dict]]:
    """The bodies a rollout sent, and those `create(**body)` sends for the same arguments."""
    with ScriptedTextModel(script, **model) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        await rollout(client, "small", GRAPH, SCENARIO, NodeScores(), max_turns=3, seed=1, logprobs=False, max_tokens=256)
        sent = list(server.requests)
        for body in sent:
            await client.chat.completions.create(**body)
        return sent, server.requests[len(sent):]


async def test_each_request_sends_the_body_the_sdk_would_send_for_the_same_arguments():
    """The conversation and tools go by `extra_body`, past the SDK's per-message walk: the server must see what
    `create(**arguments)` sends, for every kind of turn (tools, a named tool_choice, a schema, the email as JSON)."""
    read = {"name": "get_relevant_context", "arguments": {"node_id": NODE}}
    by_tools = await sent_and_typed([read])  # the last turn names finalize_email
    by_schema = await sent_and_typed([read, ("I am thinking.", "stop")], structured=("not an email", "stop"))
    sent = by_tools[0] + by_schema[0]
    assert {key for body in sent for key in body} >= {"messages", "tools", "tool_choice", "response_format"}
    assert len(sent[-1]["messages"]) > len(sent[0]["messages"]) > 0
    for bodies, typed in (by_tools, by_schema):
        assert bodies == typed  # the same JSON object (its members in another order)
