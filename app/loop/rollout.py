"""One rollout: the agent explores the knowledge graph with tools and finalizes an email.

A turn answered in text does not end it: a tool call written as JSON is run, an email written out is
taken as the final one when it cites a node the agent read (any, on the last turn), and anything else
gets a short correction while turns remain. After a turn in text, each later turn asks for one tool call
as JSON under a schema (`response_format`) instead of by `tools`: a server whose chat template has no
tools (llama.cpp's for SmolLM2) ignores `tools` and `tool_choice` but constrains decoding to a schema,
so the agent still reads nodes and cites them. The last turn asks for `finalize_email` alone (by
`tool_choice`, or by that schema); when it is answered in text all the same, the email is asked for once
more as JSON.
"""

from collections.abc import Mapping

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from app.agent.email_text import email_from_text, tool_call_from_text
from app.agent.prompt import initial_messages
from app.agent.schemas import Email, ScenarioContext
from app.agent.tools import TOOL_NAMES, TOOLS, AgentTools
from app.kit.observability import traced
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.loop.schemas import EndReason
from app.loop.trajectory import EmailTrajectory

FINALIZE = {"type": "function", "function": {"name": "finalize_email"}}
CORRECTION = ("Answer with a tool call, not text: explore with get_connected_nodes and get_relevant_context, and submit the "
              "email by calling finalize_email with subject, body and the ids of the nodes you cite. If you cannot call "
              "tools, write the email itself: a first line starting 'Subject:', then the body.")
GROUND = ("That email cites no facts you have read. Read the nodes you need with get_relevant_context, then submit the "
          "email with finalize_email, citing their ids.")
FINALIZE_NOW = ("Last turn: submit the email now with finalize_email: a short subject, a body of a few sentences for the "
                "prospect, and the ids of the nodes you read that it cites.")
STRUCTURED = ("Write the email now, as JSON: its subject, its body, and the ids of the nodes you read that it cites. "
              "Keep it short.")
STRUCTURED_MAX_TOKENS = 1024  # room for the longest email the schema allows (about 2,300 characters of JSON)


def _context_full(exc: openai.BadRequestError) -> bool:
    """The server's 400 for a prompt longer than its context window (llama.cpp, vLLM and OpenAI each say "context")."""
    return "context" in str(exc.message).lower()


@traced
async def rollout(
    client: AsyncOpenAI,
    model_name: str,
    graph: KnowledgeGraph,
    scenario: Scenario,
    scores: dict[str, float],
    *,
    max_turns: int,
    seed: int | None = None,
    greedy: bool = False,
    logprobs: bool = True,
    rollout_index: int = 0,
    context: ScenarioContext | None = None,
    max_tokens: int = 1024,
    shown_scores: Mapping[str, float] | None = None,
    focus: str | None = None,
) -> EmailTrajectory:
    """Exploring (`app.loop.exploration`): `shown_scores` are the KG scores the agent is shown, and `focus` a node
    its prompt lists among the start nodes."""
    tools = AgentTools(graph, scenario, scores if shown_scores is None else shown_scores)
    if focus:
        tools.seen[focus] = None
    trajectory = EmailTrajectory(
        messages_and_choices=initial_messages(graph, scenario, scores, max_turns, context, shown_scores, focus),
        tools=TOOLS,
        scenario_id=scenario.id,
        rollout=rollout_index,
    )
    turns, cut, answered_in_text = 0, False, False
    takes = {"tool_choice": True, "response_format": True}  # what the server has not refused yet
    while turns < max_turns and tools.final_email is None:
        turns += 1
        last = turns == max_turns
        request = {"model": model_name, "messages": trajectory.messages(), "tools": TOOLS, "max_tokens": max_tokens,
                   "temperature": 0 if greedy else 1, "seed": None if seed is None else seed + turns, "logprobs": logprobs}
        if answered_in_text and takes["response_format"]:
            trajectory.json_turns += 1
            asked = "response_format"
            if last:  # the schema alone leaves a small model writing the email's JSON without knowing it is one
                trajectory.messages_and_choices.append({"role": "user", "content": FINALIZE_NOW})
                request["messages"] = trajectory.messages()
            ask = _without_tools(request) | {
                "max_tokens": max(max_tokens, STRUCTURED_MAX_TOKENS) if last else max_tokens,
                "response_format": _json_schema("tool_call", tools.call_schema(turns_after=max_turns - turns))}
        elif last and takes["tool_choice"]:
            asked, ask = "tool_choice", request | {"tool_choice": FINALIZE}
        else:
            asked, ask = None, request
        try:
            try:
                response = await _complete(client, ask)
            except openai.BadRequestError as exc:
                if asked is None or _context_full(exc):
                    raise
                takes[asked] = False  # a server that refuses it: ask plainly, now and from now on
                response = await _complete(client, request)
        except openai.BadRequestError as exc:
            if turns == 1 or not _context_full(exc):
                raise
            trajectory.end_reason = EndReason.CONTEXT_FULL
            break
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        cut = choice.finish_reason == "length"
        answered_in_text = not choice.message.tool_calls
        if choice.message.tool_calls:
            for call in choice.message.tool_calls:
                result = tools.call(call.function.name, call.function.arguments)
                trajectory.messages_and_choices.append({"role": "tool", "tool_call_id": call.id, "content": result})
            continue
        text = choice.message.content or ""
        if written := tool_call_from_text(text, TOOL_NAMES):
            name, arguments = written
            trajectory.messages_and_choices.append({"role": "user", "content": f"Result of {name}: {tools.call(name, arguments)}"})
        elif (email := email_from_text(text, tools.read)) is not None and (email.citations or last):
            tools.final_email, trajectory.end_reason = email, EndReason.PARSED_FROM_TEXT
        elif not last:  # neither a call nor a grounded email (one citing nothing is final only on the last turn)
            trajectory.corrections += 1
            trajectory.messages_and_choices.append({"role": "user", "content": CORRECTION if email is None else GROUND})
    if (tools.final_email is None and trajectory.end_reason is None and turns == max_turns and answered_in_text
            and takes["response_format"]):
        if (email := await _structured_email(client, request, trajectory, tools)) is not None:
            tools.final_email, trajectory.end_reason = email, EndReason.STRUCTURED
    if trajectory.end_reason is None:
        trajectory.end_reason = (EndReason.FINALIZED if tools.final_email is not None
                                 else EndReason.CUT_BY_LENGTH if cut else EndReason.OUT_OF_TURNS)
    trajectory.turns, trajectory.email = turns, tools.final_email
    trajectory.metadata |= {"scenario_id": scenario.id, "finalized": trajectory.email is not None,  # for ART's logs
                            "end_reason": trajectory.end_reason.value}
    return trajectory.finish()


async def _structured_email(client: AsyncOpenAI, request: dict, trajectory: EmailTrajectory, tools: AgentTools) -> Email | None:
    """The email as JSON under the tools' email schema, asked for after a last turn answered in text; its citations
    limited to the nodes the agent read. None when the server refuses `response_format` or the answer is not such
    JSON."""
    trajectory.messages_and_choices.append({"role": "user", "content": STRUCTURED})
    structured = _without_tools(request) | {
        "messages": trajectory.messages(), "max_tokens": max(request["max_tokens"], STRUCTURED_MAX_TOKENS),
        "response_format": _json_schema("email", tools.email_schema())}
    try:
        response = await _complete(client, structured)
    except openai.BadRequestError:
        return None
    choice = response.choices[0]
    trajectory.messages_and_choices.append(choice)
    try:
        email = Email.model_validate_json(choice.message.content or "")
    except ValidationError:
        return None
    email.citations = [node for node in dict.fromkeys(email.citations) if node in tools.read]
    return email if email.subject.strip() and email.body.strip() else None


# What the agent's requests carry as plain JSON, passed the SDK by. Before sending, `create` walks its typed arguments
# against the request type's unions of message types, about 0.6 ms of CPU per message: 7 ms for a late turn's
# request, a fifth of the run worker's CPU. What it would send for these is what it was given, and `extra_body` is
# merged into the same JSON body after that walk.
PLAIN_JSON = ("messages", "tools", "tool_choice", "response_format")


async def _complete(client: AsyncOpenAI, request: dict) -> ChatCompletion:
    """`chat.completions.create` with the same body, without the walk (the placeholder keeps `messages` required)."""
    typed = {key: value for key, value in request.items() if key not in PLAIN_JSON}
    return await client.chat.completions.create(
        **typed, messages=[], extra_body={key: request[key] for key in PLAIN_JSON if key in request})


def _without_tools(request: dict) -> dict:
    return {key: value for key, value in request.items() if key != "tools"}


def _json_schema(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
