"""A policy writing for prospects it never saw: a draft batch's chunks and an evaluation's held-out prospects both
write through here, so both measure what users send."""

from dataclasses import dataclass

from app.agent.schemas import ScenarioContext
from app.engine.executor import Executor
from app.knowledge_graph.graph import KnowledgeGraph, ScenarioScores
from app.knowledge_graph.schemas import Prospect, Scenario
from app.loop.email import Written, write_email
from app.loop.generation import Policy
from app.loop.reward import Judge
from app.policies import repository as policies
from app.policies.likeness import most_like
from app.policies.repository import LearnedPolicy
from app.policies.schemas import PolicyRef


class DraftingFailed(Exception):
    pass


@dataclass
class Writer:
    """A policy as it drafts: its model pinned to its checkpoint, what it learned per training scenario, its judge."""

    policy: LearnedPolicy
    model: Policy
    scores: ScenarioScores
    lessons: dict
    training: list[Scenario]
    judge: Judge


async def writer(executor: Executor, graph: KnowledgeGraph, run_id: str, iteration: int) -> Writer:
    async with executor.services.db.read() as session:
        policy = await policies.find(session, PolicyRef(run_id, iteration))
        if policy is None:
            raise DraftingFailed(f"policy {run_id}@{iteration} is gone")
        scores = await policies.node_scores(session, policy)
        lessons = await policies.lessons(session, policy) or {}
    model = await executor.policy(policy.run_id, policy.backend)
    if policy.training_step is not None:
        model = model.at(policy.training_step)
    training = [graph.scenarios[s] for s in policy.config.scenario_ids if s in graph.scenarios]
    if not training:
        raise DraftingFailed(f"graph {graph.id!r} no longer has the scenarios policy {policy.id!r} was trained on")
    return Writer(policy, model, scores, lessons, training, executor.judge_named(policy.config.judge))


async def write_for(author: Writer, graph: KnowledgeGraph, prospect_record: dict, seed: int) -> tuple[str, Written]:
    """The email `author` writes to a prospect it never saw, with the learned state of the training scenario the
    prospect is most like (whose id comes back with it)."""
    prospect = Prospect.model_validate({k: prospect_record[k] for k in ("name", "role", "company", "industry", "pains")})
    like = most_like(prospect, author.training)
    scenario = Scenario.model_construct(id=prospect_record["id"], prospect=prospect, goal=prospect_record["goal"],
                                        seed_nodes=like.seed_nodes)
    context = author.lessons.get(like.id)
    written = await write_email(author.model, graph, scenario, author.scores.of(like.id), author.policy.config, author.judge,
                                ScenarioContext.model_validate(context) if context else None, seed=seed)
    return like.id, written
