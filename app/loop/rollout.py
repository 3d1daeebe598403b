"""One rollout: the agent explores the knowledge graph with tools and finalizes an email."""

import art
from openai import AsyncOpenAI

from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.loop.schemas import Email
from app.loop.tools import TOOLS, AgentTools, initial_messages
from app.observability import traced


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
) -> art.Trajectory:
    tools = AgentTools(graph, scenario, scores)
    trajectory = art.Trajectory(
        messages_and_choices=initial_messages(graph, scenario, scores, max_turns),
        tools=TOOLS,
        metadata={"scenario_id": scenario.id},
    )
    turns = 0
    while turns < max_turns and tools.final_email is None:
        turns += 1
        response = await client.chat.completions.create(
            model=model_name,
            messages=trajectory.messages(),
            tools=TOOLS,
            temperature=0 if greedy else 1,
            seed=None if seed is None else seed + turns,
            logprobs=logprobs,
        )
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        if not choice.message.tool_calls:
            break
        for call in choice.message.tool_calls:
            result = tools.call(call.function.name, call.function.arguments)
            trajectory.messages_and_choices.append({"role": "tool", "tool_call_id": call.id, "content": result})
    email = tools.final_email
    trajectory.metadata |= {
        "turns": turns,
        "finalized": email is not None,
        "subject": email.subject if email else "",
        "body": email.body if email else "",
        "citations": ",".join(email.citations) if email else "",
    }
    return trajectory.finish()


def email_of(trajectory: art.Trajectory) -> Email | None:
    meta = trajectory.metadata
    if not meta.get("finalized"):
        return None
    citations = str(meta.get("citations") or "")
    return Email(subject=str(meta["subject"]), body=str(meta["body"]), citations=citations.split(",") if citations else [])
