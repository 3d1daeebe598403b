"""A policy writing for prospects it never saw: a draft batch's chunks and an evaluation's held-out prospects both
write through here, so both measure what users send."""

from dataclasses import dataclass

from app.agent.schemas import ScenarioContext
from app.engine.executor import Executor
from app.knowledge_graph.graph import KnowledgeGraph, NodeScores, ScenarioScores
from app.knowledge_graph.schemas import Prospect, Scenario
from app.learned import store
from app.learned.likeness import most_like
from app.learned.models import Policy as KeptPolicy
from app.loop.email import Written, write_email
from app.loop.generation import Policy
from app.loop.reward import Judge
from app.runs.schemas import EffectiveConfig


class DraftingFailed(Exception):
    pass


@dataclass
class Writer:
    """A kept policy as it drafts: its model pinned to its checkpoint, what it learned per training scenario (as kept),
    its run's configuration, its judge."""

    policy: KeptPolicy
    config: EffectiveConfig
    model: Policy
    scores: ScenarioScores
    lessons: dict
    training: list[Scenario]
    judge: Judge


async def writer(executor: Executor, graph: KnowledgeGraph, policy_id: str) -> Writer:
    async with executor.services.db.read() as session:
        policy = await session.get(KeptPolicy, policy_id)
    if policy is None:
        raise DraftingFailed(f"policy {policy_id} is gone")
    config = EffectiveConfig.model_validate(policy.config)
    model = await executor.policy(store.serving_key(policy), policy.backend)
    if policy.training_step is not None:
        model = model.at(policy.training_step)
    training = [graph.scenarios[s] for s in config.scenario_ids if s in graph.scenarios]
    if not training:
        raise DraftingFailed(f"graph {graph.id!r} no longer has the scenarios policy {policy.source!r} was trained on")
    scores = ScenarioScores({s: NodeScores(nodes) for s, nodes in policy.node_scores.items()})
    return Writer(policy, config, model, scores, policy.lessons or {}, training, executor.judge_named(config.judge))


async def write_for(author: Writer, graph: KnowledgeGraph, prospect_record: dict, seed: int) -> tuple[str, Written]:
    """The email `author` writes to a prospect it never saw, with the learned state of the training scenario the
    prospect is most like (whose id comes back with it)."""
    prospect = Prospect.model_validate({k: prospect_record[k] for k in ("name", "role", "company", "industry", "pains")})
    like = most_like(prospect, author.training)
    scenario = Scenario.model_construct(id=prospect_record["id"], prospect=prospect, goal=prospect_record["goal"],
                                        seed_nodes=like.seed_nodes)
    context = author.lessons.get(like.id)
    written = await write_email(author.model, graph, scenario, author.scores.of(like.id), author.config, author.judge,
                                ScenarioContext.model_validate(context) if context else None, seed=seed)
    return like.id, written
