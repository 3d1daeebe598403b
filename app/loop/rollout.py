"""One rollout: the agent explores the knowledge graph with tools and finalizes an email.

A turn answered in text does not end it: a tool call written as JSON is run, an email written out is
taken as the final one, and anything else gets a short correction while turns remain. The last turn
asks for `finalize_email` by `tool_choice`.
"""

import openai
from openai import AsyncOpenAI

from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.agent.prompt import initial_messages
from app.agent.schemas import ScenarioContext
from app.agent.email_text import email_from_text, tool_call_from_text
from app.agent.tools import TOOL_NAMES, TOOLS, AgentTools
from app.loop.schemas import EmailTrajectory, EndReason
from app.observability import traced


FINALIZE = {"type": "function", "function": {"name": "finalize_email"}}
CORRECTION = ("Answer with a tool call, not text: explore with get_connected_nodes and get_relevant_context, and submit the "
              "email by calling finalize_email with subject, body and the ids of the nodes you cite. If you cannot call "
              "tools, write the email itself: a first line starting 'Subject:', then the body.")


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
) -> EmailTrajectory:
    tools = AgentTools(graph, scenario, scores)
    trajectory = EmailTrajectory(
        messages_and_choices=initial_messages(graph, scenario, scores, max_turns, context),
        tools=TOOLS,
        scenario_id=scenario.id,
        rollout=rollout_index,
    )
    turns, cut, tool_choice = 0, False, True
    while turns < max_turns and tools.final_email is None:
        turns += 1
        last = turns == max_turns
        request = {"model": model_name, "messages": trajectory.messages(), "tools": TOOLS, "max_tokens": max_tokens,
                   "temperature": 0 if greedy else 1, "seed": None if seed is None else seed + turns, "logprobs": logprobs}
        try:
            if last and tool_choice:
                try:
                    response = await client.chat.completions.create(**request, tool_choice=FINALIZE)
                except openai.BadRequestError as exc:
                    if _context_full(exc):
                        raise
                    tool_choice = False  # a server that takes no named tool_choice: ask without it
                    response = await client.chat.completions.create(**request)
            else:
                response = await client.chat.completions.create(**request)
        except openai.BadRequestError as exc:
            if turns == 1 or not _context_full(exc):
                raise
            trajectory.end_reason = EndReason.CONTEXT_FULL
            break
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        cut = choice.finish_reason == "length"
        if choice.message.tool_calls:
            for call in choice.message.tool_calls:
                result = tools.call(call.function.name, call.function.arguments)
                trajectory.messages_and_choices.append({"role": "tool", "tool_call_id": call.id, "content": result})
            continue
        text = choice.message.content or ""
        if written := tool_call_from_text(text, TOOL_NAMES):
            name, arguments = written
            trajectory.messages_and_choices.append({"role": "user", "content": f"Result of {name}: {tools.call(name, arguments)}"})
        elif (email := email_from_text(text, tools.read)) is not None:
            tools.final_email, trajectory.end_reason = email, EndReason.PARSED_FROM_TEXT
        elif not last:
            trajectory.corrections += 1
            trajectory.messages_and_choices.append({"role": "user", "content": CORRECTION})
    if trajectory.end_reason is None:
        trajectory.end_reason = (EndReason.FINALIZED if tools.final_email is not None
                                 else EndReason.CUT_BY_LENGTH if cut else EndReason.OUT_OF_TURNS)
    trajectory.turns, trajectory.email = turns, tools.final_email
    trajectory.metadata |= {"scenario_id": scenario.id, "finalized": trajectory.email is not None,  # for ART's logs
                            "end_reason": trajectory.end_reason.value}
    return trajectory.finish()
