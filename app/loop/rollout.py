"""One rollout: the agent explores the knowledge graph with tools and finalizes an email."""

from openai import AsyncOpenAI

from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario
from app.agent.prompt import initial_messages
from app.agent.schemas import ScenarioContext
from app.agent.tools import TOOLS, AgentTools
from app.loop.schemas import EmailTrajectory
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
    rollout_index: int = 0,
    context: ScenarioContext | None = None,
) -> EmailTrajectory:
    tools = AgentTools(graph, scenario, scores)
    trajectory = EmailTrajectory(
        messages_and_choices=initial_messages(graph, scenario, scores, max_turns, context),
        tools=TOOLS,
        scenario_id=scenario.id,
        rollout=rollout_index,
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
    trajectory.turns, trajectory.email = turns, tools.final_email
    trajectory.metadata |= {"scenario_id": scenario.id, "finalized": trajectory.email is not None}  # for ART's logs
    return trajectory.finish()
